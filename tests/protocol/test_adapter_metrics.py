"""The adapter's /metrics with a real stdio server behind it (PyPI ``mcp-server-time``)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import pytest
from mcp import Client

from tests.protocol.test_adapter import TIME_SERVER, adapter
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(120)


def samples(text: str) -> dict[str, float]:
    """Every sample line of a Prometheus text page, by its name and labels."""
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            found[name] = float(value)
    return found


async def test_calls_sessions_and_child_restarts_are_counted(tmp_path: Path) -> None:
    with adapter((str(TIME_SERVER),), tmp_path) as running:
        async with Client(running.url, mode="legacy") as client:
            await client.list_tools()
            await client.call_tool("get_current_time", {"timezone": "UTC"})
            await client.call_tool("get_current_time", {"timezone": "Not/AZone"})
            async with httpx.AsyncClient(timeout=5) as http:
                page = await http.get(running.base + "/metrics")
                during = samples(page.text)
        # Prometheus's own content type, with the exposition format's version, as the bridge's.
        assert page.headers["content-type"].startswith("text/plain; version=")
        assert during["mcp_adapter_sessions"] == 1.0
        assert during["mcp_adapter_inflight_calls"] == 0.0
        assert during['mcp_adapter_calls_total{method="tools/list",outcome="result"}'] == 1.0
        # mcp-server-time answers an unknown zone with a tool error (a result, isError true).
        assert during['mcp_adapter_calls_total{method="tools/call",outcome="result"}'] == 2.0
        assert during['mcp_adapter_call_duration_seconds_count{method="tools/call"}'] == 2.0
        assert during["mcp_adapter_child_restarts"] == 0.0

        os.kill(running.child_pid(), signal.SIGKILL)
        after = eventually(
            "the child to be restarted",
            lambda: samples(httpx.get(running.base + "/metrics", timeout=5).text),
            30,
            until=lambda page: page["mcp_adapter_child_restarts"] == 1.0,
            ignoring=(httpx.HTTPError,),
        )
        assert after["mcp_adapter_sessions"] == 0.0, "a restart resets the sessions"
