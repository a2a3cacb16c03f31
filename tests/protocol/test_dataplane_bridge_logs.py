"""Servers' log messages and resource subscriptions relayed to the agent by the compiled
bridge (``docs/bridge.md``, "Logging" and "Subscriptions").

The subscription tests of ``test_bridge_catalog.py`` (a legacy agent's ``resources/subscribe``,
a 2026-07-28 agent's ``subscriptions/listen``) and its capabilities test run unchanged against
the binary (their ``bridge`` fixture under the ``compiled_bridge`` fixture, which swaps the
program). The Python bridge has no protocol test of its own for logging, so those
tests run against both bridges (``tests.support.dataplane.use_bridge``) and assert the same
observable behaviour, as do the tests that one session's ``resources/unsubscribe`` leaves
another's subscription alone (said to be a defect of the Python bridge: it is not, both pass)
and that a hidden resource cannot be subscribed to.

One upstream (``tests/support/log_server.py``, the official SDK) is configured twice:
``old`` reached in the legacy era (its configuration names a legacy protocol version), ``new``
in 2026-07-28. Its tool ``say`` logs on the call's own stream (``call: …``) and on its
session's stream (``stream: …``; at 2026-07-28 both ride the call's stream).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.protocol.test_bridge_catalog import (
    HIDDEN,
    bridge,
    test_a_2026_agents_listen_stream_gets_the_update_of_the_uri_it_named,
    test_a_legacy_agents_subscription_reaches_the_server_and_its_update_comes_back,
    test_the_bridge_announces_what_its_upstreams_offer_in_both_eras,
    upstreams,
)
from tests.support import dataplane, peers
from tests.support.bridge_run import RunningBridge, run_bridge, server_entry

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.usefixtures("compiled_bridge"),
]

LOG_SERVER = peers.REPO / "tests" / "support" / "log_server.py"
BRIDGES = ["python", "compiled"]

__all__ = [
    "bridge",
    "test_a_2026_agents_listen_stream_gets_the_update_of_the_uri_it_named",
    "test_a_legacy_agents_subscription_reaches_the_server_and_its_update_comes_back",
    "test_the_bridge_announces_what_its_upstreams_offer_in_both_eras",
    "upstreams",
]


@pytest.fixture(params=BRIDGES)
def log_bridge(request: pytest.FixtureRequest) -> Iterator[RunningBridge]:
    """A fresh server (it remembers the levels it was set) behind the bridge named."""
    with (
        pytest.MonkeyPatch.context() as patch,
        peers.run_server([sys.executable, str(LOG_SERVER), str(port := peers.free_port())], port),
    ):
        dataplane.use_bridge(patch, request.param)
        url = f"http://127.0.0.1:{port}/mcp"
        servers = [
            server_entry("old", url, "old", protocolVersion="2025-11-25"),
            server_entry("new", url, "new"),
        ]
        with run_bridge(servers) as running:
            yield running


def _collector(into: list[str]) -> Any:
    async def on_log(params: Any) -> None:
        into.append(str(params.data))

    return on_log


async def _until(condition: Any, seconds: float = 15.0, what: Any = None) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"timed out: {what}"
        await asyncio.sleep(0.1)


async def test_a_legacy_sessions_level_reaches_the_server_and_filters_what_it_gets(
    log_bridge: RunningBridge,
) -> None:
    leveled: list[str] = []
    silent: list[str] = []
    async with (
        Client(log_bridge.url, mode="legacy", logging_callback=_collector(leveled)) as agent,
        Client(log_bridge.url, mode="legacy", logging_callback=_collector(silent)) as other,
    ):
        assert agent.server_capabilities.logging is not None
        await agent.set_logging_level("warning")
        # Until the bridge follows the server's session stream, what it says there is lost.
        for _ in range(30):
            await other.call_tool("old_say", {"level": "critical", "text": "C"})
            if "stream: C" in leveled:
                break
            await asyncio.sleep(0.5)
        await agent.call_tool("old_say", {"level": "error", "text": "E"})
        await agent.call_tool("old_say", {"level": "info", "text": "I"})
        # Another session's call: its call-stream log is its own (no level: none), the
        # server's session-stream log reaches every session that set a level it reaches.
        await other.call_tool("old_say", {"level": "alert", "text": "A"})
        await _until(lambda: "stream: A" in leveled, what=leveled)
        levels = await agent.call_tool("old_levels_set", {})
    assert "call: E" in leveled and "stream: E" in leveled
    assert "call: I" not in leveled and "stream: I" not in leveled
    assert "call: C" not in leveled and "call: A" not in leveled, "a call's log is its agent's"
    assert silent == [], "a session that set no level gets no logs"
    assert levels.content[0].text == "warning"  # type: ignore[union-attr]


async def test_a_2026_agent_gets_the_logs_of_its_request_at_its_requests_level(
    log_bridge: RunningBridge,
) -> None:
    leveled: list[str] = []
    silent: list[str] = []
    async with (
        Client(
            log_bridge.url,
            mode="2026-07-28",
            log_level="warning",
            logging_callback=_collector(leveled),
        ) as agent,
        Client(log_bridge.url, mode="2026-07-28", logging_callback=_collector(silent)) as other,
    ):
        await agent.call_tool("new_say", {"level": "error", "text": "E"})
        await agent.call_tool("new_say", {"level": "info", "text": "I"})
        await other.call_tool("new_say", {"level": "emergency", "text": "X"})
    assert sorted(leveled) == ["call: E", "stream: E"]
    assert silent == [], "a request without a level gets no logs"


def _catalog_bridge(which: str, upstreams: dict[str, str]) -> Iterator[RunningBridge]:
    """The catalog servers behind the bridge named (``b`` reached in the legacy era)."""
    with pytest.MonkeyPatch.context() as patch:
        dataplane.use_bridge(patch, which)
        servers = [
            server_entry("a", upstreams["a"], "a", filters=[HIDDEN]),
            server_entry("b", upstreams["b"], "b", filters=[HIDDEN], protocolVersion="2025-11-25"),
        ]
        with run_bridge(servers) as running:
            yield running


@pytest.fixture(params=BRIDGES)
def either_bridge(
    request: pytest.FixtureRequest, upstreams: dict[str, str]
) -> Iterator[RunningBridge]:
    yield from _catalog_bridge(request.param, upstreams)


async def test_one_sessions_unsubscribe_leaves_another_sessions_subscription(
    either_bridge: RunningBridge,
) -> None:
    """Two legacy agent sessions subscribe to one URI of the legacy server ``b``; the first
    leaves; the server's update still reaches the second, and not the first."""
    first: asyncio.Queue[str] = asyncio.Queue()
    second: asyncio.Queue[str] = asyncio.Queue()

    def on_update(into: asyncio.Queue[str]) -> Any:
        async def on_message(message: Any) -> None:
            if isinstance(message, types.ResourceUpdatedNotification):
                await into.put(str(message.params.uri))

        return on_message

    exposed = "file://b./README.md"
    url = either_bridge.url
    async with (
        Client(url, mode="legacy", message_handler=on_update(first)) as one,
        Client(url, mode="legacy", message_handler=on_update(second)) as other,
    ):
        await one.subscribe_resource(exposed)
        await other.subscribe_resource(exposed)
        # Until the bridge follows the server's session stream, updates sent there are lost.
        for _ in range(30):
            await one.call_tool("b_touch", {"uri": "file:///README.md"})
            if not first.empty():
                break
            await asyncio.sleep(0.5)
        assert await asyncio.wait_for(first.get(), 15) == exposed
        assert await asyncio.wait_for(second.get(), 15) == exposed
        await asyncio.sleep(0.5)  # the updates of the other touches, if any, came
        for queue in (first, second):
            while not queue.empty():
                assert queue.get_nowait() == exposed
        await one.unsubscribe_resource(exposed)
        await one.call_tool("b_touch", {"uri": "file:///README.md"})
        got = await asyncio.wait_for(second.get(), 15)
        await other.unsubscribe_resource(exposed)
    assert got == exposed
    assert first.empty(), "an unsubscribed session gets no update"


async def test_a_hidden_resource_cannot_be_subscribed_to(either_bridge: RunningBridge) -> None:
    async with Client(either_bridge.url, mode="legacy") as client:
        with pytest.raises(MCPError) as refused:
            await client.subscribe_resource("secret://b.key")
    assert "Resource not found" in str(refused.value)
