"""httpx's interface on the lean keep-alive HTTP/1.1 pool: :class:`Http1Transport`.

For the httpx clients the operator and the bridge keep: the API client (it writes a status
patch and an Event for every server it probes, a hot path of a fleet's reconcile), the
bridge's client of upstream change streams, and the registry reader (a cold path, here for
the guard: every redirect hop it follows is a connection the policy judges). httpx's own
transport (httpcore) checks every pooled connection for readability on each request and on
each answer's end, a system call per idle connection: with the API client's twenty
connections that was the largest single cost of the operator at 1,000 servers
(bench/fleet_bench.py). This transport hands the request to
:class:`~mcp_operator.net.pool.Http1Pool` (keep-alive, one write per request, ``httptools``
parsing, the cap on connections, the egress policy applied to every address it connects to)
and keeps httpx's interface above it, so the callers, their tests' mock transports and the
certificate rotation of :mod:`~mcp_operator.kube.tls` are unchanged. It is also the one way
such a client connects: no second guard, no proxy from the environment.

Time limits come from the request (httpx's ``timeout`` extension): the connect and read
limits together bound the wait for a connection and the answer's head (the connect limit
alone when reads are unbounded, as on an event stream), the read limit each read of its
body. Failures are httpx's: ``ConnectError``, ``ReadError``, ``RemoteProtocolError`` and the
timeouts, so callers catch ``httpx.HTTPError`` as before; a connection the egress policy
refused is a :class:`DestinationRefused` (a ``ConnectError`` that names the destination and
why), raised before any packet left. Redirects are httpx's (the client's), so each hop is a
request of its own here and is judged like the first.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator

import httpx

from mcp_operator.net.egress import EgressPolicy, Refused
from mcp_operator.net.http1 import BrokenHTTP, ConnectFailed, Http1Error, Http1Response, NotSent
from mcp_operator.net.pool import MAX_CONNECTIONS_PER_ORIGIN, Http1Pool

_SET_BY_THE_POOL = frozenset({"host", "content-length", "connection", "transfer-encoding"})


def _limit(request: httpx.Request, *names: str) -> float | None:
    """The sum of the request's named time limits (``None``: one of them is unlimited)."""
    timeout = request.extensions.get("timeout") or {}
    total = 0.0
    for name in names:
        value = timeout.get(name)
        if value is None:
            return None
        total += float(value)
    return total


def _head_limit(request: httpx.Request) -> float | None:
    """How long a connection and the answer's head may take: connect and read together, or
    the connect limit alone when reads are unbounded (an event stream)."""
    if _limit(request, "read") is None:
        return _limit(request, "connect")
    return _limit(request, "connect", "read")


class DestinationRefused(httpx.ConnectError):
    """The egress policy refused the request's destination; ``refused`` says which and why."""

    def __init__(self, refused: Refused, *, request: httpx.Request) -> None:
        super().__init__(f"refused to connect to {refused}", request=request)
        self.refused = refused


def _translated(error: Http1Error, request: httpx.Request) -> httpx.TransportError:
    if isinstance(error, ConnectFailed) and isinstance(error.__cause__, Refused):
        return DestinationRefused(error.__cause__, request=request)
    if isinstance(error, NotSent):  # no connection, or the request never left: ConnectError
        return httpx.ConnectError(str(error), request=request)
    if isinstance(error, BrokenHTTP):
        return httpx.RemoteProtocolError(str(error), request=request)
    return httpx.ReadError(str(error), request=request)


class _Body(httpx.AsyncByteStream):
    def __init__(self, answer: Http1Response, request: httpx.Request) -> None:
        self._answer = answer
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = self._answer.aiter_bytes()
        read = _limit(self._request, "read")
        while True:
            try:
                async with asyncio.timeout(read):
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise httpx.ReadTimeout(
                    "the answer's body stalled", request=self._request
                ) from None
            except Http1Error as error:
                raise _translated(error, self._request) from None
            yield chunk

    async def aclose(self) -> None:
        await self._answer.aclose()


class Http1Transport(httpx.AsyncBaseTransport):
    """An httpx transport over one :class:`~mcp_operator.net.pool.Http1Pool`."""

    def __init__(
        self,
        context: ssl.SSLContext | None,
        *,
        egress: EgressPolicy | None,
        server_name: str | None = None,
        max_connections: int = MAX_CONNECTIONS_PER_ORIGIN,
    ) -> None:
        """``egress``: as the pool's (``None`` only for the API server, which the operator's
        own configuration names)."""
        self.context = context
        self.pool = Http1Pool(
            egress=egress,
            ssl_context=context,
            server_name=server_name,
            max_connections=max_connections,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        headers = {
            name: value
            for name, value in request.headers.items()
            if name.lower() not in _SET_BY_THE_POOL
        }
        try:
            async with asyncio.timeout(_head_limit(request)):
                answer = await self.pool.request(request.method, str(request.url), headers, body)
        except TimeoutError:
            raise httpx.ReadTimeout("the server did not answer in time", request=request) from None
        except Http1Error as error:
            raise _translated(error, request) from None
        return httpx.Response(
            answer.status_code,
            headers=list(answer.headers.items()),
            stream=_Body(answer, request),
            request=request,
        )

    async def aclose(self) -> None:
        await self.pool.aclose()
