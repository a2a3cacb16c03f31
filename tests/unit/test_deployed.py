"""The ``Deployed`` condition of a managed MCPServer, from its Deployment and Pods (fake API)."""

from __future__ import annotations

from typing import Any

from mcp_operator.api import MCPServer
from mcp_operator.controller.conditions import WantedCondition
from mcp_operator.controller.mcpserver import managed, render
from mcp_operator.kube import PODS
from tests.unit.fakes import FakeKube

SERVER = MCPServer.model_validate(
    {
        "metadata": {"name": "srv", "namespace": "ns", "uid": "u1", "generation": 1},
        "spec": {
            "mode": "managed",
            "transport": "streamable-http",
            "deployment": {"image": "example/server:1"},
        },
    }
)


def deployment(replicas: int, generation: int = 3, **status: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "srv", "namespace": "ns", "generation": generation},
        "spec": {"replicas": replicas},
        "status": status,
    }


def pods(kube: FakeKube, *phases: str, labels: dict[str, str] | None = None) -> None:
    for i, phase in enumerate(phases):
        kube.put(
            PODS,
            {
                "metadata": {
                    "name": f"srv-{len(kube.objects)}-{i}",
                    "namespace": "ns",
                    "labels": render.labels(SERVER) if labels is None else labels,
                },
                "status": {"phase": phase},
            },
        )


async def deployed(kube: FakeKube, body: dict[str, Any]) -> WantedCondition:
    return await managed.deployed_condition(kube, SERVER, body)


async def test_an_unobserved_generation_is_a_pending_rollout() -> None:
    condition = await deployed(FakeKube(), deployment(2, observedGeneration=2))
    assert (condition.status, condition.reason) == ("False", "RolloutPending")
    assert "generation 3" in condition.message


async def test_all_replicas_updated_and_available_is_available() -> None:
    body = deployment(2, observedGeneration=3, updatedReplicas=2, availableReplicas=2)
    condition = await deployed(FakeKube(), body)
    assert (condition.status, condition.reason) == ("True", "Available")
    assert condition.message == "2 of 2 replicas available"


async def test_zero_replicas_is_scaled_to_zero() -> None:
    condition = await deployed(FakeKube(), deployment(0, observedGeneration=3))
    assert (condition.status, condition.reason) == ("True", "ScaledToZero")


async def test_a_rollout_in_progress_counts_its_pods_by_phase() -> None:
    kube = FakeKube()
    pods(kube, "Pending", "Running", "Pending")
    pods(kube, "Failed", labels={"app.kubernetes.io/instance": "someone-else"})
    body = deployment(3, observedGeneration=3, updatedReplicas=1, availableReplicas=1)
    condition = await deployed(kube, body)
    assert (condition.status, condition.reason) == ("False", "RolloutInProgress")
    assert condition.message == ("1 of 3 replicas available, 1 updated; Pods: 2 Pending, 1 Running")


async def test_pods_that_no_node_started_are_said_to_be_waiting_for_one() -> None:
    kube = FakeKube()
    pods(kube, "Pending")
    condition = await deployed(kube, deployment(1, observedGeneration=3, updatedReplicas=0))
    assert condition.reason == "RolloutInProgress"
    assert condition.message.endswith("Pods: 1 Pending (no node has started them yet)")


async def test_updated_but_unavailable_replicas_are_unavailable() -> None:
    body = deployment(2, observedGeneration=3, updatedReplicas=2, availableReplicas=1)
    condition = await deployed(FakeKube(), body)
    assert (condition.status, condition.reason) == ("False", "ReplicasUnavailable")
    assert condition.message.endswith("; no Pods yet")
