"""Events about our objects: what one says and which object it is about. Pure, no I/O.

Which changes deserve an Event is each controller's decision (a pure function
of the old and new status, e.g. :func:`mcp_operator.controller.mcpserver.status.events`);
:mod:`mcp_operator.controller.status_writer` posts them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class Event:
    """An Event as a controller decides it (``type`` is Kubernetes' Normal or Warning)."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass(frozen=True)
class ObjectRef:
    """Which object a status write or an Event is about, read from its body on arrival."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str
    resource_version: str | None = None

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> ObjectRef:
        metadata = body.get("metadata") or {}
        return cls(
            api_version=str(body.get("apiVersion") or ""),
            kind=str(body.get("kind") or ""),
            namespace=str(metadata.get("namespace") or ""),
            name=str(metadata.get("name") or ""),
            uid=str(metadata.get("uid") or ""),
            resource_version=metadata.get("resourceVersion"),
        )

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    def involved(self) -> dict[str, Any]:
        """The object as :meth:`Kube.post_event` reads it."""
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "resourceVersion": self.resource_version,
            },
        }
