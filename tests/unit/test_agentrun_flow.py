"""An AgentRun event through the whole controller: parse, resolve, apply, status, wake-ups.

The API is the in-memory fake and time is virtual; everything else is the real code.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mcp_operator.controller.agentrun.runs import Runs
from mcp_operator.controller.conditions import find
from mcp_operator.controller.metrics import OperatorMetrics
from mcp_operator.kube import AGENTRUNS, CONFIGMAPS, MCPSERVERS
from tests.unit.fakes import FakeClock, FakeKube, settle


def run_body(generation: int = 1, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "mcp-operator.dev/v1alpha1",
        "kind": "AgentRun",
        "metadata": {
            "name": "triage",
            "namespace": "ns",
            "uid": "uid-run",
            "generation": generation,
        },
        "spec": {"mcpServers": [{"name": "docs"}], "agent": {"image": "agent:1"}, **spec},
    }


def ready_server() -> dict[str, Any]:
    return {
        "metadata": {"name": "docs", "namespace": "ns", "generation": 1},
        "spec": {"mode": "external", "url": "http://docs.example/mcp"},
        "status": {
            "observedGeneration": 1,
            "url": "http://docs.example/mcp",
            "toolCount": 1,
            "tools": [{"name": "docs_search", "originalName": "search"}],
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "ToolsDiscovered",
                    "message": "m",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        },
    }


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def runs(kube: FakeKube, clock: FakeClock) -> Iterator[Runs]:
    controller = Runs(kube, clock=clock)
    yield controller
    await controller.stop()


def ready(kube: FakeKube) -> tuple[str, str] | None:
    found = find(
        (kube.objects[("agentruns", "ns", "triage")].get("status") or {}).get("conditions"), "Ready"
    )
    return (found["status"], found["reason"]) if found else None


async def test_a_run_waits_for_its_server_and_its_event_creates_the_pod(
    runs: Runs, kube: FakeKube, clock: FakeClock
) -> None:
    kube.put(AGENTRUNS, run_body())
    runs.observe("ADDED", run_body())
    await settle()
    assert ready(kube) == ("False", "ServerNotFound")
    assert ("pods", "triage") not in kube.applied
    kube.put(MCPSERVERS, ready_server())
    runs.server_changed("ns", "docs")
    await settle()
    assert ("configmaps", "triage-bridge") in kube.applied and ("pods", "triage") in kube.applied
    assert ready(kube) == ("False", "PodPending")
    assert [e["reason"] for e in kube.events] == ["ServerNotFound", "Resolved", "PodPending"]


async def test_an_event_of_another_server_does_not_wake_the_run(runs: Runs, kube: FakeKube) -> None:
    kube.put(AGENTRUNS, run_body())
    runs.observe("ADDED", run_body())
    await settle()
    kube.put(MCPSERVERS, ready_server())
    runs.server_changed("ns", "other")
    runs.server_changed("elsewhere", "docs")
    await settle()
    assert ready(kube) == ("False", "ServerNotFound")


async def test_the_pods_phase_becomes_the_runs_status_and_the_ttl_deletes_the_run(
    runs: Runs, kube: FakeKube, clock: FakeClock
) -> None:
    kube.put(MCPSERVERS, ready_server())
    kube.put(AGENTRUNS, run_body(ttlSecondsAfterFinished=60))
    runs.observe("ADDED", run_body(ttlSecondsAfterFinished=60))
    await settle()
    pod = kube.objects[("pods", "ns", "triage")]
    pod["status"] = {"phase": "Succeeded"}
    runs.pod_changed(pod)

    def succeeded() -> bool:
        status = kube.objects[("agentruns", "ns", "triage")]["status"]
        return find(status["conditions"], "Succeeded") is not None

    for _ in range(40):  # each settle lets every runnable task run; the write takes a few
        await settle()
        if succeeded():
            break
    assert succeeded()
    assert kube.deleted == []
    await clock.run_until(lambda: bool(kube.deleted), within=120)
    assert kube.deleted == [("agentruns", "triage")]
    assert clock.time >= 60, "deleted before ttlSecondsAfterFinished had passed"


async def test_a_run_deleted_after_its_ttl_ends_its_worker_as_a_reconcile_not_an_error(
    kube: FakeKube, clock: FakeClock
) -> None:
    metrics = OperatorMetrics()
    runs = Runs(kube, clock=clock, metrics=metrics)
    kube.put(MCPSERVERS, ready_server())
    kube.put(AGENTRUNS, run_body(ttlSecondsAfterFinished=0))
    kube.objects[("pods", "ns", "triage")] = {  # the run's own Pod, which has finished
        "metadata": {
            "name": "triage",
            "namespace": "ns",
            "ownerReferences": [
                {"kind": "AgentRun", "name": "triage", "uid": "uid-run", "controller": True}
            ],
        },
        "status": {"phase": "Succeeded"},
    }
    runs.observe("ADDED", run_body(ttlSecondsAfterFinished=0))
    await clock.run_until(lambda: len(runs) == 0, within=5)
    assert kube.deleted == [("agentruns", "triage")]
    value = metrics.registry.get_sample_value
    labels = {"kind": "AgentRun", "outcome": "not-ready", "reason": "Completed"}
    assert value("mcp_operator_reconciles_total", labels) == 1
    errors = {"kind": "AgentRun", "outcome": "error", "reason": ""}
    assert value("mcp_operator_reconciles_total", errors) is None
    await runs.stop()


async def test_an_invalid_run_says_why_and_creates_nothing(runs: Runs, kube: FakeKube) -> None:
    invalid = run_body(mcpServers=[{"name": "docs"}, {"name": "docs"}])
    kube.put(AGENTRUNS, invalid)
    runs.observe("ADDED", invalid)
    await settle()
    assert ready(kube) == ("False", "InvalidSpec")
    assert (
        "mcpServers names must be unique"
        in kube.objects[("agentruns", "ns", "triage")]["status"]["conditions"][0]["message"]
    )
    assert kube.applied == []


async def test_a_pod_deleted_behind_the_runs_back_is_not_started_again(
    runs: Runs, kube: FakeKube
) -> None:
    kube.put(MCPSERVERS, ready_server())
    kube.put(AGENTRUNS, run_body())
    runs.observe("ADDED", run_body())
    await settle()
    pod = kube.objects.pop(("pods", "ns", "triage"))
    runs.pod_changed(pod)
    await settle()
    assert ready(kube) == ("False", "PodLost")
    assert kube.applied.count(("pods", "triage")) == 1
    assert (CONFIGMAPS.plural, "triage-bridge") in kube.applied


async def test_a_server_with_a_header_from_a_secret_not_opted_in_is_not_shareable(
    runs: Runs, kube: FakeKube
) -> None:
    """The run's Pod would mount the Secret: the same opt-in as the MCPServer's own probe."""
    server = ready_server()
    server["spec"]["headers"] = [
        {"name": "Authorization", "valueFrom": {"secretKeyRef": {"name": "tok", "key": "h"}}}
    ]
    kube.put(MCPSERVERS, server)
    kube.put_secret("ns", "tok", {"h": "Bearer x"}, opted_in=False)
    kube.put(AGENTRUNS, run_body())
    runs.observe("ADDED", run_body())
    await settle()
    assert ready(kube) == ("False", "SecretNotShareable")
    assert ("pods", "triage") not in kube.applied
    kube.put_secret("ns", "tok", {"h": "Bearer x"})
    runs.observe("MODIFIED", run_body(generation=2))
    kube.put(AGENTRUNS, run_body(generation=2))
    await settle()
    assert ("pods", "triage") in kube.applied
