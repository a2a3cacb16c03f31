"""Read deadlines for HTTP/1.1 requests: a client that sends slowly is cut off (slowloris).

Owns how long a connection may take to deliver a request: its headers within
``header_seconds`` of the connection opening (or of the first byte of a later
request on a kept-alive connection), then its body within ``body_seconds`` of
the headers. A request that misses its deadline has its connection closed:
the application sees a disconnect, nothing is answered. uvicorn bounds only
the idle time between requests (``timeout_keep_alive``); without this a client
that trickles a byte every few seconds holds a connection, a task and its
buffers for ever. Built on uvicorn's httptools protocol, the parser the
servers here run on; its writes go through :mod:`~mcp_operator.serve.coalesce` (a
response's head and body in one ``send``), and a lost connection is told to the requests
that watch for it (``asgi.DISCONNECT_WATCH``: no task per request to notice it); leaves
everything else about HTTP to uvicorn.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from mcp_operator.serve.asgi import DISCONNECT_WATCH
from mcp_operator.serve.coalesce import CoalescingTransport

logger = logging.getLogger(__name__)


class DeadlineHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header and a body read deadline.

    One timer per connection, re-armed lazily: a request only moves the deadline
    (a float), and the timer, when it fires early, sleeps again until the current
    deadline. The hot path creates no timer per request.
    """

    header_seconds = 10.0
    body_seconds = 30.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._lost = False
        self._watchers: dict[int, Callable[[], None]] = {}
        self._watcher_ids = itertools.count()
        self._extensions: dict[str, dict[object, object]] = {
            DISCONNECT_WATCH: {"watch": self._watch_lost}
        }

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # After uvicorn's own setup (its flow control reads the real transport): every
        # response, and everything else the protocol writes, goes out one send per loop turn.
        self.transport = CoalescingTransport(transport, self.loop)  # type: ignore[assignment]
        self._expect_within(self.header_seconds)

    def connection_lost(self, exc: Exception | None) -> None:
        self._deadline = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._lost = True
        super().connection_lost(exc)
        watchers, self._watchers = self._watchers, {}
        for on_gone in watchers.values():
            try:
                on_gone()
            except Exception:  # one request's callback must not stop the others being told
                logger.exception("A disconnect callback failed")

    def _watch_lost(self, on_gone: Callable[[], None]) -> Callable[[], None]:
        """``asgi.DISCONNECT_WATCH``: ``on_gone`` when the connection is lost (soon, if it
        already was); the function returned stops watching."""
        if self._lost:
            handle = self.loop.call_soon(on_gone)
            return handle.cancel
        key = next(self._watcher_ids)
        self._watchers[key] = on_gone

        def stop() -> None:
            self._watchers.pop(key, None)

        return stop

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope["extensions"] = self._extensions
        if self._deadline is None:  # a later request on a kept-alive connection
            self._expect_within(self.header_seconds)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._expect_within(self.body_seconds)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._deadline = None  # the request is read; the timer, if it fires, does nothing

    def _expect_within(self, seconds: float) -> None:
        deadline = self.loop.time() + seconds
        self._deadline = deadline
        if self._timer is None or deadline < self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            self._arm(deadline)

    def _arm(self, at: float) -> None:
        self._timer_at = at
        self._timer = self.loop.call_at(at, self._check)

    def _check(self) -> None:
        self._timer = None
        deadline = self._deadline
        if deadline is None:
            return
        if self.loop.time() < deadline:
            self._arm(deadline)
        elif not self.transport.is_closing():
            self.transport.close()


def with_deadlines(header_seconds: float, body_seconds: float) -> type[HttpToolsProtocol]:
    """A protocol class for ``uvicorn.Config(http=...)`` with these read deadlines."""
    return type(
        "DeadlineHttpToolsProtocol",
        (DeadlineHttpToolsProtocol,),
        {"header_seconds": header_seconds, "body_seconds": body_seconds},
    )
