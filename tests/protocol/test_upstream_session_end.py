"""The bridge ends the upstream sessions it no longer needs, and lets their calls finish first.

A legacy (2025-11-25) server keeps a session's state until the client ends it with
``DELETE`` or its own idle clock runs out. The bridge ends one when a reload removes or
replaces its server (after the calls in flight on it were answered, within the server's call
deadline) and every one when it stops. The servers are the scripted HTTP/1.1 server of
tests/protocol/test_probe_wire.py on a real socket; the bridge is the real process.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from mcp_operator.bridge.egress import BRIDGE_EGRESS
from mcp_operator.bridge.upstreams import upstream_session
from mcp_operator.mcp.session import Pool, session_pool
from tests.protocol.test_probe_wire import (
    Answer,
    Scripted,
    Seen,
    Start,
    json_answer,
    legacy_server,
    result,
    scripted,
)
from tests.support.bridge_run import bridge_of, server_entry
from tests.support.waiting import eventually

__all__ = ["scripted"]  # the fixture, used by name

pytestmark = [pytest.mark.timeout(120)]

CALL = {"name": "echo", "arguments": {}}


@pytest.fixture
async def pool() -> AsyncIterator[Pool]:
    connections = session_pool(BRIDGE_EGRESS)
    yield connections
    await connections.aclose()


def deletes(server: Scripted) -> list[Seen]:
    return [seen for seen in server.seen if seen.verb == "DELETE"]


def held_calls(arrived: asyncio.Event, release: asyncio.Event) -> object:
    """A legacy server that sets ``arrived`` when a ``tools/call`` comes and answers it once
    ``release`` is set."""

    async def script(seen: Seen) -> Answer:
        if seen.method == "tools/call":
            arrived.set()
            await release.wait()
            return json_answer(result(seen, {"content": []}))
        return legacy_server(seen)

    return script


async def test_a_retired_session_ends_once_its_call_in_flight_was_answered(
    scripted: Start, pool: Pool
) -> None:
    arrived, release = asyncio.Event(), asyncio.Event()
    server = await scripted(held_calls(arrived, release))  # type: ignore[arg-type]
    session = upstream_session("draining", server.url, pool, protocol_hint="2025-11-25")
    call = asyncio.create_task(session.request("tools/call", CALL))
    await asyncio.wait_for(arrived.wait(), 10)
    retiring = asyncio.create_task(session.retire(drain_seconds=30))
    await asyncio.sleep(0.3)
    assert not retiring.done() and not deletes(server)  # the call is still being answered
    release.set()
    assert await call == {"content": []}
    await asyncio.wait_for(retiring, 5)
    (ended,) = deletes(server)
    assert ended.headers["mcp-session-id"] == "s-1"
    assert server.seen[-1] is ended  # after the call's answer, nothing after it
    assert session.session_id is None


async def test_a_call_that_outlives_the_drain_does_not_keep_the_session_open(
    scripted: Start, pool: Pool
) -> None:
    arrived = asyncio.Event()
    server = await scripted(held_calls(arrived, asyncio.Event()))  # type: ignore[arg-type]
    session = upstream_session("stuck", server.url, pool, protocol_hint="2025-11-25")
    call = asyncio.create_task(session.request("tools/call", CALL))
    await asyncio.wait_for(arrived.wait(), 10)
    await asyncio.wait_for(session.retire(drain_seconds=0.3), 5)
    assert [seen.headers["mcp-session-id"] for seen in deletes(server)] == ["s-1"]
    call.cancel()


async def test_a_reload_that_removes_a_server_ends_its_session_and_stopping_ends_the_rest(
    scripted: Start,
) -> None:
    kept, removed = await scripted(legacy_server), await scripted(legacy_server)
    servers = [server_entry("kept", kept.url), server_entry("removed", removed.url)]
    async with bridge_of(servers) as bridge:
        assert not deletes(kept) and not deletes(removed)  # both listed, both sessions open
        bridge.rewrite({**bridge.config, "servers": servers[:1]})
        removed_ended = lambda: deletes(removed)  # noqa: E731
        await asyncio.to_thread(eventually, "the removed one's DELETE", removed_ended, 10)
        assert not deletes(kept)
    (ended,) = deletes(kept)  # the bridge stopped: its last session ended too
    assert ended.headers["mcp-session-id"] == "s-1"
    assert len(deletes(removed)) == 1
