"""One HTTP/1.1 answer on one connection: the failures, the parsing, the body on demand.

This module owns what happens on a single connection of :mod:`~mcp_operator.net.pool`: the
failures below HTTP (:class:`Http1Error`: :class:`NotSent`, :class:`ConnectFailed`,
:class:`ConnectionLost`, :class:`BrokenHTTP`), the ``httptools`` callbacks that read past
interim (1xx) answers within the head's byte bound (:class:`Parsed`), and
:class:`Http1Response`: status and lowercase headers, the body as it arrives, and the
connection handed back to its owner when the answer has ended (or drained in the background,
or closed). Which connection a request gets, and whether a request goes again, is the pool's.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
from collections import deque
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Literal, Protocol

import httptools

DRAIN_SECONDS = 5.0
DRAIN_BYTES = 1024 * 1024
"""An unfinished answer is read to its end in the background within these limits."""
MAX_HEAD_BYTES = 64 * 1024
"""An answer's head larger than this is refused (``BrokenHTTP``), however it arrives; the
interim answers before it count towards it."""
MAX_INTERIM_ANSWERS = 8
"""Interim (1xx) answers read past before the answer; more is a :class:`BrokenHTTP`."""
READ_CHUNK = 65536


class ConnectionOwner(Protocol):
    """What a connection and its answers tell the pool that owns them."""

    def closed_one(self, connection: Connection) -> None: ...

    def drain_later(self, response: Http1Response) -> None: ...

    def put_back(self, connection: Connection, keep_alive: bool) -> None: ...


Origin = tuple[str, str, int]


class Http1Error(Exception):
    """The request failed below HTTP. ``kind``: ``connect`` (no connection), ``unsent`` (a
    connection, but the request never left) or ``lost`` (it broke after the request may have
    reached the server: see ``may_have_been_delivered``)."""

    kind: Literal["connect", "unsent", "lost"] = "lost"
    may_have_been_delivered = True
    """Whether the server may have read (and acted on) the request: a caller that retries
    only what is safe to repeat must not repeat this one blindly."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class NotSent(Http1Error):
    """The request never left: sending it again cannot make it happen twice."""

    kind: Literal["connect", "unsent", "lost"] = "unsent"
    may_have_been_delivered = False


class ConnectFailed(NotSent):
    """No connection: refused by the egress policy (the cause is a
    :class:`~mcp_operator.net.egress.Refused`), or the OS or TLS said no (the cause)."""

    kind: Literal["connect", "unsent", "lost"] = "connect"


class ConnectionLost(Http1Error):
    """The connection broke after the request was written, before the answer ended: the
    server may have read it."""


class BrokenHTTP(ConnectionLost):
    """The server's answer is not HTTP/1.1 (the connection is dropped)."""


class Parsed:
    """httptools callbacks: interim answers skipped, then the head, body chunks, the end."""

    __slots__ = (
        "body",
        "complete",
        "header_bytes",
        "headers",
        "headers_done",
        "interim",
        "interim_seen",
        "keep_alive",
        "parser",
    )

    def __init__(self) -> None:
        self.parser: Any = None
        self.keep_alive = False
        """Read when the answer ends (httptools forgets it after the callback)."""
        self.headers: dict[str, str] = {}
        self.header_bytes = 0
        """Bytes of header names and values so far, interim answers' included."""
        self.headers_done = False
        self.interim = False
        """The message being parsed is an interim (1xx) answer."""
        self.interim_seen = 0
        self.body: deque[bytes] = deque()
        self.complete = False

    def on_header(self, name: bytes, value: bytes) -> None:
        self.header_bytes += len(name) + len(value)
        if self.header_bytes > MAX_HEAD_BYTES:
            raise BrokenHTTP("the answer's head is too large")
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:  # 101 is an upgrade: httptools refuses it
            self.interim_seen += 1
            if self.interim_seen > MAX_INTERIM_ANSWERS:
                raise BrokenHTTP("the server sent too many interim (1xx) answers")
            self.interim = True
            self.headers = {}
            return
        self.headers_done = True

    def on_body(self, body: bytes) -> None:
        self.body.append(bytes(body))

    def on_message_complete(self) -> None:
        if self.interim:  # the answer is the next message on the connection
            self.interim = False
            return
        self.complete = True
        self.keep_alive = bool(self.parser.should_keep_alive())


class Connection:
    """One open connection to ``origin``, owned by a pool (told when it closes)."""

    __slots__ = ("closed", "idle_since", "origin", "pool", "reader", "reused", "writer")

    def __init__(
        self,
        origin: Origin,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pool: ConnectionOwner,
    ) -> None:
        self.origin = origin
        self.reader = reader
        self.writer = writer
        self.reused = False
        self.idle_since = 0.0
        self.pool = pool
        self.closed = False

    def usable(self) -> bool:
        return not self.writer.is_closing() and not self.reader.at_eof()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.writer.close()
        self.pool.closed_one(self)


class Http1Response:
    """One answer: status and headers read, the body read on demand."""

    def __init__(
        self,
        pool: ConnectionOwner,
        connection: Connection,
        parsed: Parsed,
        status: int,
        parser: object,
    ) -> None:
        self._pool = pool
        self._connection: Connection | None = connection
        self._parsed = parsed
        self._parser = parser
        self.status_code = status
        self.headers: Mapping[str, str] = parsed.headers
        self._held = False

    def hold(self) -> None:
        """Keep the connection with this answer past the end of its body, until
        :meth:`aclose` (back to the pool) or :meth:`discard` (closed): for a caller that
        checks an answer before its connection may carry another request."""
        self._held = True

    async def aiter_bytes(self) -> AsyncGenerator[bytes, None]:
        parsed = self._parsed
        while True:
            while parsed.body:
                yield parsed.body.popleft()
            if parsed.complete or self._connection is None:
                if not self._held:
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

    def whole(self) -> bytes | None:
        """The whole body, when all of it has arrived already (a small answer usually comes
        in the same read as its head), as :meth:`aread` would give it; else ``None``, and
        nothing is read."""
        parsed = self._parsed
        if not parsed.complete:
            return None
        body = b"".join(parsed.body)
        parsed.body.clear()
        if not self._held:
            self._release()
        return body

    def _ends_at_close(self) -> bool:
        """Whether the answer's length is the connection's (no Content-Length, not chunked)."""
        headers = self._parsed.headers
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        return "content-length" not in headers and not chunked

    async def aiter_text(self) -> AsyncGenerator[str, None]:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        async with contextlib.aclosing(self.aiter_bytes()) as chunks:  # not the collector's
            async for chunk in chunks:
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
            async with (
                asyncio.timeout(DRAIN_SECONDS),
                contextlib.aclosing(self.aiter_bytes()) as chunks,
            ):
                async for chunk in chunks:
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
