"""The README's main command works: ``make demo`` runs ``mcp-operator dev demo``."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


def test_the_demo_brings_a_real_server_to_ready_and_stops_everything_it_started() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mcp_operator", "dev", "demo", "--local", "--once"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "kube-apiserver v1." in out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("NAME"))
    columns = lines[header + 1].split()
    assert columns[:3] == ["everything", "external", "True"], lines[header + 1]
    assert int(columns[3]) > 0
    assert "demo_echo" in out
    assert "demo_get-env" not in out, "the demo denies the tool that prints the environment"
    agent_runs = next(i for i, line in enumerate(lines) if line.startswith("NAME") and i > header)
    assert lines[agent_runs + 1].split()[0] == "hello", lines[agent_runs + 1]
    assert "Tools the agent gets through its bridge: 2" in out
    bridge = out[out.index("ConfigMap hello-bridge") :]
    assert "url: " in bridge and "prefix: demo" in bridge, bridge[:2000]
    # The bridge pins tools by their original names (issue 17: a later tool cannot take a pin).
    assert "- echo" in bridge and "- get-sum" in bridge, bridge[:2000]
    assert "mcp-bridge" in bridge and "(native sidecar)" in bridge, bridge[-2000:]
    assert "MCP_BRIDGE_URL=http://127.0.0.1:" in bridge, bridge[-2000:]
    assert "==> Stopped" in out
    leftovers = subprocess.run(
        ["pgrep", "-f", "mcp-operator/demo/cluster"], capture_output=True, text=True, check=False
    )
    assert leftovers.stdout.strip() == "", "the demo left control-plane processes behind"
