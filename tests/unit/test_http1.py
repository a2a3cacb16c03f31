"""The bridge's keep-alive HTTP/1.1 client against small real servers on loopback sockets."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from mcp_operator.bridge.egress import BRIDGE_EGRESS
from mcp_operator.bridge.upstreams import upstream_session
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.net.egress import EgressPolicy
from mcp_operator.net.http1 import Http1Error
from mcp_operator.net.pool import Http1Pool
from tests.support.peers import free_port

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return await reader.readexactly(length)


class Server:
    """Counts connections; answers each request as ``handler`` says."""

    def __init__(self) -> None:
        self.connections = 0
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Handler], Awaitable[Server]]]:
    servers: list[asyncio.Server] = []

    async def start(handler: Handler) -> Server:
        record = Server()

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            record.connections += 1
            try:
                await handler(reader, writer)
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()

        servers.append(await asyncio.start_server(connection, "127.0.0.1", record.port))
        return record

    yield start
    for server in servers:
        server.close()


def _json(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )


async def test_answers_are_read_and_the_connection_is_kept_for_the_next_request(
    serve: Callable[[Handler], Awaitable[Server]],
) -> None:
    async def echo_forever(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            body = await _read_request(reader)
            writer.write(_json(body))

    server = await serve(echo_forever)
    pool = Http1Pool(egress=BRIDGE_EGRESS)
    for number in range(3):
        answer = await pool.request("POST", server.url, {"x-test": "1"}, b'{"n":%d}' % number)
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "application/json"
        assert await answer.aread() == b'{"n":%d}' % number
    assert server.connections == 1
    await pool.aclose()


async def test_a_connection_the_server_closed_while_idle_is_replaced_without_failing(
    serve: Callable[[Handler], Awaitable[Server]],
) -> None:
    async def answer_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(_json(await _read_request(reader)))  # keep-alive, then hang up anyway
        await writer.drain()

    server = await serve(answer_once)
    pool = Http1Pool(egress=BRIDGE_EGRESS)
    assert await (await pool.request("POST", server.url, {}, b"1")).aread() == b"1"
    await asyncio.sleep(0.1)
    assert await (await pool.request("POST", server.url, {}, b"2")).aread() == b"2"
    assert server.connections == 2
    await pool.aclose()


async def test_a_chunked_event_stream_arrives_piece_by_piece(
    serve: Callable[[Handler], Awaitable[Server]],
) -> None:
    release = asyncio.Event()

    async def stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                     b"transfer-encoding: chunked\r\n\r\n")  # fmt: skip
        first = "data: é1\n\n".encode()
        writer.write(b"%x\r\n%s\r\n" % (len(first), first))
        await writer.drain()
        await release.wait()
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    server = await serve(stream)
    pool = Http1Pool(egress=BRIDGE_EGRESS)
    answer = await pool.request("POST", server.url, {}, b"{}")
    pieces = answer.aiter_text()
    assert await anext(pieces) == "data: é1\n\n"  # before the stream ended
    release.set()
    assert [piece async for piece in pieces] == []
    await pool.aclose()


async def test_a_server_that_is_not_there_is_a_connect_error() -> None:
    pool = Http1Pool(egress=BRIDGE_EGRESS)
    with pytest.raises(Http1Error) as caught:
        await pool.request("POST", f"http://127.0.0.1:{free_port()}/mcp", {}, b"{}")
    assert caught.value.kind == "connect"


async def test_a_server_that_hangs_up_mid_answer_is_a_lost_connection(
    serve: Callable[[Handler], Awaitable[Server]],
) -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort")
        await writer.drain()

    server = await serve(cut)
    pool = Http1Pool(egress=BRIDGE_EGRESS)
    answer = await pool.request("POST", server.url, {}, b"{}")
    with pytest.raises(Http1Error) as caught:
        await answer.aread()
    assert caught.value.kind == "lost"


async def test_a_stream_left_before_its_end_is_drained_and_its_connection_reused(
    serve: Callable[[Handler], Awaitable[Server]],
) -> None:
    async def streams(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await _read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"transfer-encoding: chunked\r\n\r\n")  # fmt: skip
            event = b"data: {}\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
            await writer.drain()
            await asyncio.sleep(0.05)  # the end comes after the reader has what it wanted
            writer.write(b"0\r\n\r\n")
            await writer.drain()

    server = await serve(streams)
    pool = Http1Pool(egress=BRIDGE_EGRESS)
    for _ in range(3):
        answer = await pool.request("POST", server.url, {}, b"{}")
        assert await anext(answer.aiter_bytes()) == b"data: {}\n\n"
        await answer.aclose()
        await asyncio.sleep(0.15)
    assert server.connections == 1
    await pool.aclose()


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://169.254.169.254/latest/meta-data/", "cloud metadata address"),
        ("http://metadata.google.internal/computeMetadata/v1/", "cloud metadata host name"),
        ("http://[fe80::1]:8080/mcp", "link-local address"),
        ("http://0.0.0.0:8080/mcp", "unspecified address"),
    ],
)
async def test_the_bridge_never_connects_to_metadata_or_link_local_addresses(
    url: str, why: str
) -> None:
    pool = Http1Pool(egress=BRIDGE_EGRESS)
    with pytest.raises(Http1Error) as caught:
        await pool.request("POST", url, {}, b"{}")
    assert caught.value.kind == "connect"
    assert why in str(caught.value)
    await pool.aclose()


async def test_the_bridge_policy_is_judged_on_the_resolved_address() -> None:
    """A name resolving to an address the policy refuses (here loopback, refused by a
    stricter policy than the bridge's default) is refused without a connection."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        pool = Http1Pool(egress=EgressPolicy(allow_private=True))
        with pytest.raises(Http1Error) as caught:
            await pool.request("POST", f"http://localhost:{port}/mcp", {}, b"{}")
        assert "loopback address" in str(caught.value)
        with pytest.raises(BlockingIOError):
            listener.accept()
        await pool.aclose()


async def test_the_bridges_stream_client_refuses_the_same_destinations() -> None:
    """The change streams are requests of the upstream's session on the same pool."""
    pool = Http1Pool(egress=BRIDGE_EGRESS)
    session = upstream_session("meta", "http://169.254.169.254/latest/meta-data/", pool)
    session.protocol_version = "2025-11-25"  # as if connected: straight to the GET stream
    with pytest.raises(McpFailure) as caught:
        async for _ in session.changes():
            pass
    await pool.aclose()
    assert "cloud metadata address" in str(caught.value.__cause__)
