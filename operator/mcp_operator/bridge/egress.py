"""The bridge's httpx transport under the egress policy: where its GET streams may connect.

The bridge's calls go through :mod:`~mcp_operator.net.pool`, which applies
:data:`BRIDGE_EGRESS` itself; its legacy GET streams
(``tools/list_changed``) use the shared ``httpx.AsyncClient``, whose connection pool is
built here on a network backend that connects only to addresses the same policy allows
(resolved at every connect, TLS still verifying the name). The rules are
:mod:`~mcp_operator.net.egress`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from mcp_operator.net.egress import EgressPolicy, Refused, allowed_addresses

BRIDGE_EGRESS = EgressPolicy(allow_private=True, allow_loopback=True)
"""Where the bridge's upstream calls may connect: its upstreams are in-cluster Services
(private addresses) that the operator resolved from Ready MCPServers, whose probes judged
them first; loopback is the agent's own Pod. Refused always: link-local and cloud metadata
addresses, unspecified, multicast and reserved ones, whatever a name resolves to at call
time (docs/security.md)."""


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, policy: EgressPolicy) -> None:
        self._policy = policy
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            addresses = await allowed_addresses(self._policy, host, port)
        except Refused as refused:
            raise httpcore.ConnectError(f"refused to connect to {refused}") from None
        except OSError as error:
            raise httpcore.ConnectError(str(error)) from None
        return await self._inner.connect_tcp(
            addresses[0], port, timeout, local_address, socket_options
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError(f"refused to connect to the Unix socket {path}")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def guarded_transport(policy: EgressPolicy, limits: httpx.Limits) -> httpx.AsyncHTTPTransport:
    """httpx's own transport, its pool on a backend that applies ``policy``; proxies from the
    environment are not used (they would hide the destination)."""
    transport = httpx.AsyncHTTPTransport(limits=limits, trust_env=False)
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=httpx.create_ssl_context(trust_env=False),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=_GuardedBackend(policy),
    )
    return transport
