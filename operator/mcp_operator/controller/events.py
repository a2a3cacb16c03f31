"""Events about our objects: what one is, and posting them (logged as well).

Which changes deserve an Event is each controller's decision (a pure function
of the old and new status, e.g. :func:`mcp_operator.controller.mcpserver.status.events`);
this module only says what an Event is about (:class:`ObjectRef`) and posts it
through :mod:`mcp_operator.kube`, which logs rather than raises when posting fails.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mcp_operator.kube import Kube

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Event:
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


class EventPoster:
    """Posts Events about our objects, each also logged in the operator's own log."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    async def post(self, about: ObjectRef, events: Sequence[Event]) -> None:
        for event in events:
            log = logger.warning if event.type == "Warning" else logger.info
            log("%s %s: %s: %s", about.kind, about, event.reason, event.message)
        involved = about.involved()
        await asyncio.gather(
            *(
                self.kube.post_event(
                    involved, type_=event.type, reason=event.reason, message=event.message
                )
                for event in events
            )
        )
