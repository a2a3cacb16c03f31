"""The bridge resumes its own upstream call streams (2025-11-25 "Resumability and
Redelivery"), real peers, real HTTP, a real cut.

An official SDK client (the agent) calls, through the bridge, a slow tool of an SDK server
(tests/support/slow_server.py) that runs over stdio behind our adapter (which numbers and
keeps its SSE events). A TCP forwarder of the test's own sits between the bridge and the
adapter and cuts the bridge's connections once, after the agent saw the first progress
event: the bridge's ``tools/call`` answer stream breaks mid-call. The bridge reopens it with
``GET`` + ``Last-Event-ID``, never sends the ``POST`` again, and the agent gets every
progress event and the answer; the child's own record says the tool ran once.

The same through a server nobody here wrote the resumability of: the official SDK's
Streamable HTTP server with an event store and ``retry_interval``, whose tool closes its
call's stream on purpose after the first progress event (2025-11-25's SSE polling): the
bridge waits the ``retry`` it was given, reconnects with ``Last-Event-ID`` and hears the rest.

And a window of that SDK server's own, not ours: an event the tool writes while the server
resumes a stream (after it replayed the store, before it takes the stream's live events) is
stored but never sent; the SDK's own client loses it exactly as the bridge does.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client

from tests.protocol.test_adapter import adapter
from tests.support import peers
from tests.support.bridge_run import run_bridge, server_entry
from tests.support.cutter import Cutter

pytestmark = pytest.mark.timeout(120)

SLOW_SERVER = Path(__file__).parent.parent / "support" / "slow_server.py"
STEPS = 6


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_a_cut_upstream_call_stream_is_resumed_and_the_agent_gets_everything_once(
    tmp_path: Path, era: str
) -> None:
    runs = tmp_path / "runs"
    command = (sys.executable, str(SLOW_SERVER), str(runs))
    with adapter(command, tmp_path) as running:
        adapter_port = int(running.base.rsplit(":", 1)[1])
        async with Cutter(adapter_port) as cutter:
            upstream = f"http://127.0.0.1:{cutter.port}/mcp"
            # legacy: the era whose streams carry event ids (2026-07-28 removed them)
            entry = server_entry("slow", upstream, "sl", protocolVersion="2025-11-25")
            with contextlib.ExitStack() as stack:
                # the bridge starts in a thread: the cutter forwards in this loop meanwhile
                bridge = await asyncio.to_thread(stack.enter_context, run_bridge([entry]))
                seen: list[float] = []

                async def progress(value: float, total: float | None, message: str | None) -> None:
                    seen.append(value)
                    if len(seen) == 1:
                        cutter.cut()  # the bridge's upstream stream breaks mid-call

                async with Client(bridge.url, mode=era) as agent:  # type: ignore[arg-type]
                    result = await agent.call_tool(
                        "sl_slow", {"steps": STEPS, "pause": 0.4}, progress_callback=progress
                    )
                log = bridge.log()
                await asyncio.to_thread(stack.close)
    assert cutter.cuts >= 1
    assert not result.is_error, result
    content = result.content[0]
    assert isinstance(content, types.TextContent)
    assert content.text == f"done after {STEPS} steps"
    assert seen == [float(step) for step in range(1, STEPS + 1)]  # nothing lost, nothing twice
    assert runs.read_text().splitlines() == ["started"]  # the child ran the tool once
    assert cutter.sent(b'"method":"tools/call"') == 1  # the POST went up once
    assert "Resumed the answer stream of tools/call of default/slow" in log


async def test_the_bridge_polls_an_sdk_server_that_closes_its_call_stream_on_purpose(
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    port = peers.free_port()
    # The server asks for a 100 ms retry, well before its next event (0.3 s apart): a
    # reconnect that meets an event's write hits the SDK server's resume window (mcp 2.3.0
    # streamable_http.py: _replay_events replays the store at line 964 but registers the
    # stream for live events only at 980, after an awaited priming write and send at
    # 975-977; the router drops an event for an unregistered stream at 1095 after storing
    # it), and the event is lost for any client (test_the_sdk_server_loses_...). With
    # retry == pause a reconnect lands inside it often: 11 of 40 calls through our session
    # (its pooled connection is back sooner), 1 of 40 through the SDK's own client.
    argv = [sys.executable, str(SLOW_SERVER), str(runs), "--poll", str(port), "100"]
    with peers.run_server(argv, port, name="polling"):
        upstream = f"http://127.0.0.1:{port}/mcp"
        entry = server_entry("polling", upstream, "po", protocolVersion="2025-11-25")
        with run_bridge([entry]) as bridge:
            seen: list[float] = []

            async def progress(value: float, total: float | None, message: str | None) -> None:
                seen.append(value)

            async with Client(bridge.url, mode="legacy") as agent:
                result = await agent.call_tool(
                    "po_slow", {"steps": STEPS, "pause": 0.3}, progress_callback=progress
                )
            log = bridge.log()
    assert not result.is_error, result
    content = result.content[0]
    assert isinstance(content, types.TextContent)
    assert content.text == f"done after {STEPS} steps"
    assert seen == [float(step) for step in range(1, STEPS + 1)]
    assert runs.read_text().splitlines() == ["started"]
    assert "Resumed the answer stream of tools/call of default/polling" in log


@pytest.mark.parametrize("client", ["sdk", "bridge"])
async def test_the_sdk_server_loses_an_event_written_while_it_resumes_the_stream(
    tmp_path: Path, client: str
) -> None:
    """The SDK server's window, not the client's (mcp 2.3.0 ``streamable_http.py``): a
    ``GET`` with ``Last-Event-ID`` replays the store (line 964), writes the resumed stream's
    priming event (975-977) and only then registers the stream for live events (980); the
    router stores an event written meanwhile (1092) but, finding no stream (1095), sends it
    nowhere; the stream then goes on live, so no replay brings it either. ``--race`` writes
    step 2 exactly then (slow_server.py): the SDK's own client loses it just as the bridge
    does. Should step 2 arrive, the SDK closed its window: let the polling test above ask
    for a retry equal to its pause again."""
    runs = tmp_path / "runs"
    port = peers.free_port()
    argv = [sys.executable, str(SLOW_SERVER), str(runs), "--poll", str(port), "100", "--race"]
    arguments = {"steps": STEPS, "pause": 0.1}
    seen: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    with peers.run_server(argv, port, name="racing"):
        upstream = f"http://127.0.0.1:{port}/mcp"
        if client == "sdk":
            async with Client(upstream, mode="legacy") as agent:
                result = await agent.call_tool("slow", arguments, progress_callback=progress)
        else:
            entry = server_entry("racing", upstream, "ra", protocolVersion="2025-11-25")
            with run_bridge([entry]) as bridge:
                async with Client(bridge.url, mode="legacy") as agent:
                    result = await agent.call_tool("ra_slow", arguments, progress_callback=progress)
    assert not result.is_error, result
    content = result.content[0]
    assert isinstance(content, types.TextContent)
    assert content.text == f"done after {STEPS} steps"
    assert seen == [1.0, 3.0, 4.0, 5.0, 6.0]  # step 2 was stored, never sent
    assert runs.read_text().splitlines() == ["started"]
