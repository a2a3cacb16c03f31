"""The demo agent (``images/demo-agent/agent.py``) against the real bridge and a real server.

The bridge runs as a process (``mcp-operator bridge``) in front of server-everything over its
own Streamable HTTP, configured as the demo's AgentRun configures it (PII mode ``block`` for
arguments, ``echo`` and ``get-sum`` allowed); the agent runs as the program its image runs, with
only ``MCP_BRIDGE_URL`` to go on. Both sides are checked: what the agent prints and its exit
code, and the bridge's audit lines for its three calls. The same agent against a bridge that
lets the e-mail address through, or without its tools, must fail: its exit code means
something.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support import needs
from tests.support.bridge_run import RunningBridge, run_bridge, server_entry

pytestmark = [pytest.mark.timeout(120), needs.mark(needs.node_missing())]

AGENT = Path(__file__).resolve().parents[2] / "images" / "demo-agent" / "agent.py"
EMAIL = "jane.doe@example.com"
DEMO_FILTERS = [{"allow": ["echo", "get-sum"]}]


def _agent(bridge_url: str | None, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run the agent as its image does: its own file, a HOME of its own, nothing else."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    if bridge_url is not None:
        env["MCP_BRIDGE_URL"] = bridge_url
    return subprocess.run(
        [sys.executable, str(AGENT)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def _bridge(everything_url: str, policy: Mapping[str, Any]) -> Iterator[RunningBridge]:
    entry = server_entry("everything", everything_url, "demo", filters=DEMO_FILTERS, policy=policy)
    with run_bridge([entry]) as bridge:
        yield bridge


@pytest.fixture
def blocking_bridge(everything_url: str) -> Iterator[RunningBridge]:
    """The demo's bridge: arguments with personal data are refused."""
    yield from _bridge(everything_url, {"pii": {"arguments": "block"}})


@pytest.fixture
def lenient_bridge(everything_url: str) -> Iterator[RunningBridge]:
    """A bridge that only reports personal data (``detect``): the agent's third call passes."""
    yield from _bridge(everything_url, {"pii": {"arguments": "detect"}})


def _outcomes(bridge: RunningBridge) -> list[tuple[str, str]]:
    return [(line["tool"], line["outcome"]) for line in bridge.audit_lines()]


def test_the_agent_makes_two_calls_and_is_refused_the_one_with_an_email_address(
    blocking_bridge: RunningBridge, tmp_path: Path
) -> None:
    result = _agent(blocking_bridge.url, tmp_path)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert f"agent: connected to {blocking_bridge.url} (mcp-operator-bridge" in out, out
    assert "agent: 2 tools: demo_echo, demo_get-sum" in out, out
    assert 'call 1: demo_echo {"message": "hello from the demo agent"} -> ok: Echo: hello' in out
    assert 'call 2: demo_get-sum {"a": 2, "b": 3} -> ok: The sum of 2 and 3 is 5.' in out, out
    assert "call 3: demo_echo" in out and "-> refused (pii_blocked): " in out, out
    assert "NOT AS EXPECTED" not in out, out
    assert _outcomes(blocking_bridge) == [
        ("demo_echo", "ok"),
        ("demo_get-sum", "ok"),
        ("demo_echo", "pii_blocked"),
    ]
    refused = blocking_bridge.audit_lines()[2]
    assert refused["attempts"] == 0, "the refused call was sent upstream"
    assert refused["pii"] == {"arguments": {"email": 1}}
    assert EMAIL not in blocking_bridge.log(), "the bridge logged the address"


def test_the_agent_fails_when_the_bridge_lets_the_email_address_through(
    lenient_bridge: RunningBridge, tmp_path: Path
) -> None:
    result = _agent(lenient_bridge.url, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "call 3: demo_echo" in result.stdout
    assert "expected a refusal with pii_blocked)  <-- NOT AS EXPECTED" in result.stdout
    assert "1 of 3 calls did not go as expected" in result.stdout
    assert [outcome for _tool, outcome in _outcomes(lenient_bridge)] == ["ok", "ok", "ok"]


def test_the_agent_says_what_is_missing_without_a_bridge_url_or_without_its_tools(
    everything_url: str, tmp_path: Path
) -> None:
    unset = _agent(None, tmp_path)
    assert unset.returncode == 2
    assert "MCP_BRIDGE_URL is not set" in unset.stdout
    entry = server_entry("everything", everything_url, "demo", filters=[{"allow": ["echo"]}])
    with run_bridge([entry]) as bridge:
        without_sum = _agent(bridge.url, tmp_path)
        assert bridge.audit_lines() == [], "the agent called a tool although one was missing"
    assert without_sum.returncode == 2, without_sum.stdout + without_sum.stderr
    assert "no tool *_get-sum in the catalog" in without_sum.stdout
