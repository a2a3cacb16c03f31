"""An httpx2 transport that applies an :class:`~mcp_operator.net.egress.EgressPolicy` to the
address each connection actually goes to (the probe's SDK paths).

:class:`GuardedBackend` connects through :func:`~mcp_operator.net.dial.dial`, the pool's own
way: the host resolved here, every address the policy refuses dropped, the allowed ones
tried with Happy Eyeballs by IP address; TLS still verifies and sends SNI for the host name,
and the Host header is the URL's (httpcore takes both from the request, not from the
connected address). So a name that resolves to a public address at one moment and to the
metadata endpoint at the next (DNS rebinding) is judged at the moment of connecting, and
every redirect opens its connection through the same check. A refusal is a failure of the
caller's making (``refuse``; the probe's is ``ProbeError("DestinationRefused")``) raised
before any packet reaches the destination. The policy itself is
:mod:`~mcp_operator.net.egress`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import anyio
import anyio.abc
import httpcore2
import httpx2
from httpcore2 import AnyIOBackend, AsyncNetworkBackend, AsyncNetworkStream
from httpcore2._backends.anyio import AnyIOStream  # its stream over a connected socket

from mcp_operator.net.dial import dial
from mcp_operator.net.egress import EgressPolicy, Refused

Refuse = Callable[[Refused], Exception]
"""The caller's failure for a destination the policy refused."""


class GuardedBackend(AsyncNetworkBackend):
    """A network backend that connects only to addresses ``policy`` allows."""

    def __init__(self, policy: EgressPolicy, refuse: Refuse) -> None:
        self._policy = policy
        self._refuse = refuse
        self._inner = AnyIOBackend()

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
                sock = await dial(host, port, egress=self._policy)
        except Refused as refused:
            raise self._refuse(refused) from None
        except TimeoutError as error:
            raise httpcore2.ConnectTimeout(str(error)) from error
        except (OSError, RuntimeError) as error:  # uvloop may raise RuntimeError
            raise httpcore2.ConnectError(str(error)) from error
        for option in socket_options or ():
            sock.setsockopt(*option)
        return AnyIOStream(await anyio.abc.SocketStream.from_socket(sock))

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
        refuse: Refuse,
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
            network_backend=GuardedBackend(policy, refuse),
        )
        self._standalone_stream = standalone_stream

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "GET" and not self._standalone_stream:
            return httpx2.Response(405, headers={"allow": "POST, DELETE"}, request=request)
        return await super().handle_async_request(request)
