"""The Argo CD health check in docs/gitops-health.md, run in Lua 5.4 on status shapes.

The e2e test (tests/e2e/test_gitops_health.py) runs the same script on objects that the
operator wrote on a real API server; here every branch is walked on hand-made shapes.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.gitops import argocd_health


def server(generation: int = 1, status: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "mcp-operator.dev/v1alpha1",
        "kind": "MCPServer",
        "metadata": {"name": "s", "generation": generation},
        "spec": {"mode": "external", "url": "http://x/mcp"},
    }
    if status is not None:
        body["status"] = status
    return body


def conditions(*entries: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "observedGeneration": 1,
        "conditions": [
            {"type": t, "status": s, "reason": r, "message": f"{t} {r}"} for t, s, r in entries
        ],
    }


def test_an_object_the_operator_has_not_seen_is_progressing() -> None:
    assert argocd_health(server())["status"] == "Progressing"
    assert argocd_health(server(status={"observedGeneration": 0}))["status"] == "Progressing"


def test_a_spec_change_not_yet_acted_on_is_progressing_even_when_ready() -> None:
    stale = server(generation=2, status=conditions(("Ready", "True", "ToolsDiscovered")))
    answer = argocd_health(stale)
    assert answer["status"] == "Progressing" and "generation 2" in answer["message"]


@pytest.mark.parametrize(
    ("ready", "reason", "health"),
    [
        ("True", "ToolsDiscovered", "Healthy"),
        ("True", "Running", "Healthy"),
        ("Unknown", "Probing", "Progressing"),
        ("False", "PodPending", "Progressing"),
        ("False", "RolloutInProgress", "Progressing"),
        ("False", "ServerNotReady", "Progressing"),
        ("False", "Suspended", "Suspended"),
        ("False", "InvalidSpec", "Degraded"),
        ("False", "ProbeFailed", "Degraded"),
        ("False", "SecretNotFound", "Degraded"),
    ],
)
def test_the_ready_condition_decides_the_health(ready: str, reason: str, health: str) -> None:
    answer = argocd_health(server(status=conditions(("Ready", ready, reason))))
    assert answer == {"status": health, "message": f"Ready {reason}"}


def test_an_agent_run_that_ended_is_healthy_or_degraded_by_its_end() -> None:
    done = conditions(("Ready", "False", "Completed"), ("Succeeded", "True", "Completed"))
    failed = conditions(("Ready", "False", "PodFailed"), ("Failed", "True", "PodFailed"))
    assert argocd_health(server(status=done))["status"] == "Healthy"
    assert argocd_health(server(status=failed)) == {
        "status": "Degraded",
        "message": "Failed PodFailed",
    }


def test_a_status_without_a_ready_condition_yet_is_progressing() -> None:
    assert argocd_health(server(status={"observedGeneration": 1}))["status"] == "Progressing"
