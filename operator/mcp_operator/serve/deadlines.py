"""Read deadlines for HTTP/1.1 requests: a client that sends slowly is cut off (slowloris).

Owns how long a connection may take to deliver a request: its headers within
``header_seconds`` of the connection opening (or of the first byte of a later
request on a kept-alive connection), then its body within ``body_seconds`` of
the headers. A request that misses its deadline has its connection closed:
the application sees a disconnect, nothing is answered. uvicorn bounds only
the idle time between requests (``timeout_keep_alive``); without this a client
that trickles a byte every few seconds holds a connection, a task and its
buffers for ever. Built on uvicorn's httptools protocol, the parser the
servers here run on; leaves everything else about HTTP to uvicorn.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class DeadlineHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header and a body read deadline."""

    header_seconds = 10.0
    body_seconds = 30.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.header_seconds)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._read_deadline is None:  # a later request on a kept-alive connection
            self._arm(self.header_seconds)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._arm(self.body_seconds)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()

    def _arm(self, seconds: float) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
        self._read_deadline = self.loop.call_later(seconds, self._missed_deadline)

    def _disarm(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _missed_deadline(self) -> None:
        self._read_deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def with_deadlines(header_seconds: float, body_seconds: float) -> type[HttpToolsProtocol]:
    """A protocol class for ``uvicorn.Config(http=...)`` with these read deadlines."""
    return type(
        "DeadlineHttpToolsProtocol",
        (DeadlineHttpToolsProtocol,),
        {"header_seconds": header_seconds, "body_seconds": body_seconds},
    )
