"""One MCP client session over the legacy HTTP+SSE transport (2024-11-05), for the bridge.

That transport has two halves: a ``GET`` on the server's URL opens an event stream whose
first event, ``endpoint``, names the URL to ``POST`` every JSON-RPC message to; each POST is
answered ``202`` and every answer, notification and server request comes back on that one
stream. :class:`LegacySseSession` is :class:`~mcp_operator.mcp.session.McpSession` on that
wire: the same headers, credentials, handshake, pages, failures and tracing (it inherits
them), only how a request travels and how its answer comes back are its own:

- **The stream** is opened on :meth:`connect` and read by one task for as long as it lives,
  bounded per event (:data:`MAX_EVENT_BYTES`; one larger ends the stream), parsed by our own
  reader (:func:`~mcp_operator.mcp.sse.events`). The era is the handshake's only
  (``initialize`` → ``notifications/initialized``): there is no ``server/discover`` here.
- **The endpoint** is resolved against the stream's URL and must be on its origin (scheme,
  host, port): an endpoint elsewhere would send the session's headers and tokens to another
  server, so it is refused (:func:`~mcp_operator.mcp.legacy_routing.endpoint_url`), as
  the SDK's own client does; a URL that could not go on a request line as it is (a space, a
  control character) is refused too.
  Every POST goes through the same pool (:mod:`~mcp_operator.net.pool`), so the egress
  policy judges it like any other request.
- **Answers** are matched to their request by JSON-RPC id, strictly by type and value
  (:func:`~mcp_operator.mcp.legacy_routing.answered_id`): each request waits on its own
  future, within the caller's deadline; an answer to no waiting request (one that gave up)
  is dropped. A cancelled request that has ``related`` tells the server
  (``notifications/cancelled``), as the session does.
- **A lost stream** (the server died, the connection broke, a refused endpoint) fails every
  waiting request with a ``connection`` failure (``unavailable``: the bridge marks the
  server down and lists it again later) and leaves the session unconnected, so the next
  request opens a new stream and handshakes again. A ``POST`` answered ``404`` (or a 400
  naming the session) means the server forgot the session: established again once, as the
  session does.
- **What the server says on the stream**: ``notifications/tools/list_changed`` is what
  :meth:`LegacySseSession.changes` yields; ``notifications/progress`` whose
  ``progressToken`` is the one a request with ``related`` sent goes to that request's
  ``related`` (the token is the only sound tie to a call on this transport); other
  notifications go to ``on_notice``. A server request (sampling, elicitation, roots) carries
  nothing that ties it to a call on this transport, so it is refused (``-32601``) as a
  request on a Streamable HTTP GET stream is; ``ping`` is answered. Answers and refusals are
  sent in the background, at most :data:`MAX_ERRANDS` at once (a flood is dropped).

Header values (credentials) never appear in messages or reprs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import urllib.parse
from collections.abc import AsyncGenerator, Awaitable, Mapping
from typing import Any

from mcp_operator.mcp import sse
from mcp_operator.mcp.bounds import BodyReader
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.legacy_routing import answered_id, endpoint_url, token_key
from mcp_operator.mcp.messages import body, display_url, loads, media
from mcp_operator.mcp.session import McpSession
from mcp_operator.mcp.session_changes import LIST_CHANGED, OPEN_STREAM_SECONDS
from mcp_operator.mcp.session_exchange import Related, not_followed
from mcp_operator.net.http1 import Http1Error

logger = logging.getLogger(__name__)

MAX_EVENT_BYTES = 8 * 1024 * 1024
"""One event of the stream larger than this ends the stream (an answer comes in one event:
the bridge's bound on an answer)."""
MAX_ERRANDS = 16
"""Answers to the server's own requests (refusals, pings) in flight at once; past it they
are dropped."""


class _Watch:
    """One :meth:`LegacySseSession.changes` reader of a stream: changes announced, and a
    wake-up."""

    __slots__ = ("changed", "wake")

    def __init__(self) -> None:
        self.changed = 0
        self.wake = asyncio.Event()


class _Stream:
    """One open event stream: its endpoint, what waits on it, and how it ended."""

    def __init__(self) -> None:
        self.endpoint: str | None = None
        self.opened = asyncio.Event()
        """Set at the endpoint, or when the stream ended first."""
        self.ended: McpFailure | None = None
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.progress: dict[tuple[type, str | int], Related] = {}
        """Progress token → the ``related`` of the request that sent it."""
        self.watches: set[_Watch] = set()
        self.session_id: str | None = None
        self.reader: asyncio.Task[None] | None = None

    def end(self, failure: McpFailure) -> None:
        """The stream is over: every waiting request fails with ``failure``."""
        if self.ended is not None:
            return
        self.ended = failure
        self.opened.set()
        for waiter in self.waiting.values():
            if not waiter.done():
                waiter.set_exception(failure)
        for watch in self.watches:
            watch.wake.set()


class LegacySseSession(McpSession):
    """One server's session on the legacy HTTP+SSE transport (``url``: its SSE URL); the
    interface of :class:`~mcp_operator.mcp.session.McpSession`."""

    def __init__(
        self,
        url: str,
        *args: Any,
        max_event_bytes: int = MAX_EVENT_BYTES,
        stream_body: BodyReader | None = None,
        **kw: Any,
    ):
        super().__init__(url, *args, **kw)
        self.max_event_bytes = max_event_bytes
        self._stream_body = stream_body
        """How the event stream's bytes are read: given, the caller's bounds (the probe's
        count every byte and cut tool lists on arrival); else as they come, each event
        bounded by ``max_event_bytes``."""
        self.open_seconds = OPEN_STREAM_SECONDS
        """How long the stream's head and its ``endpoint`` event are awaited, each."""
        self._stream: _Stream | None = None

    def __repr__(self) -> str:
        return f"LegacySseSession(name={self.name!r}, url={display_url(self.url)!r})"

    @property
    def endpoint(self) -> str | None:
        """Where messages are posted, while the stream is open."""
        stream = self._stream
        return stream.endpoint if stream is not None and stream.ended is None else None

    def reset(self) -> None:
        """Forget the session (the next request connects anew, on a new stream). Requests
        still waiting on the old stream go on waiting, as a Streamable HTTP session's
        requests in flight do; the old stream closes when the last of them is answered."""
        super().reset()
        stream, self._stream = self._stream, None
        if stream is not None and not stream.waiting:
            self._end(stream)

    async def connect(self) -> None:
        """Open the stream, learn its endpoint, handshake; once at a time."""
        async with self._connecting:
            if self.connected:
                return
            self._close_stream()
            stream = await self._open()
            try:
                await self._initialize()
            except BaseException:
                self._close_stream()
                raise
            self.session_id = stream.session_id  # the handshake forgot the last one

    async def close(self, seconds: float = 2.0) -> None:
        """End the session: its stream closes now (this transport has no other way), and
        what waits on it fails."""
        super().reset()
        self._close_stream()

    # -- the stream ------------------------------------------------------------------------

    async def _open(self) -> _Stream:
        headers = self._request_headers("", None)
        headers["accept"] = "text/event-stream"
        del headers["content-type"]
        try:
            async with asyncio.timeout(self.open_seconds):
                answer = await self._send("GET", headers, b"")
        except TimeoutError:
            raise McpFailure(
                "timeout", f"{self.name} did not open its event stream in {self.open_seconds:g}s"
            ) from None
        if answer.status_code != 200 or media(answer) != "text/event-stream":
            try:
                not_followed(answer)
                if answer.status_code >= 300:
                    await self._refusal(answer, "GET", None)
                raise McpFailure(
                    "mcp",
                    f"{self.name} answered GET with HTTP {answer.status_code} "
                    f"and {media(answer) or 'no content type'}, not an event stream",
                )
            finally:
                answer.discard()
        stream = _Stream()
        self._stream = stream
        stream.reader = asyncio.get_running_loop().create_task(self._read(stream, answer))
        try:
            async with asyncio.timeout(self.open_seconds):
                await stream.opened.wait()
        except TimeoutError:
            self._close_stream()
            raise McpFailure(
                "timeout",
                f"{self.name} named no endpoint on its event stream in {self.open_seconds:g}s",
            ) from None
        except BaseException:
            self._close_stream()
            raise
        if stream.ended is not None:
            raise stream.ended
        return stream

    def _close_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            self._end(stream)

    def _end(self, stream: _Stream) -> None:
        stream.end(McpFailure("connection", f"the session with {self.name} was closed"))
        if stream.reader is not None:
            stream.reader.cancel()

    async def _read(self, stream: _Stream, answer: Any) -> None:
        """Read the stream until it ends, handing each event on; then fail what waits."""
        failure = McpFailure("connection", f"{self.name} closed its event stream")
        reader = self._stream_body
        chunks = answer.aiter_bytes() if reader is None else reader(answer, "sse")
        reading = sse.events(chunks, self.max_event_bytes)
        try:
            async with contextlib.aclosing(reading):
                async for kind, data in reading:
                    if kind == "endpoint":
                        self._found(stream, data)
                    elif kind in (None, "message") and stream.endpoint is not None:
                        self._dispatch(stream, data)
        except sse.EventTooLarge as error:
            failure = McpFailure("limit", f"{self.name} ended its event stream: {error}")
        except (Http1Error, OSError) as error:
            failure = McpFailure("connection", f"the event stream of {self.name} broke ({error})")
        except McpFailure as refused:
            failure = refused
            logger.warning("Closed the event stream of %s: %s", self.name, refused)
        except Exception as error:  # the caller's ``stream_body`` refused it (its bounds)
            failure = McpFailure("limit", f"the event stream of {self.name} was cut: {error}")
            failure.__cause__ = error
        finally:
            answer.discard()
            stream.end(failure)
            if self._stream is stream:
                self._stream = None
                self.protocol_version = None  # the next request connects anew
                self.session_id = None

    def _found(self, stream: _Stream, data: bytes) -> None:
        if stream.endpoint is not None:
            logger.debug("Ignored another endpoint event of %s", self.name)
            return
        where = endpoint_url(self.url, data.decode("utf-8", "replace"))
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(where).query)
        named = query.get("sessionId") or query.get("session_id")
        stream.session_id = named[0][:256] if named else where
        stream.endpoint = where
        stream.opened.set()

    def _dispatch(self, stream: _Stream, data: bytes) -> None:
        """One message of the stream, to whom it belongs (never blocking the reader)."""
        message = loads(data)
        if not isinstance(message, dict):
            logger.debug("Skipped an event of %s that is not a JSON-RPC message", self.name)
            return
        method = message.get("method")
        if not isinstance(method, str):
            answer_id = answered_id(message)
            waiter = stream.waiting.get(answer_id) if answer_id is not None else None
            if waiter is not None and not waiter.done():
                waiter.set_result(message)
            return  # else an answer nobody waits for (it gave up): dropped
        if "id" in message:
            if method == "ping":
                reply = {"jsonrpc": "2.0", "id": message["id"], "result": {}}
                self._errand(self.respond(reply))
            else:
                self._errand(self._refuse_unrelated(message))
            return
        if method == LIST_CHANGED:
            for watch in stream.watches:
                watch.changed += 1
                watch.wake.set()
            return
        if method == "notifications/progress":
            params = message.get("params")
            key = token_key(params.get("progressToken")) if isinstance(params, dict) else None
            related = stream.progress.get(key) if key is not None else None
            if related is not None:
                related.heard(message)
            return
        if method != "notifications/cancelled" and self.on_notice is not None:
            self.on_notice(message)

    def _errand(self, work: Awaitable[None]) -> None:
        if len(self._errands) >= MAX_ERRANDS:
            if asyncio.iscoroutine(work):
                work.close()
            return
        task = asyncio.ensure_future(work)
        self._errands.add(task)
        task.add_done_callback(self._errands.discard)

    # -- the wire --------------------------------------------------------------------------

    def _target(self, verb: str) -> str:
        if verb != "POST":
            return self.url
        endpoint = self.endpoint
        if endpoint is None:
            raise McpFailure("connection", f"the event stream of {self.name} is not open")
        return endpoint

    def _request_headers(
        self, method: str, modern: str | None, params: Mapping[str, Any] | None = None
    ) -> dict[str, str]:
        headers = super()._request_headers(method, modern, params)
        # The endpoint names the session; this transport has no session or version headers.
        headers.pop("mcp-session-id", None)
        headers.pop("mcp-protocol-version", None)
        return headers

    async def _exchange(
        self,
        method: str,
        params: Mapping[str, Any],
        *,
        modern: str | None = None,
        related: Related | None = None,
    ) -> dict[str, Any]:
        """Post one request to the endpoint and await its answer on the stream."""
        stream = self._stream
        if stream is None or stream.ended is not None or modern is not None:
            raise McpFailure("connection", f"the event stream of {self.name} is not open")
        request_id = next(self._ids)
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        stream.waiting[request_id] = waiter
        meta = params.get("_meta")
        token = token_key(meta.get("progressToken")) if isinstance(meta, dict) else None
        if related is not None and token is not None:
            stream.progress[token] = related
        session_id = self.session_id
        try:
            try:
                answer = await self._send(
                    "POST",
                    self._request_headers(method, None),
                    body(request_id, method, dict(params)),
                )
            except asyncio.CancelledError:
                if related is not None:
                    self._tell_cancelled(request_id, session_id)  # it may have been sent
                raise
            try:
                if answer.status_code >= 300:
                    await self._refusal(answer, method, session_id)
            finally:
                await answer.aclose()
            try:
                reply = await waiter
            except asyncio.CancelledError:
                if related is not None:
                    self._tell_cancelled(request_id, session_id)
                raise
        finally:
            stream.waiting.pop(request_id, None)
            if token is not None and stream.progress.get(token) is related:
                del stream.progress[token]
            if stream is not self._stream and not stream.waiting:
                self._end(stream)  # a stream the session let go of: its last request is over
            if waiter.done() and not waiter.cancelled():
                waiter.exception()  # retrieved: a stream that ended after we stopped waiting
            else:
                waiter.cancel()
        return self._result(method, reply)

    # -- change streams --------------------------------------------------------------------

    async def changes(self) -> AsyncGenerator[bool, None]:
        """``False`` once the stream is open, then ``True`` per
        ``notifications/tools/list_changed``; ends when the stream does (never resumed:
        this transport has no ``Last-Event-ID``).

        Raises:
            McpFailure: the stream could not be opened.
        """
        if not self.connected:
            await self.connect()
        stream = self._stream
        if stream is None or stream.ended is not None:
            raise McpFailure("connection", f"the event stream of {self.name} is not open")
        self.stream_resumed = False
        watch = _Watch()
        stream.watches.add(watch)
        try:
            yield False
            while True:
                await watch.wake.wait()
                watch.wake.clear()
                while watch.changed:
                    watch.changed = 0  # several announcements between two reads: one relist
                    yield True
                if stream.ended is not None:
                    return
        finally:
            stream.watches.discard(watch)
