"""The README's main command works: ``mcp-operator dev demo`` ends with an agent's governed calls.

The demo runs as ``make demo`` runs it, with ``--no-wait`` and no terminal, on the session's
cluster with its real node (``node_cluster``, given to it as ``KUBECONFIG``: the machine has
one node, so the demo must not start its own). It finds the cluster's registry in
``kube-public/local-registry-hosting``, pushes the images, installs the chart, and the checks
are on what it prints: the run's phases, the agent container's output and the bridge
container's audit lines; then that it removed what it installed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

import pytest

from mcp_operator.dev import demo_objects
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

PHASE_LINE = re.compile(r"^\s+(\d+\.\d)s\s+(\w+)$")


def _section(out: str, title: str) -> list[str]:
    """The lines after the ``==> <title>…`` line, up to the next ``==>`` line."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"==> {title}"))
    section = []
    for line in lines[start + 1 :]:
        if line.startswith("==> "):
            break
        section.append(line)
    return section


def test_the_demo_runs_an_agent_whose_calls_the_bridge_checks_and_audits(
    node_cluster: Cluster, node_images: dict[str, str]
) -> None:
    assert set(node_images) >= {"mcp-operator", "server-everything", "demo-agent"}
    result = subprocess.run(
        [sys.executable, "-m", "mcp_operator", "dev", "demo", "--no-wait"],
        env={**os.environ, "KUBECONFIG": str(node_cluster.kubeconfig)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )
    out = result.stdout
    assert result.returncode == 0, out[-6000:] + result.stderr[-3000:]
    assert f"==> Pushing the images to {node_cluster.plane.registry}" in out

    phases = [m.group(2) for line in _section(out, "Applied") if (m := PHASE_LINE.match(line))]
    assert phases[-1] == "Succeeded", phases
    assert "PodPending" in phases and "Running" in phases, phases
    assert phases.index("PodPending") < phases.index("Running") < phases.index("Succeeded")

    agent = "\n".join(_section(out, "The agent's output"))
    assert "agent: connected to http://127.0.0.1:7800/mcp (mcp-operator-bridge" in agent, agent
    assert "agent: 2 tools: external_get-sum, managed_echo" in agent, agent
    assert "call 1: managed_echo" in agent and "-> ok: Echo: hello from the demo agent" in agent
    assert "call 2: external_get-sum" in agent and "The sum of 2 and 3 is 5." in agent, agent
    assert "call 3: managed_echo" in agent and "-> refused (pii_blocked): " in agent, agent

    audit: list[dict[str, Any]] = [
        json.loads(line) for line in _section(out, "The bridge's audit lines") if line
    ]
    assert [(a["tool"], a["outcome"]) for a in audit] == [
        ("managed_echo", "ok"),
        ("external_get-sum", "ok"),
        ("managed_echo", "pii_blocked"),
    ], audit
    namespace = demo_objects.NAMESPACE
    assert [a["server"] for a in audit] == [
        f"{namespace}/{demo_objects.MANAGED}",
        f"{namespace}/{demo_objects.EXTERNAL}",
        f"{namespace}/{demo_objects.MANAGED}",
    ]
    assert all(a["run"] == f"{namespace}/{demo_objects.RUN}" for a in audit)
    assert audit[2]["attempts"] == 0 and audit[2]["pii"] == {"arguments": {"email": 1}}
    assert "jane.doe@example.com" not in json.dumps(audit)

    assert f"==> Removing the release {demo_objects.RELEASE}" in out
    left = node_cluster.kubectl("get", "namespace", namespace, check=False)
    assert left.returncode != 0, f"the demo left namespace {namespace} behind"
