"""Resumable SSE streams (2025-11-25 "Resumability and Redelivery"), real peers, real HTTP.

- An official SDK client (legacy era) calls server-everything's
  ``trigger-long-running-operation`` with a progress callback through the adapter; its
  connection is cut after the first progress event. The SDK reconnects with ``GET`` and
  ``Last-Event-ID`` (it saw ids) and gets every progress event it missed and the answer.
- Hostile ``Last-Event-ID``s: garbage gets 400; an unknown id, or another session's, 404
  (the other session's events are never replayed).
- A client that never comes back: the store keeps at most its bounds (``/healthz``).
- The bridge's GET stream: ids, a resume, the same refusals.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client

from tests.protocol.test_adapter import ACCEPT, EVERYTHING, INIT, Adapter, adapter
from tests.support import needs
from tests.support.bridge_run import run_bridge, server_entry
from tests.support.cutter import Cutter
from tests.support.waiting import eventually_async

pytestmark = [pytest.mark.timeout(120), needs.mark(needs.node_missing())]

LONG = "trigger-long-running-operation"


@pytest.fixture
def everything(tmp_path: Path) -> Iterator[Adapter]:
    with adapter(EVERYTHING, tmp_path, "--replay-events", "50") as running:
        yield running


def port_of(running: Adapter) -> int:
    return int(running.base.rsplit(":", 1)[1])


async def test_a_client_cut_mid_call_resumes_and_gets_the_missed_progress_and_the_answer(
    everything: Adapter,
) -> None:
    async with Cutter(port_of(everything)) as cutter:
        url = f"http://127.0.0.1:{cutter.port}/mcp"
        seen: list[float] = []

        async def progress(value: float, total: float | None, message: str | None) -> None:
            seen.append(value)
            if len(seen) == 1:
                cutter.cut()  # the POST's stream breaks after its first progress event

        async with Client(url, mode="legacy") as client:
            result = await client.call_tool(
                LONG, {"duration": 3, "steps": 6}, progress_callback=progress
            )
    assert cutter.cuts >= 1
    content = result.content[0]
    assert isinstance(content, types.TextContent)
    assert "Long running operation completed" in content.text
    assert seen == [1, 2, 3, 4, 5, 6]  # nothing lost, nothing twice


def sse_ids(text: str) -> list[str]:
    return re.findall(r"^id: (\S+)$", text, re.MULTILINE)


def start_session(http: httpx.Client, url: str) -> str:
    response = http.post(url, json=INIT, headers=ACCEPT)
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    http.post(url, json=note, headers={**ACCEPT, "mcp-session-id": session})
    return session


def long_call(http: httpx.Client, url: str, session: str, steps: int) -> str:
    """A long call's whole SSE answer, read to its end."""
    call: dict[str, Any] = {"jsonrpc": "2.0", "id": 5, "method": "tools/call"}
    call["params"] = {
        "name": LONG,
        "arguments": {"duration": 0.5, "steps": steps},
        "_meta": {"progressToken": "p"},
    }
    headers = {"accept": "text/event-stream", "content-type": "application/json"}
    response = http.post(url, json=call, headers={**headers, "mcp-session-id": session})
    assert response.headers["content-type"].startswith("text/event-stream")
    return response.text


def test_every_event_carries_an_id_and_a_hostile_last_event_id_gets_the_right_refusal(
    everything: Adapter,
) -> None:
    with httpx.Client(timeout=30) as http:
        alice, bob = (start_session(http, everything.url) for _ in range(2))
        text = long_call(http, everything.url, alice, 3)
        ids = sse_ids(text)
        events = text.count("\n\n")
        assert len(ids) == events == 1 + 3 + 1  # priming, 3 progress, the answer
        assert len(set(ids)) == len(ids)

        def resume(session: str, last: str) -> httpx.Response:
            headers = {"accept": "text/event-stream", "mcp-session-id": session}
            return http.get(everything.url, headers={**headers, "last-event-id": last})

        replay = resume(alice, ids[1])  # after the first progress: the rest, then the answer
        assert replay.status_code == 200
        assert sse_ids(replay.text) == ids[2:]
        assert '"result"' in replay.text.rsplit("\n\n", 2)[-2]
        for garbage in ("", "x" * 5000, "../../etc", "ffffffffffffffff-0", "1-1 x", "AB" * 20):
            assert resume(alice, garbage).status_code == 400, garbage
        assert resume(alice, "0123456789abcdef-1").status_code == 404  # not a stream of ours
        assert resume(bob, ids[1]).status_code == 404  # alice's stream, bob's session
        assert resume(alice, ids[0]).status_code == 200  # the session still works


def test_the_store_stays_within_its_bounds_for_a_client_that_never_reconnects(
    tmp_path: Path,
) -> None:
    flags = ("--replay-events", "5", "--replay-total-bytes", "4096")
    with adapter(EVERYTHING, tmp_path, *flags) as running, httpx.Client(timeout=30) as http:
        session = start_session(http, running.url)
        for _ in range(4):
            long_call(http, running.url, session, 20)  # 22 events each, never resumed
        limits = running.health().json()["limits"]
        assert 0 < limits["replayBytes"] <= 4096 == limits["maxReplayBytes"]
        assert limits["replayStreams"] <= 4
        # the newest stream keeps its last 5 events only: an id before them is gone
        text = long_call(http, running.url, session, 20)
        ids = sse_ids(text)
        headers = {"accept": "text/event-stream", "mcp-session-id": session}
        old = http.get(running.url, headers={**headers, "last-event-id": ids[2]})
        assert old.status_code == 404
        recent = http.get(running.url, headers={**headers, "last-event-id": ids[-3]})
        assert recent.status_code == 200 and sse_ids(recent.text) == ids[-2:]


async def test_a_resumed_get_stream_goes_on_with_its_ids(everything: Adapter) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(everything.url, json=INIT, headers=ACCEPT)
        session = response.headers["mcp-session-id"]
        headers = {"accept": "text/event-stream", "mcp-session-id": session}
        async with http.stream("GET", everything.url, headers=headers) as stream:
            first = await anext(stream.aiter_text())
        ids = sse_ids(first)
        assert len(ids) == 1  # the priming event
        again = {**headers, "last-event-id": ids[0]}
        async with http.stream("GET", everything.url, headers=again) as resumed:
            assert resumed.status_code == 200
            # the session's stream is this one now: a second plain GET is refused
            busy = await http.get(everything.url, headers=headers)
            assert busy.status_code == 409
        await asyncio.sleep(0)


# ------------------------------------------------------------------ the bridge


async def test_the_bridges_get_stream_carries_ids_and_resumes_and_refuses_bad_ids(
    everything_url: str,
) -> None:
    with run_bridge([server_entry("everything", everything_url, "ev")]) as bridge:
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(bridge.url, json=INIT, headers=ACCEPT)
            assert response.status_code == 200, response.text
            session = response.headers["mcp-session-id"]
            other = (await http.post(bridge.url, json=INIT, headers=ACCEPT)).headers[
                "mcp-session-id"
            ]
            headers = {"accept": "text/event-stream", "mcp-session-id": session}
            async with http.stream("GET", bridge.url, headers=headers) as stream:
                first = await anext(stream.aiter_text())
            ids = sse_ids(first)
            assert len(ids) == 1
            again = {**headers, "last-event-id": ids[0]}
            async with http.stream("GET", bridge.url, headers=again) as resumed:
                assert resumed.status_code == 200
                busy = await http.get(bridge.url, headers=headers)
                assert busy.status_code == 409  # the resumed stream is the session's
            garbage = await http.get(bridge.url, headers={**headers, "last-event-id": "zz"})
            assert garbage.status_code == 400
            theirs = {"accept": "text/event-stream", "mcp-session-id": other}
            stolen = await http.get(bridge.url, headers={**theirs, "last-event-id": ids[0]})
            assert stolen.status_code == 404  # another session's stream is never replayed


async def listings(bridge: Any, server: str) -> float:
    async with httpx.AsyncClient(timeout=5) as http:
        text = (await http.get(f"{bridge.health}/metrics")).text
    key = f'mcp_bridge_upstream_listings_total{{result="ok",server="default/{server}"}}'
    for line in text.splitlines():
        if line.startswith(key):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {key} in the bridge's metrics:\n{text}")


async def test_the_bridge_resumes_its_upstreams_change_streams_or_lists_again(
    everything: Adapter, everything_url: str
) -> None:
    """Our adapter's legacy GET stream gives its events ids (a priming event first): cut,
    the bridge reopens it with ``Last-Event-ID`` and, resumed, lists nothing again.
    server-everything's own HTTP transport gives ids only to the messages it sends: it asks
    the bridge for its roots on that stream (the bridge declares roots to legacy servers), so
    its stream is resumed from that message's id, or, when it had sent none, listed again
    after the cut; a 2026-07-28 upstream, whose ``subscriptions/listen`` stream has no ids
    (that era removed resumability), is always listed again."""
    sdk_port = int(everything_url.split(":")[2].split("/")[0])
    async with Cutter(port_of(everything)) as ours, Cutter(sdk_port) as theirs:
        servers = [
            server_entry("ours", f"http://127.0.0.1:{ours.port}/mcp", protocolVersion="2025-11-25"),
            server_entry("theirs", f"http://127.0.0.1:{theirs.port}/mcp"),
            server_entry("modern", f"http://127.0.0.1:{ours.port}/mcp"),
        ]
        names = ("ours", "theirs", "modern")
        with contextlib.ExitStack() as stack:
            # the bridge starts in a thread: the cutters forward in this loop meanwhile
            bridge = await asyncio.to_thread(stack.enter_context, run_bridge(servers))

            def opened() -> bool:
                listens = ours.sent(b"subscriptions/listen")
                return bool(ours.sent(b"get /mcp") and theirs.sent(b"get /mcp") and listens)

            await eventually_async("the change streams open", lambda: asyncio.sleep(0, opened()))
            await asyncio.sleep(1)
            before = {name: await listings(bridge, name) for name in names}
            for cutter in (ours, theirs):
                cutter.cut()
            await eventually_async(
                "ours reopened with Last-Event-ID",
                lambda: asyncio.sleep(0, ours.sent(b"last-event-id:")),
            )

            async def relisted() -> bool:
                now = [await listings(bridge, name) for name in ("theirs", "modern")]
                theirs_caught_up = now[0] > before["theirs"] or theirs.sent(b"last-event-id:") > 0
                return theirs_caught_up and now[1] > before["modern"]

            await eventually_async("the others listed again", relisted)
            await asyncio.sleep(1)
            after = {name: await listings(bridge, name) for name in names}
            await asyncio.to_thread(stack.close)
    assert after["ours"] == before["ours"]
    if theirs.sent(b"last-event-id:"):  # resumed: nothing was missed, nothing listed again
        assert after["theirs"] == before["theirs"]
    else:
        assert after["theirs"] > before["theirs"]
