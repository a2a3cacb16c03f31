"""Server-Sent Events: framing, the bounded stream object, and the pump that writes it.

Owns the ``text/event-stream`` side of an MCP endpoint: how a message
becomes an event, the response headers, keep-alive comments, a wake-up flag
that one writer awaits, and a session stream that is bounded (a client that
falls too far behind is closed, never buffered without end). Leaves what is
put on a stream, and when, to the endpoint that owns the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from typing import Any

from mcp_operator.serve.asgi import ClientGoneError, Receive, Send, send_more
from mcp_operator.serve.jsonrpc import dumps

logger = logging.getLogger(__name__)

KEEPALIVE_SECONDS = 15.0
KEEPALIVE_FRAME = b": keepalive\n\n"
SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]


def sse_event(message: Any, event: str = "message") -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + dumps(message) + b"\n\n"


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Waitable:
    """A wake-up flag that a single waiter can await many times (cheaper than a Queue)."""

    __slots__ = ("_waiter",)

    def __init__(self) -> None:
        self._waiter: asyncio.Future[None] | None = None

    def wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def sleep(self, timeout: float | None) -> None:  # noqa: ASYNC109 - a timer below
        """Until :meth:`wake`, or ``timeout`` seconds (None: no limit); a timer on the one
        future, not ``asyncio.wait_for`` (which adds a future, a callback and a partial to
        every wait on the adapter's and the bridge's path of each call)."""
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = None if timeout is None else loop.call_later(timeout, _release, waiter)
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()


class SseStream(Waitable):
    """A session's standalone stream (GET, or the legacy SSE transport): bounded, closable."""

    __slots__ = ("closed", "limit", "queue")

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.queue: deque[bytes] = deque()
        self.closed = False
        self.limit = limit

    def push(self, message: dict[str, Any]) -> bool:
        return self.push_raw(sse_event(message))

    def push_raw(self, frame: bytes) -> bool:
        if self.closed:
            return False
        if len(self.queue) >= self.limit:
            logger.warning("Closed an SSE stream that fell %d messages behind", self.limit)
            self.close()
            return False
        self.queue.append(frame)
        self.wake()
        return True

    def close(self) -> None:
        self.closed = True
        self.wake()


async def pump(stream: SseStream, receive: Receive, send: Send) -> None:
    """Write a stream's frames until it closes or the client goes away."""
    gone = asyncio.Event()

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()
        stream.wake()

    watcher = asyncio.create_task(watch())
    try:
        while not gone.is_set():
            while stream.queue:
                await send_more(send, stream.queue.popleft())
            if stream.closed:
                break
            await stream.sleep(KEEPALIVE_SECONDS)
            if not stream.queue and not stream.closed and not gone.is_set():
                await send_more(send, KEEPALIVE_FRAME)
        with contextlib.suppress(Exception):
            await send({"type": "http.response.body", "body": b""})
    except ClientGoneError:
        pass
    finally:
        watcher.cancel()
