"""Where the registry reader may connect: its httpx transport, every connection guarded.

An image reference is a tenant's choice, like an external server's URL: without a guard, an
MCPServer naming ``169.254.169.254/x:1``, or a registry that redirects its blob to the API
server, would make the operator connect there. So the reader has no transport of its own:
:class:`RegistryTransport` hands every request to the operator's one guarded wire,
:class:`~mcp_operator.net.transport.Http1Transport` (the keep-alive pool that the probe, OAuth
and the API client use, whose every connection goes through
:func:`~mcp_operator.net.dial.dial` and the :class:`~mcp_operator.net.egress.EgressPolicy`).
Redirects stay httpx's (the client follows them and drops ``Authorization`` when the origin
changes), and each hop comes back here as a request of its own, so the first request, every
redirect hop and the token service are judged alike, at the address actually connected to.

Two policies, chosen per request by origin (pure: :func:`named_origins`):

- the registries the operator's own flags name exactly (``--insecure-registries``, and the
  ``--allowed-registries`` entries without a ``*``), host and port: the platform team chose
  them, so private and loopback addresses are allowed there (an in-cluster or node-local
  registry); the metadata addresses and the API server stay refused;
- every other origin (registries named only in an image, their redirect targets, their token
  services): the policy the caller gives, by default public addresses only.

A refusal is :class:`~mcp_operator.net.transport.DestinationRefused`;
:mod:`~mcp_operator.oci.client` turns it into its own error.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

from mcp_operator.net.egress import EgressPolicy
from mcp_operator.net.tls import tls_context
from mcp_operator.net.transport import Http1Transport
from mcp_operator.oci.reference import DOCKER_HUB, DOCKER_HUB_API
from mcp_operator.oci.settings import RegistrySettings

Origin = tuple[str, int]
"""A lowercase host (IPv6 without brackets) and a port."""

MAX_CONNECTIONS = 8
"""Connections open at once to one origin: a reconcile reads a few small documents."""


def _default_port(scheme: str) -> int:
    return 80 if scheme == "http" else 443


def named_origins(settings: RegistrySettings) -> frozenset[Origin]:
    """The origins of the registries the operator's flags name exactly: every insecure
    host, and every allowed host without a glob (``docker.io`` is its API host)."""
    named = set(settings.insecure_hosts)
    named.update(host for host in settings.allowed_hosts if not any(c in host for c in "*?["))
    origins = set()
    for entry in named:
        scheme = "http" if entry in settings.insecure_hosts else "https"
        host = DOCKER_HUB_API if entry == DOCKER_HUB else entry
        try:
            parts = urlsplit(f"//{host}")
            port = parts.port
        except ValueError:
            continue
        if parts.hostname:
            origins.add((parts.hostname.lower(), port or _default_port(scheme)))
    return frozenset(origins)


def origin_of(url: httpx.URL) -> Origin:
    """The origin a request goes to (the port filled in from the scheme)."""
    return url.host.lower(), url.port or _default_port(url.scheme)


def named_policy(egress: EgressPolicy) -> EgressPolicy:
    """The policy of the named registries: private and loopback allowed, and whatever
    ``egress`` refuses always (the API server's endpoints) still refused."""
    return EgressPolicy(
        allow_private=True, allow_loopback=True, refused_endpoints=egress.refused_endpoints
    )


class RegistryTransport(httpx.AsyncBaseTransport):
    """The guarded wire for the named registries and for every other origin."""

    def __init__(self, settings: RegistrySettings, egress: EgressPolicy) -> None:
        self._named = named_origins(settings)
        context = tls_context(True)
        self._open = Http1Transport(context, egress=egress, max_connections=MAX_CONNECTIONS)
        self._trusted = Http1Transport(
            context, egress=named_policy(egress), max_connections=MAX_CONNECTIONS
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        named = origin_of(request.url) in self._named
        transport = self._trusted if named else self._open
        return await transport.handle_async_request(request)

    async def aclose(self) -> None:
        await self._open.aclose()
        await self._trusted.aclose()
