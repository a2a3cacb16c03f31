"""One socket write per event-loop turn: a transport that joins what was written in one turn.

Owns when the bytes an HTTP server writes reach the socket. uvicorn writes a response's status
line and headers, then its body, as two ``transport.write`` calls, so every JSON answer costs two
``send`` system calls, two TCP segments on the wire and two wake-ups of the reader; on
loopback the sender pays the receiver's TCP work too. :class:`CoalescingTransport` keeps what is
written during one turn of the event loop and writes it at the end of that turn, in one call: a
JSON answer (head and body written in the same turn) leaves in one segment, and an SSE stream's
head still leaves at once (the turn ends before the first event is awaited). Closing writes what
is kept first; aborting drops it, as aborting a transport does.
"""

from __future__ import annotations

import asyncio
from typing import Any


class CoalescingTransport:
    """An ``asyncio.Transport`` stand-in over ``transport``: writes of one loop turn joined."""

    __slots__ = ("_loop", "_pending", "_scheduled", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []
        self._scheduled = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        self._pending.append(bytes(data))
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._flush)

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def _flush(self) -> None:
        self._scheduled = False
        pending, self._pending = self._pending, []
        if pending and not self._transport.is_closing():
            self._transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(map(len, self._pending))

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._pending.clear()
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        # Everything else (is_closing, get_extra_info, pause_reading, set_protocol...) is the
        # transport's own.
        return getattr(self._transport, name)
