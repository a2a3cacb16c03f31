"""A lean HTTP/1.1 client: keep-alive connections, one write per request.

Three users: the bridge's calls upstream (every ``tools/call`` of an agent becomes one POST),
the operator's probe of a Streamable HTTP server (:mod:`~mcp_operator.mcp.probe_client`, a few
requests per probe and thousands of probes) and the API client (through
:mod:`~mcp_operator.net.transport`), all hot paths: httpx spends over a millisecond of CPU per
request on the 2-core machine the bridge was measured on (bench/bridge_bench.py). This one
writes the request head and body in one ``write``, parses the answer with ``httptools``
(already the HTTP parser of the bridge's own server), and keeps connections open per origin
(``http`` and ``https``; TLS through the given context, else the default).

It owns connections and bytes only: a :class:`~mcp_operator.net.http1.Http1Response` gives
the status, the headers (lowercase names), and the body as it arrives
(``aiter_bytes``/``aiter_text``/``aread``). Interim answers (``100 Continue``, ``103 Early
Hints``) are read past, at most :data:`~mcp_operator.net.http1.MAX_INTERIM_ANSWERS` of them
and within the head's byte bound, never taken as the answer; ``Expect`` cannot be sent. A
connection goes back to the pool only when its answer was read to the end and the server
keeps it alive. At most ``max_connections`` are open per origin (idle, in use or draining);
a request past that waits for one, within the caller's deadline.

**A request is never sent twice unless that is harmless.** A reused connection that breaks
before the first byte of the answer may have broken after the server read the request (a
Pod killed mid-call): only an idempotent method (:data:`IDEMPOTENT_METHODS`) goes again on a
new connection; any other fails with ``ConnectionLost``, whose
``may_have_been_delivered`` is true, and retrying it is the caller's decision. A request goes
again without asking only when it provably never left (the connection was found closed
before the write).

Deadlines are the caller's (``asyncio.timeout``); failures are
:class:`~mcp_operator.net.http1.Http1Error`: ``NotSent`` (never left; ``ConnectFailed`` when
no connection could be made, its cause says why: the refusal, the OS or the TLS error) or
``ConnectionLost`` (may have been delivered; ``BrokenHTTP`` when the answer is not
HTTP/1.1). New connections are made by :func:`~mcp_operator.net.dial.dial`: every address
judged by the pool's egress policy, Happy Eyeballs between them, TLS still verifying the
name. :meth:`Http1Pool.aclose` closes every connection the pool opened, in use or not, and
waits until they are closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections import deque
from collections.abc import Mapping
from urllib.parse import urlsplit

import httptools

from mcp_operator.net.dial import Resolver, dial
from mcp_operator.net.egress import EgressPolicy, Refused
from mcp_operator.net.headers import header_refusal
from mcp_operator.net.http1 import (
    MAX_HEAD_BYTES,
    READ_CHUNK,
    BrokenHTTP,
    ConnectFailed,
    Connection,
    ConnectionLost,
    Http1Response,
    NotSent,
    Origin,
    Parsed,
)

MAX_CONNECTIONS_PER_ORIGIN = 64
"""Connections open at once to one origin (idle, in use or draining), unless the pool is
given another cap; requests past it wait for one."""
MAX_IDLE_PER_ORIGIN = 64
REMEMBERED = 256
"""URLs split and header lines checked that a pool keeps (forgotten all at once beyond)."""
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})
"""Methods sent again on a new connection when a reused one broke before any answer: doing
them twice is doing them once (RFC 9110 §9.2.2). Never ``POST``."""
CLOSE_SECONDS = 1.0
""":meth:`Http1Pool.aclose` waits this long at most for its connections to close."""
IDLE_SECONDS = 4.0
"""A connection idle longer than this is closed instead of reused: a peer that vanished
without a FIN (a replaced node, a stale NAT entry) would otherwise hold the next request
until its deadline. Under the 5 s after which common servers (uvicorn, Node) close an idle
connection themselves, so a POST rarely meets a server closing the connection it was just
written to (which the pool cannot tell from a server that read it, and does not re-send)."""


class _OriginState:
    """One origin's connections: how many are open, the idle ones, the callers waiting."""

    __slots__ = ("idle", "open", "waiting")

    def __init__(self) -> None:
        self.open = 0
        self.idle: list[Connection] = []
        self.waiting: deque[asyncio.Future[Connection | None]] = deque()
        """A caller's future gets an idle connection, or ``None``: room for a new one."""


class Http1Pool:
    """Keep-alive connections by origin, at most ``max_connections`` open to each."""

    def __init__(
        self,
        *,
        egress: EgressPolicy | None,
        ssl_context: ssl.SSLContext | None = None,
        server_name: str | None = None,
        max_connections: int = MAX_CONNECTIONS_PER_ORIGIN,
        resolver: Resolver | None = None,
    ) -> None:
        """``egress``: where connections may go; ``None`` only for a destination the
        operator's own configuration names (the API server). ``server_name``: the name TLS
        verifies and sends, instead of the URL's host (a kubeconfig's ``tls-server-name``).
        ``resolver``: host names to addresses, instead of the system's resolver."""
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self._origins: dict[Origin, _OriginState] = {}
        self._ssl = ssl_context
        self._egress = egress
        self._server_name = server_name
        self._max_connections = max_connections
        self._resolver = resolver
        self._draining: set[asyncio.Task[None]] = set()
        self._open: set[Connection] = set()
        """Every connection opened and not yet closed (idle, in use or draining)."""
        self._urls: dict[str, tuple[Origin, str, str]] = {}
        self._checked: dict[tuple[str, str], str] = {}
        """Header lines already found sendable (a session sends the same few on every call)."""
        self.closed = False

    def _tls(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl

    async def _connect(self, origin: Origin) -> Connection:
        scheme, host, port = origin
        try:
            sock = await dial(host, port, egress=self._egress, resolver=self._resolver)
        except Refused as refused:
            raise ConnectFailed(f"refused to connect to {refused}") from refused
        except (OSError, ValueError) as error:
            raise ConnectFailed(f"could not connect: {error}") from error
        try:
            if scheme == "https":
                reader, writer = await asyncio.open_connection(
                    sock=sock,
                    ssl=self._tls(),
                    server_hostname=self._server_name or host.strip("[]"),
                )
            else:
                reader, writer = await asyncio.open_connection(sock=sock)
        except (OSError, ssl.SSLError) as error:
            sock.close()
            raise ConnectFailed(f"could not connect: {error}") from error
        except BaseException:
            sock.close()
            raise
        connection = Connection(origin, reader, writer, self)
        self._open.add(connection)
        return connection

    @property
    def connections(self) -> int:
        """Connections open now (idle, in use or draining)."""
        return len(self._open)

    def _state(self, origin: Origin) -> _OriginState:
        state = self._origins.get(origin)
        if state is None:
            state = self._origins[origin] = _OriginState()
        return state

    def _take(self, state: _OriginState) -> Connection | None:
        idle = state.idle
        now = asyncio.get_running_loop().time()
        while idle:
            connection = idle.pop()
            if connection.usable() and now - connection.idle_since <= IDLE_SECONDS:
                connection.reused = True
                return connection
            connection.close()
        return None

    async def _acquire(self, origin: Origin, *, fresh: bool = False) -> Connection:
        """An idle connection to ``origin`` (unless ``fresh``), else a new one once fewer
        than the cap are open; waiting ends with the caller's deadline."""
        state = self._state(origin)
        if fresh:
            for connection in state.idle[:]:  # the server dropped one: the rest likely too
                connection.close()
        else:
            idle = self._take(state)
            if idle is not None:
                return idle
        while state.open >= self._max_connections:
            waiter: asyncio.Future[Connection | None] = asyncio.get_running_loop().create_future()
            state.waiting.append(waiter)
            try:
                handed = await waiter
            except BaseException:
                if not waiter.done():
                    state.waiting.remove(waiter)
                elif not waiter.cancelled() and waiter.exception() is None:
                    # handed over as the caller gave up: pass it on
                    given = waiter.result()
                    if given is not None:
                        self.put_back(given, keep_alive=True)
                    else:
                        self._wake(state)
                raise
            if self.closed:
                if handed is not None:
                    handed.close()
                raise NotSent("the pool was closed while the request waited")
            if handed is not None:
                if not fresh:
                    handed.reused = True
                    return handed
                handed.close()
        state.open += 1
        try:
            return await self._connect(origin)
        except BaseException:
            state.open -= 1
            self._wake(state)
            raise

    def _wake(self, state: _OriginState) -> None:
        """Room for one more connection: tell the first caller still waiting."""
        while state.waiting:
            waiter = state.waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def closed_one(self, connection: Connection) -> None:
        """Bookkeeping of a connection that was just closed."""
        self._open.discard(connection)
        state = self._origins.get(connection.origin)
        if state is not None:
            if connection in state.idle:
                state.idle.remove(connection)
            state.open -= 1
            self._wake(state)

    def drain_later(self, response: Http1Response) -> None:
        task = asyncio.get_running_loop().create_task(response.drain())
        self._draining.add(task)
        task.add_done_callback(self._draining.discard)

    def put_back(self, connection: Connection, keep_alive: bool) -> None:
        """A connection whose answer ended: to a waiting caller, idle, or closed."""
        state = self._state(connection.origin)
        if not keep_alive or self.closed or not connection.usable():
            connection.close()
            return
        while state.waiting:
            waiter = state.waiting.popleft()
            if not waiter.done():
                waiter.set_result(connection)
                return
        if len(state.idle) < MAX_IDLE_PER_ORIGIN:
            connection.idle_since = asyncio.get_running_loop().time()
            state.idle.append(connection)
        else:
            connection.close()

    async def request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes = b""
    ) -> Http1Response:
        """Send one request; the answer once its head has arrived."""
        origin, target, host_header = self._split(url)
        lines = [f"{method} {target} HTTP/1.1", ""]
        checked = self._checked
        for name, value in headers.items():
            line = checked.get((name, value))
            if line is None:
                line = self._check(name, value)
            if line:
                lines.append(line)
            else:
                host_header = value  # the caller's virtual host (the connection is unchanged)
        lines[1] = f"host: {host_header}"
        lines.append(f"content-length: {len(body)}")
        payload = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
        idempotent = method.upper() in IDEMPOTENT_METHODS
        connection = await self._acquire(origin)
        try:
            return await self._exchange(connection, payload, idempotent=idempotent)
        except _Unsent:
            pass  # found closed before the write: it never left
        except _Stale:
            pass  # an idempotent request on a connection that broke before any answer
        connection = await self._acquire(origin, fresh=True)
        try:
            return await self._exchange(connection, payload, idempotent=idempotent)
        except _Unsent:
            raise NotSent("the connection closed before the request was written") from None

    def _split(self, url: str) -> tuple[Origin, str, str]:
        """The origin, request target and ``Host`` of ``url`` (kept: a client asks the same
        few URLs over and over)."""
        split = self._urls.get(url)
        if split is None:
            parts = urlsplit(url)
            scheme = parts.scheme.lower()
            port = parts.port or (443 if scheme == "https" else 80)
            origin = (scheme, parts.hostname or "", port)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            split = origin, target, parts.netloc.rsplit("@", 1)[-1]
            if len(self._urls) >= REMEMBERED:
                self._urls.clear()
            self._urls[url] = split
        return split

    def _check(self, name: str, value: str) -> str:
        """The request line of a header that may be sent ("" for ``Host``, which replaces
        the URL's), remembered for the next request that sends it; ValueError otherwise."""
        why = header_refusal(name, value)
        if why is not None:
            raise ValueError(why)
        line = "" if name.lower() == "host" else f"{name}: {value}"
        if len(self._checked) >= REMEMBERED:
            self._checked.clear()
        self._checked[(name, value)] = line
        return line

    async def _exchange(
        self, connection: Connection, payload: bytes, *, idempotent: bool
    ) -> Http1Response:
        if not connection.usable():
            connection.close()
            raise _Unsent
        parsed = Parsed()
        parser = httptools.HttpResponseParser(parsed)
        parsed.parser = parser
        received = 0
        try:
            connection.writer.write(payload)
            await connection.writer.drain()
            while not parsed.headers_done:
                if received > MAX_HEAD_BYTES:  # httptools holds a header until it ends
                    raise BrokenHTTP("the answer's head is too large")
                data = await connection.reader.read(READ_CHUNK)
                if not data:
                    raise ConnectionResetError("closed before answering")
                received += len(data)
                parser.feed_data(data)
        except httptools.HttpParserError as error:
            connection.close()
            cause = error.__context__ if isinstance(error.__context__, BrokenHTTP) else None
            if cause is not None:
                raise BrokenHTTP(str(cause)) from None
            raise BrokenHTTP(f"the answer is not HTTP/1.1: {error}") from None
        except OSError as error:
            connection.close()
            if connection.reused and not received:
                if idempotent:
                    raise _Stale from None
                raise ConnectionLost(
                    "the server closed a kept-alive connection before answering: the request "
                    "may have been delivered, so it was not sent again"
                ) from None
            raise ConnectionLost(f"the connection failed: {error}") from None
        except BaseException:
            connection.close()
            raise
        status = parser.get_status_code()
        return Http1Response(self, connection, parsed, status, parser)

    async def aclose(self) -> None:
        """Close every connection, in use or not, and wait (briefly) until they are."""
        self.closed = True
        for task in list(self._draining):
            task.cancel()
        for state in self._origins.values():
            while state.waiting:
                waiter = state.waiting.popleft()
                if not waiter.done():
                    waiter.set_exception(NotSent("the pool was closed while the request waited"))
        closing = [connection.writer for connection in self._open]
        for connection in list(self._open):
            connection.close()
        for state in self._origins.values():
            state.idle.clear()
        if closing:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CLOSE_SECONDS):
                    for writer in closing:  # one after the other: all close in the same turn
                        with contextlib.suppress(OSError, ssl.SSLError):
                            await writer.wait_closed()


class _Stale(Exception):
    """A reused connection broke before any byte of the answer to an idempotent request."""


class _Unsent(Exception):
    """The connection was found closed before the request was written."""
