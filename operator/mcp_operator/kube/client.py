"""The one door to the Kubernetes API server.

Everything the operator reads or writes outside kopf's own watching goes
through :class:`KubeClient`: server-side apply of owned objects (one field manager; an object of
the name that the owner does not control is refused, :mod:`.ownership`),
merge patches of the ``status`` subresource, reads of Secrets referenced by a
spec (checked by :mod:`.secrets`), and Events (:mod:`.events`). Every refusal is mapped to
an exception by :func:`~mcp_operator.kube.errors.error_of`. The client is asynchronous
(httpx) so nothing blocks kopf's event loop; it is created once at start-up and closed at
clean-up. The controllers see it as a :class:`~mcp_operator.kube.protocol.Kube`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import ssl
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from mcp_operator import FIELD_MANAGER
from mcp_operator.kube import ownership
from mcp_operator.kube.credentials import Credential, Credentials, in_time, load_credentials
from mcp_operator.kube.errors import (
    ApiUnreachable,
    KubeError,
    NameConflict,
    NotFound,
    SecretReferenceError,
    error_of,
)
from mcp_operator.kube.events import event_body
from mcp_operator.kube.resources import EVENTS, SECRETS, Resource
from mcp_operator.kube.secrets import secret_value
from mcp_operator.kube.tls import CertificateTransport, client_context
from mcp_operator.net.transport import Http1Transport

logger = logging.getLogger(__name__)

CONNECTIONS = 20
"""Requests to the API server at once, each on a kept-alive connection (the pool's cap);
twenty keep a 2-core API server busy. More wait their turn in the pool, within their own
time limit."""
REQUEST_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
EVENT_RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
"""Waits between attempts to post an Event while the API server or etcd is away (about 1 min)."""


class KubeClient:
    """An asynchronous client of one API server (a :class:`~.protocol.Kube`); create with
    :meth:`connect`."""

    def __init__(
        self,
        credentials: Credentials,
        *,
        on_error: Callable[[str, int | None], None] | None = None,
    ) -> None:
        self._credentials = credentials
        self._on_error = on_error
        """Hears every failed request: its verb and HTTP status (``None``: no answer)."""
        credential = credentials.cached()
        # Connections are kept alive (a fleet reconciling at once would otherwise pay a TLS
        # handshake per request), on the lean pool of net/transport.py.
        self._transport: CertificateTransport | Http1Transport | None = None
        if credential.proxy is None and not _proxied(credential.server):
            if credential.certificate is not None:
                # A client certificate may be renewed (an exec plugin's, or files re-read
                # after a 401): new connections present the new one.
                self._transport = CertificateTransport(
                    lambda: self._credentials.cached().certificate,
                    credential.verification,
                    max_connections=CONNECTIONS,
                )
            else:
                self._transport = Http1Transport(
                    client_context(credential.verification, None),
                    egress=None,
                    server_name=credential.server_name,
                    max_connections=CONNECTIONS,
                )
        # Else the kubeconfig's proxy-url, or HTTPS_PROXY (and NO_PROXY), route the API server
        # through a proxy: httpx's own transport, which speaks to proxies.
        if self._transport is not None:  # its pool caps connections at CONNECTIONS
            self._client = httpx.AsyncClient(
                base_url=credential.server, timeout=REQUEST_TIMEOUT, transport=self._transport
            )
        else:
            self._client = httpx.AsyncClient(
                base_url=credential.server,
                verify=client_context(credential.verification, credential.certificate),
                proxy=credential.proxy,
                timeout=REQUEST_TIMEOUT,
                limits=httpx.Limits(
                    max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS
                ),
            )

    @classmethod
    def connect(
        cls,
        kubeconfig: str | None = None,
        *,
        on_error: Callable[[str, int | None], None] | None = None,
    ) -> KubeClient:
        """In-cluster credentials when running in a Pod, else the kubeconfig (``KUBECONFIG``),
        loaded once now by the ``kubernetes`` package (an exec plugin runs now, at start-up;
        later loads run off the event loop)."""
        return cls(load_credentials(kubeconfig), on_error=on_error)

    @classmethod
    async def open(
        cls,
        kubeconfig: str | None = None,
        *,
        on_error: Callable[[str, int | None], None] | None = None,
    ) -> KubeClient:
        """:meth:`connect` with the first load off the event loop (an exec plugin may take
        seconds; meanwhile ``/healthz`` and everything else on the loop go on)."""
        credentials = await in_time(lambda: load_credentials(kubeconfig), "the kubeconfig")
        return cls(credentials, on_error=on_error)

    @property
    def credentials(self) -> Credentials:
        """Who this client is, renewed as it expires or is refused (kopf's login reads it)."""
        return self._credentials

    @property
    def server(self) -> str:
        return self._credentials.server

    @property
    def in_cluster(self) -> bool:
        """Whether this client uses a Pod's service account (so Service DNS names resolve)."""
        return self._credentials.in_cluster

    def proxy_credentials(self) -> tuple[dict[str, str], ssl.SSLContext | bool]:
        """Headers and TLS settings to reach the API server's service proxy like this client
        (with the token as last obtained: a request of this client renews it first)."""
        credential = self._credentials.cached()
        headers = {"Authorization": f"Bearer {credential.token}"} if credential.token else {}
        context = self._transport.context if self._transport is not None else None
        return headers, context or client_context(credential.verification, credential.certificate)

    async def api_server_endpoints(self) -> frozenset[tuple[str, int | None]]:
        """The API server's IP addresses and ports as this client knows them: its URL's host
        resolved, and the in-cluster Service (``KUBERNETES_SERVICE_HOST``/``_PORT``)."""
        url = httpx.URL(self.server)
        hosts = {(url.host, url.port or (443 if url.scheme == "https" else 80))}
        service_host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
        service_port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if service_host and service_port.isdigit():
            hosts.add((service_host, int(service_port)))
        endpoints: set[tuple[str, int | None]] = set()
        loop = asyncio.get_running_loop()
        for host, port in hosts:
            try:
                found = await loop.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
            except OSError as error:
                logger.warning("Could not resolve the API server's host %s: %s", host, error)
                continue
            endpoints.update((str(info[4][0]), port) for info in found)
        return frozenset(endpoints)

    async def close(self) -> None:
        await self._client.aclose()

    # -- transport -------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
    ) -> Any:
        content = None if body is None else json.dumps(body).encode()
        credential = await self._credentials.current()
        response = await self._send(method, path, content, content_type, params, credential)
        if response.status_code == 401:
            # An expired or rotated credential: ask the client again and try once more (as
            # client-go does).
            credential = await self._credentials.renew(credential)
            response = await self._send(method, path, content, content_type, params, credential)
        if response.status_code >= 400:
            if self._on_error is not None:
                self._on_error(method, response.status_code)
            error = error_of(response)
            if response.status_code == 401:
                refused = credential.describe()  # names the user, no secret
                raise KubeError(401, f"The API server refused the {refused}: {error}")
            raise error
        if not response.content:
            return None
        return response.json()

    async def _send(
        self,
        method: str,
        path: str,
        content: bytes | None,
        content_type: str,
        params: Mapping[str, str] | None,
        credential: Credential,
    ) -> httpx.Response:
        token = credential.token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if content is not None:
            headers["Content-Type"] = content_type
        try:
            return await self._client.request(
                method, path, content=content, headers=headers, params=params
            )
        except httpx.HTTPError as error:
            if self._on_error is not None:
                self._on_error(method, None)
            raise ApiUnreachable(error) from error

    # -- verbs -------------------------------------------------------------------------

    async def get(self, resource: Resource, namespace: str | None, name: str) -> Any | None:
        """The object, or ``None`` when it does not exist."""
        try:
            return await self.request("GET", resource.path(namespace, name))
        except NotFound:
            return None

    async def list(
        self, resource: Resource, namespace: str | None, *, label_selector: str | None = None
    ) -> list[Any]:
        """The items of a list call (one page; callers select narrowly)."""
        params = {"labelSelector": label_selector} if label_selector else None
        answer = await self.request("GET", resource.path(namespace), params=params)
        return list((answer or {}).get("items") or [])

    async def apply(self, resource: Resource, manifest: Mapping[str, Any]) -> Any:
        """Apply a child of one of our objects, only if the name is free or already its own.

        The manifest's controller ownerReference names the owner (only children are applied
        here). The object of that name is read first and judged by
        :func:`~mcp_operator.kube.ownership.decide`:

        - taken by anything the owner does not control: nothing is written,
          :class:`NameConflict` names the object and its controller;
        - absent: created by a server-side apply that fails on an existing object (the
          manifest carries a ``resourceVersion`` no stored object has, so an object someone
          created between our read and our write is a 409, never a merge);
        - owned: server-side apply with ``force``. The object is ours (only we put this
          owner's UID in a controller reference, and never on an object we did not create),
          and the rendered fields are the owner's spec: a controller repairs drift in the
          fields it renders rather than stopping on it (as Kubernetes' guidance for
          controllers says), while fields it does not render stay with whoever set them.
          The manifest carries the UID we read, so an object deleted and re-created by
          someone else in between is refused by the API server (422: ``metadata.uid`` is
          immutable), not overwritten.

        A 409 of either write (or the 422 of a changed ``metadata.uid``) means the object
        changed hands in between: read and judge once more.
        """
        metadata = manifest["metadata"]
        namespace, name = metadata.get("namespace"), metadata["name"]
        owner = ownership.controller_reference(manifest)
        if owner is None or not owner.get("uid"):
            raise ValueError(f"{manifest.get('kind')} {name} has no controller ownerReference")
        for attempt in (1, 2):
            existing = await self.get(resource, namespace, name)
            verdict = ownership.decide(existing, str(owner["uid"]))
            if isinstance(verdict, ownership.Foreign):
                holder = f"{owner.get('kind')}/{owner.get('name')}"
                raise NameConflict(
                    ownership.conflict_message(
                        str(manifest.get("kind")), namespace, name, holder, verdict
                    )
                )
            if verdict == ownership.ABSENT:
                body = _with_metadata(manifest, resourceVersion=ownership.NO_OBJECT_VERSION)
                params = {"fieldManager": FIELD_MANAGER}
            else:
                uid = str(((existing or {}).get("metadata") or {}).get("uid") or "")
                body = _with_metadata(manifest, uid=uid)
                params = {"fieldManager": FIELD_MANAGER, "force": "true"}
            try:
                return await self.request(
                    "PATCH",
                    resource.path(namespace, name),
                    body=body,
                    content_type="application/apply-patch+yaml",
                    params=params,
                )
            except KubeError as error:
                changed_hands = error.status == 409 or (
                    error.status == 422 and "metadata.uid" in error.fields
                )
                if not changed_hands or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def create(self, resource: Resource, manifest: Mapping[str, Any]) -> Any:
        """Create an object; 409 (:class:`KubeError`) when it exists already."""
        return await self.request(
            "POST",
            resource.path(manifest["metadata"].get("namespace")),
            body=manifest,
            params={"fieldManager": FIELD_MANAGER},
        )

    async def replace(self, resource: Resource, manifest: Mapping[str, Any]) -> Any:
        """Replace an object; with ``metadata.resourceVersion`` set, 409 when someone else
        wrote it in between (optimistic concurrency, as leader election needs)."""
        metadata = manifest["metadata"]
        return await self.request(
            "PUT",
            resource.path(metadata.get("namespace"), metadata["name"]),
            body=manifest,
            params={"fieldManager": FIELD_MANAGER},
        )

    async def delete(self, resource: Resource, namespace: str | None, name: str) -> bool:
        """Delete an object (children go by background garbage collection); False if gone."""
        try:
            await self.request(
                "DELETE",
                resource.path(namespace, name),
                body={"propagationPolicy": "Background"},
            )
        except NotFound:
            return False
        return True

    async def delete_owned(
        self, resource: Resource, namespace: str | None, name: str, owner_uid: str
    ) -> bool:
        """Delete the object of that name if its controller is the owner ``owner_uid``
        (:func:`~mcp_operator.kube.ownership.decide`), never anyone else's; False when there
        was nothing of the owner's to delete. The delete carries the UID read, so an object
        re-created by someone else in between is not deleted (409)."""
        existing = await self.get(resource, namespace, name)
        if ownership.decide(existing, owner_uid) != ownership.OWNED:
            return False
        uid = str(((existing or {}).get("metadata") or {}).get("uid") or "")
        try:
            await self.request(
                "DELETE",
                resource.path(namespace, name),
                body={"propagationPolicy": "Background", "preconditions": {"uid": uid}},
            )
        except NotFound:
            return False
        return True

    async def patch_status(
        self, resource: Resource, namespace: str, name: str, status: Mapping[str, Any]
    ) -> Any:
        """A JSON merge patch of the status subresource (``None`` values delete fields)."""
        return await self.request(
            "PATCH",
            resource.path(namespace, name, "status"),
            body={"status": status},
            content_type="application/merge-patch+json",
            params={"fieldManager": FIELD_MANAGER},
        )

    async def read_secret_key(self, namespace: str, name: str, key: str) -> str:
        """One value of a Secret that is opted in for MCP servers (:func:`opted_in`); errors
        name the Secret and key, never a value."""
        try:
            secret = await self.request("GET", SECRETS.path(namespace, name))
        except NotFound:
            raise SecretReferenceError(
                "SecretNotFound", f"Secret {namespace}/{name} (key {key!r}) was not found"
            ) from None
        except KubeError as error:
            raise SecretReferenceError(
                "SecretUnreadable",
                f"Secret {namespace}/{name} could not be read"
                f" ({f'HTTP {error.status}' if error.status else 'no answer'})",
            ) from None
        return secret_value(secret, namespace, name, key)

    async def post_event(
        self,
        involved: Mapping[str, Any],
        *,
        type_: str,
        reason: str,
        message: str,
    ) -> None:
        """An Event about ``involved`` (an object body); failures are logged, never raised."""
        metadata = involved.get("metadata", {})
        namespace = metadata.get("namespace") or "default"
        event = event_body(involved, type_=type_, reason=reason, message=message)
        # An API server or etcd that restarts must not lose the Event: retry what may pass later,
        # under the same name, so that a POST whose answer was lost is not posted twice
        # (the retry gets 409 AlreadyExists, which means it is there).
        for delay in (*EVENT_RETRY_DELAYS, None):
            try:
                await self.request("POST", EVENTS.path(namespace), body=event)
                return
            except KubeError as error:
                if error.status == 409:
                    return
                failure = error
                if (
                    not isinstance(error, ApiUnreachable)
                    and error.status < 500
                    and error.status != 429
                ):
                    break
            if delay is not None:
                await asyncio.sleep(delay)
        logger.warning("Could not post event %s for %s: %s", reason, metadata.get("name"), failure)


def _with_metadata(manifest: Mapping[str, Any], **fields: str) -> dict[str, Any]:
    """A copy of ``manifest`` with more ``metadata`` fields (the rest shared, not copied)."""
    return {**manifest, "metadata": {**manifest["metadata"], **fields}}


def _proxied(url: str) -> bool:
    """Whether the environment routes ``url`` through a proxy (``HTTPS_PROXY``/``HTTP_PROXY``/
    ``ALL_PROXY`` and ``NO_PROXY``, read as httpx reads them)."""
    proxies = urllib.request.getproxies_environment()
    parts = urllib.parse.urlsplit(url)
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return False
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    return not bypass(parts.hostname or "", proxies)
