"""A TCP forwarder on loopback whose connections a test can cut at a moment of its choosing.

``Cutter(target_port)`` listens on a free loopback port and forwards every connection to
``127.0.0.1:target_port``; ``cut()`` closes every connection open at that moment (both
ends), as a network failure would, while new connections keep being forwarded. Used to
break a client's SSE stream mid-call and let it reconnect. ``sent(mark)`` counts the
client→server chunks that held ``mark`` (lowercased), e.g. a ``last-event-id`` header.
"""

from __future__ import annotations

import asyncio
import contextlib


class Cutter:
    def __init__(self, target_port: int) -> None:
        self._target = target_port
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self.cuts = 0
        self.port = 0
        self.connections = 0
        self._sent: list[bytes] = []

    async def __aenter__(self) -> Cutter:
        self._server = await asyncio.start_server(self._forward, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def sent(self, mark: bytes) -> int:
        return sum(mark in chunk for chunk in self._sent)

    def cut(self) -> None:
        """Close every connection open now."""
        self.cuts += 1
        for writer in list(self._open):
            writer.transport.abort()
        self._open.clear()

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target)
        except OSError:
            writer.close()
            return
        self._open.update((writer, up_writer))
        self.connections += 1

        async def pipe(
            source: asyncio.StreamReader, sink: asyncio.StreamWriter, upward: bool
        ) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await source.read(65536):
                    if upward and len(self._sent) < 10_000:
                        self._sent.append(data.lower())
                    sink.write(data)
                    await sink.drain()
            sink.transport.abort()

        # a cancellation: the cutter is closing, and the connection ends with it
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(pipe(reader, up_writer, True), pipe(up_reader, writer, False))
        self._open.difference_update((writer, up_writer))
