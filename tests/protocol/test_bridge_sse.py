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
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from mcp import Client

from mcp_operator.bridge.egress import BRIDGE_EGRESS
from mcp_operator.bridge.upstreams import CLIENT_INFO
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.legacy_sse import LegacySseSession
from mcp_operator.net.pool import Http1Pool
from tests.support import needs, peers
from tests.support.bridge_run import bridge_of, server_entry
from tests.support.waiting import eventually, eventually_async

pytestmark = [pytest.mark.timeout(120)]


def sse_entry(name: str, url: str) -> dict[str, Any]:
    return server_entry(name, url, transport="sse")


# ------------------------------------------------------------------ server-everything


@needs.mark(needs.node_missing())
async def test_an_sse_servers_tools_are_listed_and_called_through_the_bridge(
    everything_sse_url: str,
) -> None:
    async with (
        bridge_of([sse_entry("ev", everything_sse_url)]) as bridge,
        Client(bridge.url, mode="legacy") as agent,
    ):
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

    async with (
        bridge_of([sse_entry("ev", everything_sse_url)]) as bridge,
        Client(bridge.url, mode="legacy") as agent,
    ):
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
        async with (
            bridge_of([sse_entry("ev", url)]) as bridge,
            Client(bridge.url, mode="legacy") as agent,
        ):
            call = asyncio.create_task(
                agent.call_tool("ev_trigger-long-running-operation", {"duration": 30, "steps": 30})
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
    ``endpoint``; every POST is recorded, answered 202, and its answer sent on the stream.
    Its tools: ``fail`` (answered with ``tool_error``), ``hang`` (never answered), ``grow``
    (adds the tool ``added`` and announces the change). Once initialized it asks the client
    ``sampling/createMessage`` and ``ping`` on the stream (requests that belong to no call)."""

    endpoint: str | None = "/message?sessionId=s-1"
    """What the ``endpoint`` event names (None: no such event)."""
    tool_error: dict[str, Any] = field(
        default_factory=lambda: {"code": -32603, "message": "the disk is full"}
    )
    posts: list[dict[str, Any]] = field(default_factory=list)
    streams: list[asyncio.StreamWriter] = field(default_factory=list)
    tools: list[str] = field(default_factory=lambda: ["fail", "grow", "hang"])
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/sse"

    def answers(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        """What the stream carries after this message arrived."""
        method, request_id = message.get("method"), message.get("id")
        if method == "notifications/initialized":
            return [
                wire_request("srv-sample", "sampling/createMessage", {"messages": []}),
                wire_request("srv-ping", "ping", {}),
            ]
        if request_id is None or method is None:
            return []
        if method == "initialize":
            capabilities = {"tools": {"listChanged": True}}
            return [
                wire_result(
                    request_id,
                    {
                        "protocolVersion": "2024-11-05",
                        "capabilities": capabilities,
                        "serverInfo": {"name": "sse-test", "version": "1"},
                    },
                )
            ]
        if method == "tools/list":
            tools = [{"name": name, "inputSchema": {"type": "object"}} for name in self.tools]
            return [wire_result(request_id, {"tools": tools})]
        name = (message.get("params") or {}).get("name")
        if method == "tools/call" and name == "fail":
            return [{"jsonrpc": "2.0", "id": request_id, "error": self.tool_error}]
        if method == "tools/call" and name == "hang":
            return []
        if method == "tools/call" and name == "grow":
            self.tools.append("added")
            changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
            grown = {"content": [{"type": "text", "text": "grown"}]}
            return [wire_result(request_id, grown), changed]
        return [{"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "?"}}]

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line, *fields = head.decode("latin-1").split("\r\n")
                verb, path = line.split(" ")[:2]
                headers = dict(f.lower().split(": ", 1) for f in fields if ": " in f)
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if verb == "GET":
                    named = f"event: endpoint\ndata: {self.endpoint}\n\n" if self.endpoint else ""
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                        b"cache-control: no-cache\r\n\r\n" + named.encode()
                    )
                    self.streams.append(writer)
                    await writer.drain()
                    await reader.read()  # held open until the client goes
                    return
                message = json.loads(body)
                self.posts.append({"path": path, "headers": headers, **message})
                writer.write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 8\r\n\r\nAccepted")
                for reply in self.answers(message):
                    if self.streams:
                        data = json.dumps(reply)
                        self.streams[-1].write(f"event: message\ndata: {data}\n\n".encode())
                await writer.drain()

    def posted(self, method: str | None = None, **params: Any) -> list[dict[str, Any]]:
        """The posts of ``method`` (None: the answers) whose params include ``params``."""
        return [
            post
            for post in self.posts
            if post.get("method") == method
            and all((post.get("params") or {}).get(k) == v for k, v in params.items())
        ]


def wire_request(request_id: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def wire_result(request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


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
    upstream = SseServer()
    async with (
        sse_server(upstream),
        bridge_of([sse_entry("sse", upstream.url)]) as bridge,
        Client(bridge.url, mode="legacy") as agent,
    ):
        names = [tool.name for tool in (await agent.list_tools()).tools]
        answer = await agent.call_tool("sse_fail", {})
    assert names == ["sse_fail", "sse_grow", "sse_hang"]
    structured = answer.structured_content
    assert answer.is_error and structured is not None, answer
    assert structured["code"] == "upstream_error"
    assert structured["rpcCode"] == -32603
    (call,) = upstream.posted("tools/call")
    assert call["path"] == "/message?sessionId=s-1" and call["params"]["name"] == "fail"
    assert "mcp-session-id" not in call["headers"]  # the endpoint names the session


async def test_requests_of_an_sse_server_outside_any_call_are_refused_and_pings_answered() -> None:
    upstream = SseServer()
    asked: list[Any] = []

    async def sample(context: Any, params: Any) -> Any:
        asked.append(params)
        raise AssertionError("a request of no call reached the agent")

    async with (
        sse_server(upstream),
        bridge_of([sse_entry("sse", upstream.url)]) as bridge,
        Client(bridge.url, mode="legacy", sampling_callback=sample) as agent,
    ):
        await agent.list_tools()

        def answered() -> list[dict[str, Any]]:
            return upstream.posted(None)

        replies = eventually("both answered", answered, 10, until=lambda r: len(r) >= 2)
    by_id = {reply["id"]: reply for reply in replies}
    assert by_id["srv-sample"]["error"]["code"] == -32601
    assert by_id["srv-ping"]["result"] == {}
    assert asked == []


async def test_a_list_change_an_sse_server_announces_reaches_the_agent() -> None:
    upstream = SseServer()
    async with (
        sse_server(upstream),
        bridge_of([sse_entry("sse", upstream.url)]) as bridge,
        Client(bridge.url, mode="legacy") as agent,
    ):
        assert not (await agent.call_tool("sse_grow", {})).is_error

        async def names() -> set[str]:
            return {tool.name for tool in (await agent.list_tools()).tools}

        await eventually_async("the new tool listed", names, 10, until=lambda n: "sse_added" in n)


async def test_a_cancelled_call_to_an_sse_server_is_cancelled_upstream() -> None:
    upstream = SseServer()
    async with (
        sse_server(upstream),
        bridge_of([sse_entry("sse", upstream.url)]) as bridge,
        Client(bridge.url, mode="legacy") as agent,
    ):
        call = asyncio.create_task(agent.call_tool("sse_hang", {}))

        async def started() -> bool:
            return bool(upstream.posted("tools/call", name="hang"))

        await eventually_async("the call reached the server", started, 10)
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call
        (hung,) = upstream.posted("tools/call", name="hang")

        async def told() -> bool:
            return bool(upstream.posted("notifications/cancelled", requestId=hung["id"]))

        await eventually_async("the server told", told, 10)
        # the session still serves the next call
        assert (await agent.call_tool("sse_fail", {})).is_error


async def test_an_endpoint_on_another_origin_is_refused_and_nothing_is_posted_there() -> None:
    elsewhere = SseServer()
    async with sse_server(elsewhere):
        hostile = SseServer(endpoint=f"http://127.0.0.1:{elsewhere.port}/message")
        async with sse_server(hostile), bridge_of([sse_entry("sse", hostile.url)]) as bridge:
            async with Client(bridge.url, mode="legacy") as agent:
                tools = (await agent.list_tools()).tools

            def refused() -> str:
                return bridge.log()

            log = eventually("the refusal logged", refused, 10, until=lambda t: "origin" in t)
    assert tools == []
    assert hostile.streams, "the bridge never opened the event stream"
    assert elsewhere.posts == [] and hostile.posts == []
    assert f"named an endpoint on another origin (http://127.0.0.1:{elsewhere.port}/message)" in log


# ------------------------------------------------------------------ the session alone


def session_of(url: str) -> tuple[LegacySseSession, Http1Pool]:
    pool = Http1Pool(egress=BRIDGE_EGRESS)
    session = LegacySseSession(url, pool, name="sse", client_info=CLIENT_INFO)
    return session, pool


async def test_a_stream_that_names_no_endpoint_fails_the_connect_in_its_own_time() -> None:
    async with sse_server(SseServer(endpoint=None)) as mute:
        session, pool = session_of(mute.url)
        session.open_seconds = 0.5
        try:
            with pytest.raises(McpFailure) as failed:
                await session.connect()
        finally:
            await pool.aclose()
    assert failed.value.fault == "timeout" and "named no endpoint" in str(failed.value)
    assert not session.connected and session.endpoint is None


async def test_concurrent_requests_each_get_their_own_answer_and_a_lost_stream_fails_the_rest() -> (
    None
):
    upstream = SseServer()
    async with sse_server(upstream):
        session, pool = session_of(upstream.url)
        try:
            await session.connect()
            assert session.session_id == "s-1" and session.protocol_version == "2024-11-05"
            calls = [
                asyncio.ensure_future(session.request("tools/call", {"name": "hang"}))
                for _ in range(3)
            ]
            listed = [session.request("tools/list", {}) for _ in range(4)]
            for result in await asyncio.gather(*listed):
                assert [tool["name"] for tool in result["tools"]] == ["fail", "grow", "hang"]
            await asyncio.sleep(0.1)
            assert not any(call.done() for call in calls)
            upstream.streams[-1].close()  # the server drops the stream
            for call in calls:
                with pytest.raises(McpFailure) as lost:
                    await call
                assert lost.value.kind == "unavailable"
            assert not session.connected
            await session.request("tools/list", {})  # a new stream, a new handshake
            assert len(upstream.streams) == 2
            assert len(upstream.posted("initialize")) == 2
        finally:
            await session.close()
            await pool.aclose()
