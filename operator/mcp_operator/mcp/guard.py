"""The probe's HTTP transport, which applies an :class:`~mcp_operator.mcp.egress.EgressPolicy`
to the address each connection actually goes to.

:class:`GuardedBackend` resolves the host itself, drops every address the
policy refuses, and connects to the first allowed one by its IP address; TLS
still verifies and sends SNI for the host name, and the Host header is the
URL's (httpcore takes both from the request, not from the connected address).
So a name that resolves to a public address at one moment and to the metadata
endpoint at the next (DNS rebinding) is judged at the moment of connecting, and
every redirect opens its connection through the same check. A refusal is a
``ProbeError("DestinationRefused")`` raised before any packet reaches the
destination. The policy itself is :mod:`~mcp_operator.mcp.egress`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import anyio
import httpcore2
import httpx2
from httpcore2 import AnyIOBackend, AsyncNetworkBackend, AsyncNetworkStream

from mcp_operator.mcp.egress import EgressPolicy, Refused, allowed_addresses
from mcp_operator.mcp.errors import ProbeError, ProbeState


def refusal_error(state: ProbeState, refused: Refused) -> ProbeError:
    """The probe's failure for a destination the policy refused (also kept in ``state``)."""
    error = ProbeError(
        "DestinationRefused",
        f"{state.url} was not contacted: {refused} "
        "(the operator's egress policy; see docs/security.md)",
    )
    state.failure = error
    return error


class GuardedBackend(AsyncNetworkBackend):
    """A network backend that connects only to addresses ``policy`` allows."""

    def __init__(self, policy: EgressPolicy, state: ProbeState) -> None:
        self._policy = policy
        self._state = state
        self._inner = AnyIOBackend()

    def _refuse(self, refused: Refused) -> ProbeError:
        return refusal_error(self._state, refused)

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore2's interface)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> AsyncNetworkStream:
        try:
            with anyio.fail_after(timeout):
                addresses = await allowed_addresses(self._policy, host, port)
        except Refused as refused:
            raise self._refuse(refused) from None
        for address in addresses[:-1]:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except httpcore2.ConnectError:
                continue  # the next address (IPv6 first, then IPv4, for instance)
        return await self._inner.connect_tcp(
            addresses[-1], port, timeout, local_address, socket_options
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore2's interface)
        socket_options: Iterable[Any] | None = None,
    ) -> AsyncNetworkStream:
        raise self._refuse(Refused(path, "it is a Unix socket"))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedTransport(httpx2.AsyncHTTPTransport):
    """httpx2's own transport, its connection pool built on a :class:`GuardedBackend`.

    Proxies from the environment are not used: the policy judges the destination, which a
    proxy would hide behind its own address.

    Without ``standalone_stream``, a GET is answered here with ``405 Method Not Allowed``
    (what a server without the optional GET stream of Streamable HTTP answers) and never
    sent: a probe lists tools and leaves, so the stream the SDK opens after the handshake
    would cost the server and the operator a connection for nothing.
    """

    def __init__(
        self,
        policy: EgressPolicy,
        state: ProbeState,
        *,
        verify: Any,
        limits: httpx2.Limits,
        standalone_stream: bool = True,
    ) -> None:
        super().__init__(verify=verify, trust_env=False, limits=limits)
        ssl_context = httpx2.create_ssl_context(verify=verify, trust_env=False)
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=GuardedBackend(policy, state),
        )
        self._standalone_stream = standalone_stream

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "GET" and not self._standalone_stream:
            return httpx2.Response(405, headers={"allow": "POST, DELETE"}, request=request)
        return await super().handle_async_request(request)
