"""The e2e tests' object builders and log readers (tests/support) build what they used to
spell out inline."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.support import pods
from tests.support.objects import agentrun, mcpserver, python_agent, ready


def test_an_agentrun_takes_server_names_or_whole_entries_and_spec_fields() -> None:
    agent = python_agent("img", "print(1)", env=[{"name": "A", "value": "b"}])
    run = agentrun("agent", [{"name": "ev", "toolsDeny": ["x"]}, "clock"], agent, bridge={"x": 1})
    assert run == {
        "apiVersion": "mcp-operator.dev/v1alpha1",
        "kind": "AgentRun",
        "metadata": {"name": "agent"},
        "spec": {
            "mcpServers": [{"name": "ev", "toolsDeny": ["x"]}, {"name": "clock"}],
            "agent": {
                "image": "img",
                "command": ["python", "-c", "print(1)"],
                "env": [{"name": "A", "value": "b"}],
            },
            "bridge": {"x": 1},
        },
    }


def test_an_mcpserver_holds_the_spec_it_was_given() -> None:
    assert mcpserver("s", mode="external", url="http://x/mcp") == {
        "apiVersion": "mcp-operator.dev/v1alpha1",
        "kind": "MCPServer",
        "metadata": {"name": "s"},
        "spec": {"mode": "external", "url": "http://x/mcp"},
    }


def test_marked_reads_the_first_json_after_its_mark_only() -> None:
    log = 'noise\nAGENT-RESULTS {"no": 1}\nAGENT-RESULT {"a": 1}\nAGENT-RESULT {"a": 2}\n'
    assert pods.marked(log, "AGENT-RESULT") == {"a": 1}
    with pytest.raises(StopIteration):
        pods.marked(log, "WRITES")


class _Answers:
    """Stands in for a Cluster's ``kubectl get -o json``: absent, then not Ready, then Ready."""

    def __init__(self, *objects: dict[str, Any] | None) -> None:
        self._objects = list(objects)

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        obj = self._objects.pop(0) if len(self._objects) > 1 else self._objects[0]
        if obj is None:
            return subprocess.CompletedProcess(args, 1, "", "NotFound")
        return subprocess.CompletedProcess(args, 0, json.dumps(obj), "")


def test_ready_waits_through_absent_and_not_ready_for_the_ready_object() -> None:
    def server(status: str) -> dict[str, Any]:
        return {"status": {"conditions": [{"type": "Ready", "status": status}]}, "n": status}

    answers = _Answers(None, server("False"), server("True"))
    found = ready(answers, "ns", "mcpserver", "s", timeout=10)  # type: ignore[arg-type]
    assert found["n"] == "True"
    with pytest.raises(AssertionError, match="mcpserver s Ready"):
        ready(_Answers(server("False")), "ns", "mcpserver", "s", timeout=0.5)  # type: ignore[arg-type]
