"""Reload without restart in the compiled bridge (``mcp-dataplane bridge``), held to the Python
bridge's assertions.

The home tests that rewrite a running bridge's configuration run here unchanged against the
binary, with the reload flag the home modules give every bridge (``--reload-seconds=0.3``;
``test_dataplane_bridge.py`` drops it): a server added and removed, an invalid file refused
and counted; a rug pull listed again once the operator re-pins (announced or not); a removed
server's session ended while a kept one's stays. One test of this module's own runs against
both bridges (``program``): a call in flight on the server a reload removes finishes, and
only then does that server hear its session is over.
"""

from __future__ import annotations

import asyncio

import pytest
from mcp import Client

from tests.protocol.test_bridge import test_a_reload_adds_and_removes_a_server_without_a_restart
from tests.protocol.test_bridge_policies import (
    test_a_change_the_server_never_announced_is_listed_when_the_operator_repins,
    test_a_rug_pull_is_refused_until_the_probe_repins_the_new_definition,
)
from tests.protocol.test_probe_wire import Start, legacy_server, scripted
from tests.protocol.test_upstream_session_end import (
    deletes,
    held_calls,
    test_a_reload_that_removes_a_server_ends_its_session_and_stopping_ends_the_rest,
)
from tests.support.bridge_run import bridge_of, server_entry
from tests.support.waiting import eventually, eventually_async

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("compiled_bridge")]


__all__ = [
    "scripted",
    "test_a_change_the_server_never_announced_is_listed_when_the_operator_repins",
    "test_a_reload_adds_and_removes_a_server_without_a_restart",
    "test_a_reload_that_removes_a_server_ends_its_session_and_stopping_ends_the_rest",
    "test_a_rug_pull_is_refused_until_the_probe_repins_the_new_definition",
]


@pytest.mark.parametrize("program", ["python", "compiled"])
async def test_a_call_in_flight_on_a_removed_server_finishes_before_its_session_ends(
    scripted: Start, program: str
) -> None:
    arrived, release = asyncio.Event(), asyncio.Event()
    kept = await scripted(legacy_server)
    held = await scripted(held_calls(arrived, release))  # type: ignore[arg-type]
    servers = [server_entry("kept", kept.url), server_entry("held", held.url)]
    async with bridge_of(servers) as bridge, Client(bridge.url, mode="legacy") as client:
        assert {t.name for t in (await client.list_tools()).tools} == {"kept_echo", "held_echo"}
        call = asyncio.create_task(client.call_tool("held_echo", {}))
        await asyncio.wait_for(arrived.wait(), 10)
        bridge.rewrite({**bridge.config, "servers": servers[:1]})

        async def removed() -> bool:
            return {t.name for t in (await client.list_tools()).tools} == {"kept_echo"}

        await eventually_async("the held server's tools removed", removed, 10, interval=0.2)
        assert not call.done() and not deletes(held)  # its call is still being answered
        refused = await client.call_tool("held_echo", {})
        assert refused.is_error
        assert refused.structured_content["code"] == "not_allowlisted"
        release.set()
        answered = await asyncio.wait_for(call, 10)
        assert not answered.is_error, answered
        await asyncio.to_thread(eventually, "the held server's DELETE", lambda: deletes(held), 10)
        assert deletes(held)[-1].verb == "DELETE" and not deletes(kept)
        assert bridge.process.poll() is None
        # The Python bridge audits the call that finished after the reload under the tool
        # "(unknown)" (its server is gone from the running configuration); the compiled one
        # under the name it was called by: only the outcomes are held alike.
        outcomes = [line["outcome"] for line in bridge.audit_lines()]
        assert outcomes == ["not_allowlisted", "ok"]
