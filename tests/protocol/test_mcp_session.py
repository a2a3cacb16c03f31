"""The one MCP client session (mcp/session.py) as the probe and the bridge both use it.

A scripted HTTP/1.1 server on a real socket (tests/protocol/test_probe_wire.py's) answers as
each case needs; the hostile test server plays the listings that loop or run long. Each rule
is checked through both users: the bridge's session (bridge/upstreams.py) and the probe
(discover).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from mcp_operator.bridge.egress import BRIDGE_EGRESS
from mcp_operator.bridge.upstreams import list_tools, upstream_session
from mcp_operator.mcp.bounds import capped
from mcp_operator.mcp.budget import shared_budget
from mcp_operator.mcp.discovery import discover
from mcp_operator.mcp.errors import ProbeError
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.pages import Keep
from mcp_operator.mcp.probe_bodies import MAX_RESPONSE_BYTES, probe_state
from mcp_operator.mcp.probe_client import probe_client
from mcp_operator.mcp.session import Pool, session_pool
from mcp_operator.mcp.session_changes import follow
from mcp_operator.mcp.target import ProbeTarget
from mcp_operator.mcp.watch import watch_tools
from tests.protocol.test_probe_wire import (
    INITIALIZED,
    LOOPBACK,
    Answer,
    Script,
    Seen,
    Start,
    error,
    json_answer,
    result,
    scripted,
)
from tests.support import peers

__all__ = ["scripted"]  # the fixture, used by name

POLL_SECONDS = 0.05
TOOLS = [{"name": f"tool_{i}", "inputSchema": {"type": "object"}} for i in range(4)]


@pytest.fixture
async def pool() -> AsyncIterator[Pool]:
    connections = session_pool(BRIDGE_EGRESS)
    yield connections
    await connections.aclose()


def legacy(answer_call: Any) -> Any:
    """A legacy server whose ``tools/call`` is answered by ``answer_call(seen)``."""

    def script(seen: Seen) -> Answer:
        if seen.verb == "DELETE":
            return 200, {}, b""
        if seen.method == "server/discover":
            return json_answer(error(seen, -32601, "Method not found"), status=400)
        if seen.method == "initialize":
            return json_answer(result(seen, INITIALIZED), **{"mcp-session-id": "s-1"})
        if seen.method == "notifications/initialized":
            return 202, {}, b""
        if seen.method == "tools/list":
            return answer_call(seen)
        return answer_call(seen)

    return script


def as_sse(message: dict[str, Any]) -> Answer:
    body = b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"
    return 200, {"content-type": "text/event-stream"}, body


# ------------------------------------------------------------------ strict id matching


WRONG_IDS = [True, "1", 1.0, None]


@pytest.mark.parametrize("framing", ["json", "sse"])
@pytest.mark.parametrize("wrong", WRONG_IDS, ids=["true", "string", "float", "null"])
async def test_an_answer_whose_id_is_not_the_requests_is_refused_and_its_connection_dropped(
    scripted: Start, pool: Pool, framing: str, wrong: Any
) -> None:
    def script(seen: Seen) -> Answer:
        assert seen.message is not None
        first = [s.method for s in server.seen].count("initialize") == 1
        if seen.method == "initialize" and first:
            assert seen.message["id"] == 1  # request 1 ...
            message = {"jsonrpc": "2.0", "id": wrong, "result": INITIALIZED}  # ... answered
            return json_answer(message) if framing == "json" else as_sse(message)
        return legacy(lambda s: json_answer(result(s, {"content": []})))(seen)

    server = await scripted(script)
    session = upstream_session("confused", server.url, pool, protocol_hint="2025-11-25")
    with pytest.raises(McpFailure) as caught:
        await session.request("tools/call", {"name": "x", "arguments": {}})
    assert caught.value.fault == "mismatch" and caught.value.kind == "unavailable"
    assert caught.value.code is None  # no JSON-RPC error was sent: no code is made up
    assert not session.connected
    # The connection was out of step: the next request goes on a fresh one.
    assert await session.request("tools/call", {"name": "x", "arguments": {}}) == {"content": []}
    assert server.seen[-1].connection > server.seen[0].connection


@pytest.mark.parametrize("wrong", [True, "1"], ids=["true", "string"])
async def test_the_probe_refuses_an_answer_with_another_id_alike(
    scripted: Start, wrong: Any
) -> None:
    def listing(seen: Seen) -> Answer:
        assert seen.message is not None
        return as_sse({"jsonrpc": "2.0", "id": wrong, "result": {"tools": []}})

    def script(seen: Seen) -> Answer:
        if seen.method == "tools/list":
            return listing(seen)
        return legacy(lambda s: json_answer(result(s, {})))(seen)

    server = await scripted(script)
    with pytest.raises(ProbeError) as caught:
        await discover(ProbeTarget(server.url, egress=LOOPBACK))
    assert caught.value.reason == "ProtocolError"
    assert "not the response to the request" in caught.value.message


# ------------------------------------------------------------------ one pagination rule


def modern_pages(seen: Seen) -> Answer:
    """A 2026-07-28 server whose first page ends with the cursor ``""``."""
    if seen.method == "server/discover":
        return json_answer(
            result(seen, {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}})
        )
    assert seen.message is not None
    cursor = seen.message["params"].get("cursor")
    if cursor is None:
        return json_answer(result(seen, {"tools": TOOLS[:2], "nextCursor": ""}))
    assert cursor == ""
    return json_answer(result(seen, {"tools": TOOLS[2:]}))


async def test_an_empty_cursor_is_a_cursor_in_2026_for_the_bridge_and_the_probe(
    scripted: Start, pool: Pool
) -> None:
    server = await scripted(modern_pages)
    session = upstream_session("modern", server.url, pool)
    listed = await list_tools(session, 5)
    assert session.protocol_version == "2026-07-28"
    found = await discover(ProbeTarget(server.url, egress=LOOPBACK))
    assert [tool["name"] for tool in listed] == [tool["name"] for tool in TOOLS]
    assert [tool.name for tool in found.tools] == [tool["name"] for tool in TOOLS]


async def test_an_empty_cursor_is_a_cursor_in_the_legacy_era_too(pool: Pool) -> None:
    # The bridge used to end a legacy listing at "": half the tools, and no word of it.
    with peers.hostile_server("empty-cursor") as url:
        listed = await list_tools(upstream_session("legacy", url, pool), 5)
        found = await discover(ProbeTarget(url, egress=LOOPBACK))
    names = ["first_a", "first_b", "second_a", "second_b"]
    assert [tool["name"] for tool in listed] == names
    assert [tool.name for tool in found.tools] == names


@pytest.mark.parametrize(
    ("mode", "args", "limit"),
    [
        ("cursor-loop", (), "PaginationLoop"),
        ("many-tools", ("--tools", "150", "--page-size", "1"), "TooManyPages"),
        ("many-tools", ("--tools", "5100", "--page-size", "1000"), "TooManyTools"),
    ],
)
async def test_a_listing_past_a_bound_fails_instead_of_being_cut_short(
    pool: Pool, mode: str, args: tuple[str, ...], limit: str
) -> None:
    # The bridge used to return the first 100 pages of a longer listing as if complete.
    with peers.hostile_server(mode, *args) as url:
        with pytest.raises(McpFailure) as bridge:
            await list_tools(upstream_session(mode, url, pool), 30)
        with pytest.raises(ProbeError) as probe:
            await discover(ProbeTarget(url, egress=LOOPBACK, timeout_seconds=30))
    assert bridge.value.limit == probe.value.reason == limit
    assert bridge.value.kind == "error" and not bridge.value.transient


# ------------------------------------------------------------------ one failure type


async def test_a_json_rpc_error_keeps_its_code_and_data(scripted: Start, pool: Pool) -> None:
    def call(seen: Seen) -> Answer:
        return json_answer(error(seen, -32602, "Invalid params: q", {"field": "q"}))

    server = await scripted(legacy(call))
    session = upstream_session("picky", server.url, pool)
    with pytest.raises(McpFailure) as caught:
        await session.request("tools/call", {"name": "x", "arguments": {}})
    failure = caught.value
    assert (failure.fault, failure.kind, failure.transient) == ("rpc", "error", False)
    assert (failure.code, failure.data, failure.detail) == (
        -32602,
        {"field": "q"},
        "Invalid params: q",
    )
    assert failure.message == "picky answered tools/call with error -32602: Invalid params: q"


async def test_an_unsupported_version_is_renegotiated_once_for_the_bridge_too(
    scripted: Start, pool: Pool
) -> None:
    def script(seen: Seen) -> Answer:
        assert seen.message is not None
        if seen.method == "server/discover":
            asked = seen.message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
            if asked != "2026-07-28":
                raise AssertionError(asked)
            supported = {"supported": ["2026-07-28"], "requested": asked}
            if len([s for s in server.seen if s.method == "server/discover"]) == 1:
                return json_answer(error(seen, -32022, "Unsupported", supported), status=400)
            return json_answer(
                result(seen, {"supportedVersions": ["2026-07-28"], "capabilities": {}})
            )
        return json_answer(result(seen, {"tools": TOOLS}))

    server = await scripted(script)
    listed = await list_tools(upstream_session("picky", server.url, pool), 5)
    assert len(listed) == len(TOOLS)
    assert [seen.method for seen in server.seen] == [
        "server/discover",
        "server/discover",
        "tools/list",
    ]


# ------------------------------------------------------------------ change streams


async def _open_streams(url: str) -> int:
    async with httpx.AsyncClient() as http:
        answer = await http.post(url.replace("/mcp", "/streams"))
    return int(answer.json()["open"])


async def test_the_probes_watch_returns_on_a_change_announced_on_the_sessions_stream() -> None:
    with peers.hostile_server("changing") as url:
        target = ProbeTarget(url, egress=LOOPBACK, timeout_seconds=5)
        watching = asyncio.create_task(watch_tools(target, max_seconds=30))
        await eventually_async("the watch's stream open", lambda: _open_streams(url), 10)
        assert not watching.done()
        async with httpx.AsyncClient() as http:
            await http.post(url.replace("/mcp", "/change"))
        assert await asyncio.wait_for(watching, 10) is True
        quiet = await watch_tools(target, max_seconds=0.5)
    assert quiet is False  # nothing announced within max_seconds


async def test_the_bridges_follower_relists_on_a_change_and_hangs_up_when_stopped(
    pool: Pool,
) -> None:
    changes = asyncio.Queue[None]()

    async def on_changed() -> None:
        changes.put_nowait(None)

    with peers.hostile_server("changing") as url:
        session = upstream_session("changing", url, pool)
        await session.connect()
        assert session.announces_changes
        following = asyncio.create_task(follow(session, on_changed, reopen_seconds=0.1))
        try:
            await eventually_async("the stream open", lambda: _open_streams(url), 10)
            await asyncio.wait_for(changes.get(), 10)  # an open is followed by one listing
            assert changes.empty()
            async with httpx.AsyncClient() as http:
                await http.post(url.replace("/mcp", "/change"))
            await asyncio.wait_for(changes.get(), 10)
        finally:
            following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await following
        await eventually_async("the stream closed", lambda: _closed(url), 10)


def modern_listen(acknowledged: bool) -> Script:
    """A 2026-07-28 server whose listen stream announces one change, after its acknowledgement
    or without one."""

    def script(seen: Seen) -> Answer:
        if seen.method == "server/discover":
            capabilities = {"tools": {"listChanged": True}}
            versions = {"supportedVersions": ["2026-07-28"], "capabilities": capabilities}
            return json_answer(result(seen, versions))
        if seen.method == "tools/list":
            return json_answer(result(seen, {"tools": TOOLS}))
        assert seen.method == "subscriptions/listen"
        ack = {"notifications": {"toolsListChanged": True}}
        events = [{"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged"}]
        events[0]["params"] = ack
        events = events if acknowledged else []
        events.append({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        body = b"".join(
            b"event: message\ndata: " + json.dumps(e).encode() + b"\n\n" for e in events
        )
        return 200, {"content-type": "text/event-stream"}, body

    return script


@pytest.mark.parametrize("acknowledged", [True, False])
async def test_a_listen_stream_is_open_once_the_server_acknowledged_it(
    scripted: Start, pool: Pool, acknowledged: bool
) -> None:
    """The server subscribes before it acknowledges: a change it announces before then may
    have been published to no one, so the follower's listing after the open waits for it."""
    server = await scripted(modern_listen(acknowledged))
    session = upstream_session("modern", server.url, pool)
    await list_tools(session, 5)
    assert session.protocol_version == "2026-07-28"
    seen = [changed async for changed in session.changes()]
    assert seen == ([False, True] if acknowledged else [True])


async def _closed(url: str) -> bool:
    return await _open_streams(url) == 0


async def eventually_async(what: str, check: Any, seconds: float) -> Any:
    """Wait until ``await check()`` is truthy (polling an observable count, not sleeping
    for a guessed time)."""
    for _ in range(round(seconds / POLL_SECONDS)):
        value = await check()
        if value:
            return value
        await asyncio.sleep(POLL_SECONDS)
    raise AssertionError(f"not within {seconds:g}s: {what}")


# ------------------------------------------------------------------ the probe's byte budget


@pytest.mark.parametrize("framing", ["json", "sse"])
async def test_a_large_pages_budget_share_is_held_until_the_page_is_let_go(
    scripted: Start, framing: str
) -> None:
    big = [{"name": f"t{i}", "description": "d" * 200, "inputSchema": {}} for i in range(500)]

    def listing(seen: Seen) -> Answer:
        message = result(seen, {"tools": big})
        return json_answer(message) if framing == "json" else as_sse(message)

    server = await scripted(legacy(listing))
    target = ProbeTarget(server.url, egress=LOOPBACK)
    budget = shared_budget()
    async with probe_client(target, probe_state(target), Keep()) as client:
        page = await client.list_tools()
        assert len(page.tools) == 500
        assert budget.held == MAX_RESPONSE_BYTES  # the parsed page is covered ...
        del page
        client.let_go()
        assert budget.held == 0  # ... until it is let go
        await client.list_tools()
    assert budget.held == 0  # and never past the session


@pytest.mark.parametrize("size", [600, 300_000], ids=["with-its-head", "read-in-parts"])
async def test_a_json_answer_past_the_bridges_cap_fails_whichever_way_it_arrived(
    scripted: Start, pool: Pool, size: int
) -> None:
    """A small answer arrives in the read of its head and is taken whole; a large one is read
    in parts: either way one byte past the cap fails the call, and one at the cap passes."""
    text = "x" * size
    sent: list[int] = []

    def answer(seen: Seen) -> Answer:
        answered = json_answer(result(seen, {"content": [{"type": "text", "text": text}]}))
        sent.append(len(answered[2]))
        return answered

    server = await scripted(legacy(answer))
    first = upstream_session("fits", server.url, pool, protocol_hint="2025-11-25")
    got = await first.request("tools/call", {"name": "x", "arguments": {}})
    assert got["content"][0]["text"] == text
    for limit, fails in ((sent[-1], False), (sent[-1] - 1, True)):
        session = upstream_session("capped", server.url, pool, protocol_hint="2025-11-25")
        session._read_body = capped(limit, "capped")
        if not fails:
            assert (await session.request("tools/call", {"name": "x", "arguments": {}})) == got
            continue
        with pytest.raises(McpFailure) as caught:
            await session.request("tools/call", {"name": "x", "arguments": {}})
        assert caught.value.message == f"capped sent more than {limit} bytes"


@pytest.mark.parametrize("framing", ["json", "sse"])
async def test_no_reader_of_an_answer_is_left_for_the_event_loop_to_close(
    scripted: Start, pool: Pool, framing: str
) -> None:
    """Every async generator that reads an answer is closed by the session: one dropped
    unfinished (an SSE answer is left once its response is read) would be closed by the event
    loop's finalizer hook, through its thread-safe wake-up, on every call."""

    def answer(seen: Seen) -> Answer:
        message = result(seen, {"content": [{"type": "text", "text": "ok"}]})
        return json_answer(message) if framing == "json" else as_sse(message)

    server = await scripted(legacy(answer))
    session = upstream_session("closed", server.url, pool, protocol_hint="2025-11-25")
    await session.request("tools/call", {"name": "x", "arguments": {}})
    hooks = sys.get_asyncgen_hooks()
    finalized: list[str] = []

    def finalizer(generator: Any) -> None:
        finalized.append(generator.__qualname__)
        hooks.finalizer(generator)

    sys.set_asyncgen_hooks(firstiter=hooks.firstiter, finalizer=finalizer)
    try:
        for _ in range(20):
            await session.request("tools/call", {"name": "x", "arguments": {}})
        gc.collect()
        await asyncio.sleep(0)
    finally:
        sys.set_asyncgen_hooks(firstiter=hooks.firstiter, finalizer=hooks.finalizer)
    assert finalized == []
