"""Servers' log messages relayed to the agent, by both bridges (``docs/bridge.md``, "Logging").

The Python bridge has no protocol test of its own for these, so each test here runs against
both bridges (``tests.support.dataplane.use_bridge``) and asserts the same observable
behaviour. One upstream (``tests/support/log_server.py``, the official SDK) is configured twice:
``old`` reached in the legacy era (its configuration names a legacy protocol version), ``new``
in 2026-07-28. Its tool ``say`` logs on the call's own stream (``call: …``) and on its
session's stream (``stream: …``; at 2026-07-28 both ride the call's stream).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client

from tests.support import dataplane, peers
from tests.support.bridge_run import RunningBridge, run_bridge, server_entry

pytestmark = [pytest.mark.timeout(120), pytest.mark.filterwarnings("ignore::DeprecationWarning")]

LOG_SERVER = peers.REPO / "tests" / "support" / "log_server.py"
BRIDGES = ["python", "compiled"]


@pytest.fixture(params=BRIDGES)
def bridge(request: pytest.FixtureRequest) -> Iterator[RunningBridge]:
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
    bridge: RunningBridge,
) -> None:
    leveled: list[str] = []
    silent: list[str] = []
    async with (
        Client(bridge.url, mode="legacy", logging_callback=_collector(leveled)) as agent,
        Client(bridge.url, mode="legacy", logging_callback=_collector(silent)) as other,
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
    bridge: RunningBridge,
) -> None:
    leveled: list[str] = []
    silent: list[str] = []
    async with (
        Client(
            bridge.url, mode="2026-07-28", log_level="warning", logging_callback=_collector(leveled)
        ) as agent,
        Client(bridge.url, mode="2026-07-28", logging_callback=_collector(silent)) as other,
    ):
        await agent.call_tool("new_say", {"level": "error", "text": "E"})
        await agent.call_tool("new_say", {"level": "info", "text": "I"})
        await other.call_tool("new_say", {"level": "emergency", "text": "X"})
    assert sorted(leveled) == ["call: E", "stream: E"]
    assert silent == [], "a request without a level gets no logs"
