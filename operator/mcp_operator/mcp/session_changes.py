"""A session's change streams, and following one for as long as the caller wants.

:meth:`SessionChanges.changes` opens the stream a server announces changes on: the legacy
session's ``GET`` stream (asking to resume where the last one stopped, ``Last-Event-ID``,
when the server gave its events ids), or the answer to 2026-07-28's
``subscriptions/listen``. It yields the tools' list changes; the other notifications go to
``on_notice``; a server request on it belongs to no call and is refused. :func:`follow`
keeps one open, and opens it again when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any

from mcp_operator.mcp import messages, sse
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.resume import MAX_EVENT_ID_CHARS
from mcp_operator.mcp.session_handshake import SessionHandshake
from mcp_operator.mcp.session_wire import CLOSE_SECONDS
from mcp_operator.net.http1 import Http1Error, Http1Response

logger = logging.getLogger("mcp_operator.mcp.session")  # one logger for the whole session

MAX_EVENT_BYTES = 1024 * 1024
"""One event of a change stream larger than this ends the stream."""
OPEN_STREAM_SECONDS = 10.0
"""A change stream's head is awaited this long; after it, a quiet stream is not bounded
(changes are rare)."""
REOPEN_SECONDS = 2.0
"""A change stream that ended or could not be opened is opened again after this pause."""
LIST_CHANGED = "notifications/tools/list_changed"
LISTEN_ACKNOWLEDGED = "notifications/subscriptions/acknowledged"


class SessionChanges(SessionHandshake):
    """A session's change streams (their cursor and ``on_notice`` are the session's state,
    :class:`~mcp_operator.mcp.session_wire.SessionWire`'s)."""

    @property
    def announces_changes(self) -> bool:
        """Whether the server said it announces tool list changes."""
        tools = self.capabilities.tools
        return self.connected and tools is not None and tools.list_changed is True

    @property
    def announces_notices(self) -> bool:
        """Whether a change stream is worth following: the server announces tool list
        changes, or (for a session with :attr:`on_notice`) it has prompts, resources or
        logging, whose notifications the stream carries."""
        if self.announces_changes:
            return True
        caps = self.capabilities
        others = (caps.prompts, caps.resources, caps.logging)
        return self.connected and self.on_notice is not None and any(c is not None for c in others)

    async def changes(self) -> AsyncGenerator[bool, None]:
        """Open the stream the server announces tool list changes on (the legacy session's
        GET stream, or the answer to 2026-07-28's ``subscriptions/listen``): yield ``False``
        once it is open (a listen stream at its acknowledgement), then ``True`` per
        ``notifications/tools/list_changed``; ends when the stream does.

        Raises:
            McpFailure: the stream could not be opened (not connected, a refusal).
        """
        if not self.connected:
            await self.connect()
        try:
            async with asyncio.timeout(OPEN_STREAM_SECONDS):
                answer = await self._open_changes()
        except TimeoutError:
            raise McpFailure(
                "timeout",
                f"{self.name} did not open a change stream within {OPEN_STREAM_SECONDS:g}s",
            ) from None
        try:
            media = messages.media(answer)
            if answer.status_code != 200 or media != "text/event-stream":
                self.stream_cursor = None  # a refused resume: the next open starts afresh
                raise McpFailure(
                    "http",
                    f"{self.name} did not open a change stream (HTTP {answer.status_code})",
                    status=answer.status_code,
                )
            # A 2026-07-28 server subscribes before it acknowledges: only then is it open.
            acknowledged = not self.modern
            if acknowledged:
                yield False
            async for data in sse.messages(
                answer.aiter_bytes(), MAX_EVENT_BYTES, on_id=self._saw_event_id
            ):
                message = messages.loads(data)
                method = message.get("method") if isinstance(message, dict) else None
                if method == LISTEN_ACKNOWLEDGED and not acknowledged:
                    acknowledged = True
                    yield False
                elif method == LIST_CHANGED:
                    yield True
                elif isinstance(message, dict) and "id" in message and "method" in message:
                    await self._refuse_unrelated(message)
                elif messages.is_notice(message) and self.on_notice is not None:
                    self.on_notice(message)
        except (Http1Error, OSError, sse.EventTooLarge):
            return  # the stream ended: the follower opens it again
        finally:
            answer.discard()

    async def _open_changes(self) -> Http1Response:
        """The request whose answer carries the change notifications, in the era."""
        if self.modern:
            request_id = next(self._ids)
            wanted = {"toolsListChanged": True, **self.listen_filter}
            params = self._stamped({"notifications": wanted}, None)
            body = messages.body(request_id, "subscriptions/listen", params)
            headers = self._request_headers("subscriptions/listen", None)
            return await self._send("POST", headers, body)
        headers = self._request_headers("", None)
        headers["accept"] = "text/event-stream"
        del headers["content-type"]
        cursor = self.stream_cursor
        self.stream_resumed = cursor is not None and cursor[0] == self.session_id
        if cursor is not None and self.stream_resumed:
            headers["last-event-id"] = cursor[1]
        return await self._send("GET", headers, b"")

    def _saw_event_id(self, event_id: str) -> None:
        if self.session_id is not None and len(event_id) <= MAX_EVENT_ID_CHARS:
            self.stream_cursor = (self.session_id, event_id)

    async def _refuse_unrelated(self, message: Mapping[str, Any]) -> None:
        """Refuse a server request that came outside any call (a GET stream's): nothing ties
        it to a caller, so it is never sent to one."""
        request_id = message.get("id")
        if not isinstance(request_id, str | int) or isinstance(request_id, bool):
            return
        error = {"code": -32601, "message": f"{message.get('method')} belongs to no call"}
        with contextlib.suppress(McpFailure, OSError):
            async with asyncio.timeout(CLOSE_SECONDS):
                await self.respond({"jsonrpc": "2.0", "id": request_id, "error": error})


async def follow(
    session: SessionChanges,
    on_changed: Callable[[], Awaitable[None]],
    reopen_seconds: float = REOPEN_SECONDS,
) -> None:
    """Keep the server's change stream open until cancelled, calling ``on_changed`` for every
    change it announces. A stream that ends (the server restarted, the session was
    established again, the connection dropped) is opened again after ``reopen_seconds``.
    Every open that did not resume a previous stream (the first one, a server that gave no
    event ids or refused the ``Last-Event-ID``; 2026-07-28 has none) is followed by one
    ``on_changed``: a change announced between the caller's last listing and the moment the
    stream opened reached no one (list, then watch, then list once more)."""
    while True:
        if session.announces_notices:
            try:
                async for changed in session.changes():
                    # a stream resumed with Last-Event-ID replays what it missed: no relist
                    if changed or not session.stream_resumed:
                        await on_changed()
            except McpFailure as failure:
                logger.debug("Could not follow the tool list of %s: %s", session.name, failure)
        await asyncio.sleep(reopen_seconds)
