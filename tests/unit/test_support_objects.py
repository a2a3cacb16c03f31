"""The e2e tests' object builders and log readers (tests/support) build what they used to
spell out inline."""

from __future__ import annotations

import pytest

from tests.support import pods
from tests.support.objects import agentrun, mcpserver, python_agent


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
