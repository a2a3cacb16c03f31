"""A lean HTTP/1.1 client: keep-alive connections, one write per request.

Two users: the bridge's calls upstream (every ``tools/call`` of an agent becomes one POST)
and the operator's probe of a Streamable HTTP server (:mod:`~mcp_operator.mcp.streamable`,
a few requests per probe and thousands of probes), both hot paths: httpx spends over a
millisecond of CPU per request on the 2-core machine the bridge was measured on
(bench/bridge_bench.py), more than the whole budget for the bridge's added latency. This
one writes the request head and body in one ``write``, parses the answer with
``httptools`` (already the HTTP parser of the bridge's own server), and keeps connections
open per origin (``http`` and ``https``; TLS through the given context, else the default).

It owns connections and bytes only: a :class:`Http1Response` gives the status, the headers
(lowercase names), and the body as it arrives (``aiter_bytes``/``aiter_text``/``aread``),
the interface its users read answers through. A connection goes
back to the pool only when its answer was read to the end and the server keeps it alive. A
reused connection that the server had already closed (EOF before any byte of the answer) is
retried once on a new connection: the server never read that request. Deadlines are the
caller's (``asyncio.timeout``); failures are :class:`Http1Error`: :class:`ConnectFailed`
(its cause says why: the refusal, the OS or the TLS error), :class:`ConnectionLost`, or
:class:`BrokenHTTP` (the answer is not HTTP/1.1). Every new connection goes to an address
the pool's egress policy allows (:mod:`~mcp_operator.net.egress`, given by the user): the
name is resolved here and the connection made to the allowed address, with TLS still
verifying the name. :meth:`Http1Pool.aclose` closes every connection the pool opened, in
use or not.
"""

from __future__ import annotations

import asyncio
import codecs
import socket
import ssl
from collections import deque
from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

import httptools

from mcp_operator.net.egress import EgressPolicy, Refused, allowed_addresses

MAX_IDLE_PER_ORIGIN = 64
DRAIN_SECONDS = 5.0
DRAIN_BYTES = 1024 * 1024
"""An unfinished answer is read to its end in the background within these limits."""
MAX_HEAD_BYTES = 64 * 1024
"""An answer's head larger than this is refused (``BrokenHTTP``), however it arrives."""
READ_CHUNK = 65536
IDLE_SECONDS = 5.0
"""A connection idle longer than this is closed instead of reused (as httpx's pools do): a
peer that vanished without a FIN (a replaced node, a stale NAT entry) would otherwise hold
the next request until its deadline."""

Origin = tuple[str, str, int]


class Http1Error(Exception):
    """The request failed below HTTP: ``connect`` (no connection) or ``lost`` (it broke)."""

    kind: Literal["connect", "lost"] = "lost"

    def __init__(self, message: str) -> None:
        super().__init__(message)


class ConnectFailed(Http1Error):
    """No connection: refused by the egress policy (the cause is a
    :class:`~mcp_operator.net.egress.Refused`), or the OS or TLS said no (the cause)."""

    kind = "connect"


class ConnectionLost(Http1Error):
    """The connection broke before the answer ended."""


class BrokenHTTP(ConnectionLost):
    """The server's answer is not HTTP/1.1 (the connection is dropped)."""


class _Parsed:
    """httptools callbacks: the head, then body chunks, then the end."""

    __slots__ = (
        "body",
        "complete",
        "header_bytes",
        "headers",
        "headers_done",
        "keep_alive",
        "parser",
    )

    def __init__(self) -> None:
        self.parser: Any = None
        self.keep_alive = False
        """Read when the answer ends (httptools forgets it after the callback)."""
        self.headers: dict[str, str] = {}
        self.header_bytes = 0
        self.headers_done = False
        self.body: deque[bytes] = deque()
        self.complete = False

    def on_header(self, name: bytes, value: bytes) -> None:
        self.header_bytes += len(name) + len(value)
        if self.header_bytes > MAX_HEAD_BYTES:
            raise BrokenHTTP("the answer's head is too large")
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.headers_done = True

    def on_body(self, body: bytes) -> None:
        self.body.append(bytes(body))

    def on_message_complete(self) -> None:
        self.complete = True
        self.keep_alive = bool(self.parser.should_keep_alive())


class _Connection:
    __slots__ = ("_open", "idle_since", "origin", "reader", "reused", "writer")

    def __init__(
        self,
        origin: Origin,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        open_connections: set[_Connection],
    ) -> None:
        self.origin = origin
        self.reader = reader
        self.writer = writer
        self.reused = False
        self.idle_since = 0.0
        self._open = open_connections

    def usable(self) -> bool:
        return not self.writer.is_closing() and not self.reader.at_eof()

    def close(self) -> None:
        self.writer.close()
        self._open.discard(self)


class Http1Response:
    """One answer: status and headers read, the body read on demand."""

    def __init__(
        self, pool: Http1Pool, connection: _Connection, parsed: _Parsed, status: int, parser: object
    ) -> None:
        self._pool = pool
        self._connection: _Connection | None = connection
        self._parsed = parsed
        self._parser = parser
        self.status_code = status
        self.headers: Mapping[str, str] = parsed.headers

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        parsed = self._parsed
        while True:
            while parsed.body:
                yield parsed.body.popleft()
            if parsed.complete or self._connection is None:
                self._release()
                return
            try:
                data = await self._connection.reader.read(READ_CHUNK)
            except OSError as error:
                self._drop()
                raise ConnectionLost(f"the connection failed: {error}") from error
            if not data:
                self._drop()
                if self._ends_at_close():
                    return  # an answer without a length ends where the connection does
                raise ConnectionLost("the server closed the connection mid-answer")
            self._feed(data)

    def _ends_at_close(self) -> bool:
        """Whether the answer's length is the connection's (no Content-Length, not chunked)."""
        headers = self._parsed.headers
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        return "content-length" not in headers and not chunked

    async def aiter_text(self) -> AsyncIterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        async for chunk in self.aiter_bytes():
            yield decoder.decode(chunk)
        tail = decoder.decode(b"", final=True)
        if tail:
            yield tail

    async def aread(self) -> bytes:
        return b"".join([chunk async for chunk in self.aiter_bytes()])

    async def aclose(self) -> None:
        """Done with the answer: the connection goes back to the pool once the answer has
        ended. An event stream usually ends just after the message its reader wanted, so
        the rest is read in the background (bounded in time and bytes) instead of throwing
        the connection away."""
        if self._connection is None:
            return
        if self._parsed.complete:
            self._parsed.body.clear()
            self._release()
        else:
            self._pool.drain_later(self)

    def discard(self) -> None:
        """Done with the answer, and with its connection: closed, never reused (an answer
        that is out of step with its request, or a stream given up before its end)."""
        self._drop()

    async def drain(self) -> None:
        """Read the answer to its end (within the limits), then release or drop."""
        received = 0
        try:
            async with asyncio.timeout(DRAIN_SECONDS):
                async for chunk in self.aiter_bytes():
                    received += len(chunk)
                    if received > DRAIN_BYTES:
                        break
        except (TimeoutError, Http1Error, OSError):
            pass
        if self._parsed.complete and received <= DRAIN_BYTES:
            self._release()
        else:
            self._drop()

    def _feed(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)  # type: ignore[attr-defined]
        except httptools.HttpParserUpgrade:
            self._drop()
            raise BrokenHTTP("the server upgraded the connection") from None
        except httptools.HttpParserError as error:
            self._drop()
            raise BrokenHTTP(f"the answer is not HTTP/1.1: {error}") from None

    def _release(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            self._pool.put_back(connection, self._parsed.keep_alive)

    def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()


class Http1Pool:
    """Keep-alive connections by origin."""

    def __init__(
        self,
        *,
        egress: EgressPolicy | None,
        ssl_context: ssl.SSLContext | None = None,
        server_name: str | None = None,
    ) -> None:
        """``egress``: where connections may go; ``None`` only for a destination the
        operator's own configuration names (the API server). ``server_name``: the name TLS
        verifies and sends, instead of the URL's host (a kubeconfig's ``tls-server-name``)."""
        self._idle: dict[Origin, list[_Connection]] = {}
        self._ssl = ssl_context
        self._egress = egress
        self._server_name = server_name
        self._draining: set[asyncio.Task[None]] = set()
        self._open: set[_Connection] = set()
        """Every connection opened and not yet closed (idle, in use or draining)."""
        self.closed = False

    def _tls(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl

    async def _connect(self, origin: Origin) -> _Connection:
        scheme, host, port = origin
        try:
            addresses = await self._addresses(host, port)
        except Refused as refused:
            raise ConnectFailed(f"refused to connect to {refused}") from refused
        except OSError as error:
            raise ConnectFailed(f"could not connect: {error}") from error
        for index, address in enumerate(addresses):
            try:
                if scheme == "https":
                    reader, writer = await asyncio.open_connection(
                        address,
                        port,
                        ssl=self._tls(),
                        server_hostname=self._server_name or host.strip("[]"),
                    )
                else:
                    reader, writer = await asyncio.open_connection(address, port)
                break
            except (OSError, ssl.SSLError) as error:
                if index == len(addresses) - 1:  # the next address, if any (IPv6, then IPv4)
                    raise ConnectFailed(f"could not connect: {error}") from error
        connection = _Connection(origin, reader, writer, self._open)
        self._open.add(connection)
        return connection

    @property
    def connections(self) -> int:
        """Connections open now (idle, in use or draining)."""
        return len(self._open)

    async def _addresses(self, host: str, port: int) -> list[str]:
        if self._egress is not None:
            return await allowed_addresses(self._egress, host, port)
        found = await asyncio.get_running_loop().getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM
        )
        return list(dict.fromkeys(str(info[4][0]) for info in found))

    def _take(self, origin: Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        now = asyncio.get_running_loop().time()
        while idle:
            connection = idle.pop()
            if connection.usable() and now - connection.idle_since <= IDLE_SECONDS:
                connection.reused = True
                return connection
            connection.close()
        return None

    def drain_later(self, response: Http1Response) -> None:
        task = asyncio.get_running_loop().create_task(response.drain())
        self._draining.add(task)
        task.add_done_callback(self._draining.discard)

    def put_back(self, connection: _Connection, keep_alive: bool) -> None:
        idle = self._idle.setdefault(connection.origin, [])
        if (
            keep_alive
            and not self.closed
            and connection.usable()
            and len(idle) < MAX_IDLE_PER_ORIGIN
        ):
            connection.idle_since = asyncio.get_running_loop().time()
            idle.append(connection)
        else:
            connection.close()

    async def request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes = b""
    ) -> Http1Response:
        """Send one request; the answer once its head has arrived."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        port = parts.port or (443 if scheme == "https" else 80)
        host = parts.hostname or ""
        origin = (scheme, host, port)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host_header = parts.netloc.rsplit("@", 1)[-1]
        lines = [f"{method} {target} HTTP/1.1"]
        for name, value in headers.items():
            why = header_refusal(name, value)
            if why is not None:
                raise ValueError(why)
            if name.lower() == "host":
                host_header = value  # the caller's virtual host (the connection is unchanged)
            else:
                lines.append(f"{name}: {value}")
        lines.insert(1, f"host: {host_header}")
        lines.append(f"content-length: {len(body)}")
        payload = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
        connection = self._take(origin)
        if connection is not None:
            try:
                return await self._exchange(connection, payload)
            except _Stale:
                pass  # the server had closed it while idle: it never read this request
        return await self._exchange(await self._connect(origin), payload)

    async def _exchange(self, connection: _Connection, payload: bytes) -> Http1Response:
        parsed = _Parsed()
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
            raise BrokenHTTP(f"the answer is not HTTP/1.1: {error}") from None
        except OSError as error:
            connection.close()
            if connection.reused and not received:
                raise _Stale from None
            raise ConnectionLost(f"the connection failed: {error}") from None
        except BaseException:
            connection.close()
            raise
        status = parser.get_status_code()
        return Http1Response(self, connection, parsed, status, parser)

    async def aclose(self) -> None:
        self.closed = True
        for task in list(self._draining):
            task.cancel()
        for connection in list(self._open):
            connection.close()
        self._idle.clear()


def header_refusal(name: str, value: str) -> str | None:
    """Why a header cannot be sent as it is (it would break, forge or reframe the request's
    head), or ``None``. The value is never shown: it may be a credential."""
    if not name or any(c in _NOT_IN_NAMES or not c.isascii() or not c.isprintable() for c in name):
        return f"the header name {name!r} is not a valid HTTP token"
    if name.lower() in FRAMING_HEADERS:
        return f"the header {name!r} frames the request, which only the client may do"
    if any(c != "\t" and (not c.isprintable() or ord(c) > 0xFF) for c in value):
        return f"the value of header {name!r} holds a control character or non-Latin-1 text"
    return None


FRAMING_HEADERS = frozenset(
    {
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "proxy-connection",
    }
)
"""Headers that say how a request is framed: the pool writes its own, and a second one from a
caller would let an intermediary read another request than the server. (``Host`` may be
given: it replaces the URL's, once.)"""


_NOT_IN_NAMES = frozenset(' "(),/:;<=>?@[\\]{}')


class _Stale(Exception):
    """A reused connection was closed by the server before it answered."""
