"""The bridge in front of servers of the legacy HTTP+SSE transport (2024-11-05).

The bridge runs as a process; its upstreams are real: server-everything in its SSE mode
(the TypeScript SDK's ``SSEServerTransport``), and a small SSE server of this module's own
(:class:`SseServer`) where a test needs a server that misbehaves: one that answers every
``tools/call`` with a JSON-RPC error, one whose ``endpoint`` event names another origin.
The agent is the SDK's client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from mcp import Client

from tests.support import needs, peers
from tests.support.bridge_run import RunningBridge, run_bridge, server_entry
from tests.support.waiting import eventually, eventually_async

pytestmark = [pytest.mark.timeout(120)]

LIST_TIMEOUT = 10


@contextlib.asynccontextmanager
async def bridge_of(servers: Sequence[dict[str, Any]]) -> AsyncIterator[RunningBridge]:
    """The bridge process, started and stopped off the event loop (upstreams may be on it)."""
    running = run_bridge(servers)
    bridge = await asyncio.to_thread(running.__enter__)
    try:
        yield bridge
    finally:
        await asyncio.to_thread(running.__exit__, None, None, None)


def sse_entry(name: str, url: str) -> dict[str, Any]:
    return server_entry(name, url, transport="sse")


# ------------------------------------------------------------------ server-everything


@needs.mark(needs.node_missing())
async def test_an_sse_servers_tools_are_listed_and_called_through_the_bridge(
    everything_sse_url: str,
) -> None:
    async with bridge_of([sse_entry("ev", everything_sse_url)]) as bridge:
        async with Client(bridge.url, mode="legacy") as agent:
            names = {tool.name for tool in (await agent.list_tools()).tools}
            echoed = await agent.call_tool("ev_echo", {"message": "over sse"})
            summed = await agent.call_tool("ev_get-sum", {"a": 2, "b": 3})
    assert {"ev_echo", "ev_get-sum", "ev_trigger-long-running-operation"} <= names
    assert not echoed.is_error, echoed
    assert echoed.content[0].text == "Echo: over sse"  # type: ignore[union-attr]
    assert not summed.is_error, summed
    assert "5" in summed.content[0].text  # type: ignore[union-attr]


@needs.mark(needs.node_missing())
async def test_progress_of_a_long_call_on_an_sse_server_reaches_the_agent(
    everything_sse_url: str,
) -> None:
    seen: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    async with bridge_of([sse_entry("ev", everything_sse_url)]) as bridge:
        async with Client(bridge.url, mode="legacy") as agent:
            result = await agent.call_tool(
                "ev_trigger-long-running-operation",
                {"duration": 0.6, "steps": 3},
                progress_callback=progress,
            )
    assert not result.is_error, result
    assert seen == [1, 2, 3]


@needs.mark(needs.node_missing())
async def test_an_sse_server_that_dies_mid_call_is_unavailable_then_used_again() -> None:
    port = peers.free_port()
    server = peers.server_everything("sse", port)
    url = await asyncio.to_thread(server.__enter__)
    try:
        async with bridge_of([sse_entry("ev", url)]) as bridge:
            async with Client(bridge.url, mode="legacy") as agent:
                call = asyncio.create_task(
                    agent.call_tool(
                        "ev_trigger-long-running-operation", {"duration": 30, "steps": 30}
                    )
                )
                await asyncio.sleep(1.5)  # the call is in flight on the server
                await asyncio.to_thread(server.__exit__, None, None, None)
                server = None
                answer = await asyncio.wait_for(call, 20)
                structured = answer.structured_content
                assert answer.is_error and structured is not None, answer
                assert structured["code"] == "upstream_unavailable", structured
                assert "ev" in structured["hint"]

                server = peers.server_everything("sse", port)
                await asyncio.to_thread(server.__enter__)

                async def echoed() -> bool:
                    again = await agent.call_tool("ev_echo", {"message": "back"})
                    return not again.is_error and again.content[0].text == "Echo: back"  # type: ignore[union-attr]

                await eventually_async("the server used again", echoed, 40, interval=1)
    finally:
        if server is not None:
            await asyncio.to_thread(server.__exit__, None, None, None)


# ------------------------------------------------------------------ a server of our own


@dataclass
class SseServer:
    """A legacy HTTP+SSE server on loopback: ``GET /sse`` opens the stream and names
    ``endpoint``; every POST is recorded, answered 202, and its answer (``answer``) sent on
    the stream."""

    endpoint: str = "/message?sessionId=s-1"
    tool_error: dict[str, Any] | None = None
    """The JSON-RPC error every ``tools/call`` gets."""
    posts: list[dict[str, Any]] = field(default_factory=list)
    streams: list[asyncio.StreamWriter] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/sse"

    def answer(self, message: dict[str, Any]) -> dict[str, Any] | None:
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            return None
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": "2024-11-05",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "sse-test", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [{"name": "fail", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call" and self.tool_error is not None:
            return {"jsonrpc": "2.0", "id": request_id, "error": self.tool_error}
        else:
            return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "?"}}
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line, *fields = head.decode("latin-1").split("\r\n")
                verb, path = line.split(" ")[:2]
                headers = dict(f.lower().split(": ", 1) for f in fields if ": " in f)
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if verb == "GET":
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                        b"cache-control: no-cache\r\n\r\n"
                        + f"event: endpoint\ndata: {self.endpoint}\n\n".encode()
                    )
                    self.streams.append(writer)
                    await writer.drain()
                    await reader.read()  # held open until the client goes
                    return
                message = json.loads(body)
                self.posts.append({"path": path, **message})
                writer.write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 8\r\n\r\nAccepted")
                reply = self.answer(message)
                if reply is not None and self.streams:
                    stream = self.streams[-1]
                    stream.write(f"event: message\ndata: {json.dumps(reply)}\n\n".encode())
                await writer.drain()


@contextlib.asynccontextmanager
async def sse_server(server: SseServer) -> AsyncIterator[SseServer]:
    listening = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    server.port = listening.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        for stream in server.streams:
            stream.close()
        listening.close()


async def test_a_json_rpc_error_of_an_sse_server_is_the_agents_tool_error() -> None:
    failing = SseServer(tool_error={"code": -32603, "message": "the disk is full"})
    async with sse_server(failing), bridge_of([sse_entry("sse", failing.url)]) as bridge:
        async with Client(bridge.url, mode="legacy") as agent:
            assert [tool.name for tool in (await agent.list_tools()).tools] == ["sse_fail"]
            answer = await agent.call_tool("sse_fail", {})
    structured = answer.structured_content
    assert answer.is_error and structured is not None, answer
    assert structured["code"] == "upstream_error"
    assert structured["rpcCode"] == -32603
    calls = [post for post in failing.posts if post.get("method") == "tools/call"]
    assert len(calls) == 1 and calls[0]["path"] == "/message?sessionId=s-1"
    assert calls[0]["params"]["name"] == "fail"


async def test_an_endpoint_on_another_origin_is_refused_and_nothing_is_posted_there() -> None:
    elsewhere = SseServer()
    async with sse_server(elsewhere):
        hostile = SseServer(endpoint=f"http://127.0.0.1:{elsewhere.port}/message")
        async with sse_server(hostile), bridge_of([sse_entry("sse", hostile.url)]) as bridge:
            async with Client(bridge.url, mode="legacy") as agent:
                tools = (await agent.list_tools()).tools
            log = eventually(
                "the refusal logged",
                bridge.log,
                LIST_TIMEOUT,
                until=lambda t: "another origin" in t,
            )
    assert tools == []
    assert hostile.streams, "the bridge never opened the event stream"
    assert elsewhere.posts == [] and hostile.posts == []
    assert f"127.0.0.1:{elsewhere.port}" in log
