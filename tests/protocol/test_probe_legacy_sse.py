"""The probe of a legacy HTTP+SSE server: the one session (mcp/legacy_sse.py), probe's bounds.

The probe and the watch speak the legacy transport on the same session the bridge uses,
reading its event stream through the probe's bounds (mcp/probe_bodies.py): one event
larger than a response may be, or a stream that runs past a probe's bytes, fails the probe
at once instead of filling the operator's memory; tool lists are cut as they arrive; a
change announced on the stream ends the watch. The server is a small one of our own on
loopback, its wire written out (asyncio, no framework): a GET opens the event stream and
names the endpoint, every POST is answered 202 and its response comes on the stream.
server-everything's own legacy transport is probed in ``test_probe.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from mcp_operator.mcp.discovery import discover
from mcp_operator.mcp.errors import ProbeError
from mcp_operator.mcp.pages import Keep
from mcp_operator.mcp.probe_bodies import MAX_PROBE_BYTES, MAX_RESPONSE_BYTES
from mcp_operator.mcp.target import ProbeTarget
from mcp_operator.mcp.watch import watch_tools
from mcp_operator.net.egress import EgressPolicy

LOOPBACK = EgressPolicy(allow_loopback=True)
MiB = 1024 * 1024


def tool(name: str, description: str = "a tool") -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": {"type": "object"}}


class LegacyServer:
    """One legacy HTTP+SSE server; ``tools`` answers ``tools/list``, ``before_tools`` may
    write more on the stream before that answer."""

    def __init__(
        self,
        tools: Callable[[], list[dict[str, Any]]],
        before_tools: Callable[[asyncio.StreamWriter], Any] | None = None,
    ) -> None:
        self.tools = tools
        self.before_tools = before_tools
        self.stream: asyncio.StreamWriter | None = None
        self.initialized = asyncio.Event()
        """Set when the client's ``notifications/initialized`` arrived: the handshake is over."""
        self.streams_opened = 0
        self.url = ""

    async def announce_change(self) -> None:
        assert self.stream is not None
        await self.send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})

    async def send(self, message: dict[str, Any]) -> None:
        assert self.stream is not None
        self.stream.write(b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n")
        await self.stream.drain()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # POSTs come one after the other on a kept connection
                head = await reader.readuntil(b"\r\n\r\n")
                if head.startswith(b"GET "):
                    await self._stream(reader, writer)
                    return
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.lower().split(b"\r\n")
                    if line.startswith(b"content-length:")
                )
                message = json.loads(await reader.readexactly(length))
                if message.get("method") == "notifications/initialized":
                    self.initialized.set()
                writer.write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
                if message.get("method") == "tools/list" and self.before_tools is not None:
                    assert self.stream is not None
                    await self.before_tools(self.stream)
                if "id" in message:
                    await self.send(
                        {"jsonrpc": "2.0", "id": message["id"], "result": self._result(message)}
                    )
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\r\n"
            b"event: endpoint\ndata: /messages?session=1\n\n"
        )
        await writer.drain()
        self.stream = writer
        self.streams_opened += 1
        await reader.read()  # open until the client closes it

    def _result(self, message: dict[str, Any]) -> dict[str, Any]:
        if message["method"] == "initialize":
            return {
                "protocolVersion": "2024-11-05",
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "legacy-test", "version": "1"},
            }
        if message["method"] == "tools/list":
            return {"tools": self.tools()}
        return {}


@contextlib.asynccontextmanager
async def legacy_server(
    tools: Callable[[], list[dict[str, Any]]],
    before_tools: Callable[[asyncio.StreamWriter], Any] | None = None,
) -> AsyncIterator[LegacyServer]:
    server = LegacyServer(tools, before_tools)
    listening = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    server.url = f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}/sse"
    async with listening:
        yield server
        if server.stream is not None:
            server.stream.close()


def target(url: str, timeout: float = 10.0) -> ProbeTarget:
    return ProbeTarget(url, transport="sse", egress=LOOPBACK, timeout_seconds=timeout)


async def test_a_legacy_server_is_probed_on_the_one_session() -> None:
    async with legacy_server(lambda: [tool("a"), tool("b")]) as server:
        found = await discover(target(server.url))
    assert [t.name for t in found.tools] == ["a", "b"]
    assert found.protocol_version == "2024-11-05"
    assert found.server_name == "legacy-test"
    assert found.list_changed is True
    assert server.streams_opened == 1


async def refused_within(server: LegacyServer, deadline: float, says: str) -> None:
    """The probe of ``server`` fails with ``ResponseTooLarge`` saying ``says``, well before
    ``deadline`` (its timeout): at the bound, not at the deadline."""
    began = time.monotonic()
    with pytest.raises(ProbeError) as caught:
        await discover(target(server.url, timeout=deadline))
    assert caught.value.reason == "ResponseTooLarge", caught.value.message
    assert says in caught.value.message
    assert time.monotonic() - began < deadline / 2, "failed at the bound, not at the deadline"


async def test_an_event_larger_than_a_response_may_be_fails_the_probe_at_once() -> None:
    huge = [tool("big", "x" * (MAX_RESPONSE_BYTES + MiB))]
    async with legacy_server(lambda: huge) as server:
        await refused_within(server, 30, f"{MAX_RESPONSE_BYTES // MiB} MiB")


async def test_a_stream_past_a_probes_bytes_fails_the_probe_at_once() -> None:
    """Small events before the answer, past a probe's bytes: every byte of the stream is
    counted."""

    async def flood(writer: asyncio.StreamWriter) -> None:
        comment = b": " + b"z" * (64 * 1024) + b"\n\n"
        for _ in range(MAX_PROBE_BYTES // len(comment) + 16):
            writer.write(comment)
            await writer.drain()

    async with legacy_server(lambda: [tool("a")], before_tools=flood) as server:
        await refused_within(server, 60, f"{MAX_PROBE_BYTES // MiB} MiB in one probe")


async def test_descriptions_are_cut_as_they_arrive() -> None:
    async with legacy_server(lambda: [tool("a", "d" * 100_000)]) as server:
        found = await discover(target(server.url), Keep(description_chars=300))
    description = found.tools[0].description
    assert description is not None and len(description) <= 301


async def test_the_watch_returns_when_the_server_announces_a_change() -> None:
    async with legacy_server(lambda: [tool("a")]) as server:
        watching = asyncio.create_task(watch_tools(target(server.url), max_seconds=30))
        await asyncio.wait_for(server.initialized.wait(), 10)
        assert not watching.done()
        # The watch listens a moment after the handshake: announce until it has heard one.
        for _ in range(50):
            await server.announce_change()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(watching), 0.2)
                break
        assert watching.result() is True
        quiet = await watch_tools(target(server.url), max_seconds=0.5)
    assert quiet is False  # nothing announced within max_seconds
