"""What the controllers use of the API server: the :class:`Kube` protocol.

The controllers are written against this protocol, not against the client that implements it
(:class:`mcp_operator.kube.client.KubeClient`, the one door): the unit tests' in-memory API
server (``tests/unit/fakes.py``) satisfies the same protocol, and mypy checks both. The
meaning of each verb (errors included) is the client's; the fake answers as it does.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any, Protocol

from mcp_operator.kube.resources import Resource


class Kube(Protocol):
    """The API server's verbs, as :class:`~mcp_operator.kube.client.KubeClient` has them."""

    @property
    def server(self) -> str:
        """The API server's URL."""
        ...

    @property
    def in_cluster(self) -> bool:
        """Whether the client uses a Pod's service account (so Service DNS names resolve)."""
        ...

    def proxy_credentials(self) -> tuple[dict[str, str], ssl.SSLContext | bool]:
        """Headers and TLS settings to reach the API server's service proxy."""
        ...

    async def api_server_endpoints(self) -> frozenset[tuple[str, int | None]]:
        """The API server's IP addresses and ports as the client knows them."""
        ...

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
    ) -> Any:
        """One request; the decoded answer. HTTP errors are :class:`~.client.KubeError`."""
        ...

    async def get(self, resource: Resource, namespace: str | None, name: str) -> Any | None:
        """The object, or ``None`` when it does not exist."""
        ...

    async def list(
        self, resource: Resource, namespace: str | None, *, label_selector: str | None = None
    ) -> list[Any]:
        """The items of a list call."""
        ...

    async def apply(self, resource: Resource, manifest: Mapping[str, Any]) -> Any:
        """Server-side apply of an owned child; :class:`~.client.NameConflict` for an object
        of that name that the owner does not control."""
        ...

    async def create(self, resource: Resource, manifest: Mapping[str, Any]) -> Any:
        """Create an object; 409 when it exists already."""
        ...

    async def replace(self, resource: Resource, manifest: Mapping[str, Any]) -> Any:
        """Replace an object; 409 when its ``resourceVersion`` is not the stored one."""
        ...

    async def delete(self, resource: Resource, namespace: str | None, name: str) -> bool:
        """Delete an object; False when it was gone."""
        ...

    async def delete_owned(
        self, resource: Resource, namespace: str | None, name: str, owner_uid: str
    ) -> bool:
        """Delete the object of that name if its controller is ``owner_uid``, never else."""
        ...

    async def patch_status(
        self, resource: Resource, namespace: str, name: str, status: Mapping[str, Any]
    ) -> Any:
        """A JSON merge patch of the status subresource (``None`` values delete fields)."""
        ...

    async def read_secret_key(self, namespace: str, name: str, key: str) -> str:
        """One value of an opted-in Secret; :class:`~.client.SecretReferenceError` else."""
        ...

    async def post_event(
        self, involved: Mapping[str, Any], *, type_: str, reason: str, message: str
    ) -> None:
        """An Event about ``involved``; failures are logged, never raised."""
        ...

    async def close(self) -> None:
        """Release the client's connections."""
        ...
