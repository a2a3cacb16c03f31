"""One socket write per loop turn (serve.coalesce), on a transport that records its writes."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp_operator.serve.coalesce import CoalescingTransport


class Recorded(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False
        self.aborted = False

    def write(self, data: Any) -> None:
        assert not self.closed, "written after close"
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = self.closed = True

    def get_write_buffer_size(self) -> int:
        return 7

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 8080) if name == "sockname" else default


async def a_turn() -> None:
    await asyncio.sleep(0)


async def test_what_one_turn_writes_leaves_in_one_write_at_its_end() -> None:
    raw = Recorded()
    transport = CoalescingTransport(raw, asyncio.get_running_loop())
    transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    transport.write(b"{}")
    assert raw.writes == [] and transport.get_write_buffer_size() == 7 + 40
    await a_turn()
    assert raw.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]


async def test_a_stream_head_leaves_before_its_first_event_is_awaited() -> None:
    raw = Recorded()
    transport = CoalescingTransport(raw, asyncio.get_running_loop())
    transport.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
    await asyncio.sleep(0.01)  # the stream waits for its first event
    assert raw.writes == [b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"]
    transport.write(b"5\r\nevent\r\n")
    await a_turn()
    assert raw.writes[1:] == [b"5\r\nevent\r\n"]


async def test_close_writes_what_is_kept_first_and_abort_drops_it() -> None:
    loop = asyncio.get_running_loop()
    closed = Recorded()
    transport = CoalescingTransport(closed, loop)
    transport.write(b"last words")
    transport.close()
    assert closed.writes == [b"last words"] and closed.closed
    await a_turn()  # the scheduled flush finds nothing more to write
    assert closed.writes == [b"last words"]

    aborted = Recorded()
    transport = CoalescingTransport(aborted, loop)
    transport.write(b"never sent")
    transport.abort()
    await a_turn()
    assert aborted.writes == [] and aborted.aborted


async def test_a_transport_closed_by_the_peer_meanwhile_is_not_written_to() -> None:
    raw = Recorded()
    transport = CoalescingTransport(raw, asyncio.get_running_loop())
    transport.write(b"too late")
    raw.closed = True  # the connection was lost before the turn ended
    await a_turn()
    assert raw.writes == []
    assert transport.is_closing() and transport.get_extra_info("sockname") == ("127.0.0.1", 8080)
