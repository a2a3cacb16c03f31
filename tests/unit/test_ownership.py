"""Own what we create, nothing else: the decision, and both controllers refusing a taken name.

An object of a child's name that the owner does not control (no controller, another
controller, an older owner of the same name) is never written: the controllers report
``NameConflict`` naming the object and its controller, and the object stays as it was.
"""

from __future__ import annotations

import copy
import datetime
from typing import Any

import pytest

from mcp_operator.api import AgentRun
from mcp_operator.controller.agentrun import reconcile as agentrun
from mcp_operator.controller.mcpserver import reconcile
from mcp_operator.controller.mcpserver.status import events, status_patch
from mcp_operator.controller.settings import AgentRenderSettings
from mcp_operator.kube import CONFIGMAPS, DEPLOYMENTS, PODS, SERVICES, ownership
from tests.unit.fakes import FakeKube
from tests.unit.test_mcpserver_reconcile import MANAGED, Probe, run, server

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> Probe:
    scripted = Probe()
    monkeypatch.setattr(reconcile, "discover", scripted)
    return scripted


def child(owner_uid: str | None, *, controller: bool = True, **metadata: Any) -> dict[str, Any]:
    references = []
    if owner_uid is not None:
        references.append(
            {"kind": "MCPServer", "name": "srv", "uid": owner_uid, "controller": controller}
        )
    return {"metadata": {"name": "srv", "ownerReferences": references, **metadata}}


def test_an_absent_object_may_be_created() -> None:
    assert ownership.decide(None, "u1") == ownership.ABSENT


def test_an_object_controlled_by_this_very_owner_is_ours() -> None:
    assert ownership.decide(child("u1"), "u1") == ownership.OWNED


@pytest.mark.parametrize(
    ("existing", "controller"),
    [
        (child(None), "no controller"),
        (child("u1", controller=False), "no controller"),  # an owner, but not the controller
        (child("u-older"), "MCPServer/srv"),  # a former MCPServer of the same name
    ],
)
def test_anything_else_is_foreign_and_says_who_controls_it(
    existing: dict[str, Any], controller: str
) -> None:
    existing["metadata"]["managedFields"] = [{"manager": "kubectl"}, {"manager": "kubectl"}]
    found = ownership.decide(existing, "u1")
    assert found == ownership.Foreign(controller, ("kubectl",))


def test_an_owner_without_a_uid_owns_nothing() -> None:
    assert isinstance(ownership.decide(child(""), ""), ownership.Foreign)


ADMIN_SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {
        "name": "srv",
        "namespace": "ns",
        "managedFields": [{"manager": "kubectl-create", "operation": "Update"}],
    },
    "spec": {"selector": {"app": "postgres"}, "ports": [{"port": 5432}]},
}


async def test_a_managed_server_whose_service_name_is_taken_touches_nothing_and_says_so(
    probe: Probe,
) -> None:
    kube = FakeKube()
    stored = kube.put(SERVICES, ADMIN_SERVICE)
    before = copy.deepcopy(stored)
    result = await run(kube, server(**MANAGED))
    outcome = result.outcome
    assert (outcome.kind, outcome.reason, outcome.ready_reason) == (
        "failed",
        "NameConflict",
        "NameConflict",
    )
    assert outcome.deployed is not None and outcome.deployed.reason == "NameConflict"
    assert "Service ns/srv" in outcome.message and "MCPServer/srv" in outcome.message
    assert "no controller" in outcome.message and "kubectl-create" in outcome.message
    assert kube.objects[("services", "ns", "srv")] == before
    assert ("deployments", "ns", "srv") not in kube.objects
    assert probe.targets == []
    assert result.url is None, "the Service of that name is not the server's endpoint"

    patch = status_patch(None, outcome, generation=1, url=None, now="2026-01-01T00:00:00Z")
    ready = next(c for c in patch["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "NameConflict")
    (event,) = events(None, patch)
    assert (event.type, event.reason) == ("Warning", "NameConflict")
    assert "Service ns/srv" in event.message


async def test_a_deployment_of_another_controller_is_not_taken_over(probe: Probe) -> None:
    kube = FakeKube()
    other = {
        "metadata": {
            "name": "srv",
            "namespace": "ns",
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "Workload", "name": "x", "uid": "w"}
                | {"controller": True}
            ],
        },
        "spec": {"replicas": 3},
    }
    before = copy.deepcopy(kube.put(DEPLOYMENTS, other))
    result = await run(kube, server(**MANAGED))
    assert result.outcome.ready_reason == "NameConflict"
    assert "its controller: Workload/x" in result.outcome.message
    assert kube.objects[("deployments", "ns", "srv")] == before


async def test_the_servers_own_children_are_applied_again_as_before(probe: Probe) -> None:
    kube = FakeKube()
    await run(kube, server(**MANAGED))
    result = await run(kube, server(**MANAGED))
    assert result.outcome.kind == "probed"
    assert sorted(kube.applied) == sorted(
        [("networkpolicies", "srv"), ("services", "srv"), ("deployments", "srv")] * 2
    )


def agent_run(**spec: Any) -> AgentRun:
    return AgentRun.model_validate(
        {
            "metadata": {"name": "app", "namespace": "ns", "uid": "uid-run", "generation": 1},
            "spec": {
                "mcpServers": [{"name": "docs", "optional": True}],
                "agent": {"image": "agent:1"},
                **spec,
            },
        }
    )


def condition(patch: dict[str, Any], type_: str) -> tuple[str, str, str]:
    found = next(c for c in patch["conditions"] if c["type"] == type_)
    return found["status"], found["reason"], found["message"]


async def reconcile_run(kube: FakeKube, run_: AgentRun, **settings: Any) -> agentrun.Pass:
    return await agentrun.reconcile(
        kube,
        run_,
        None,
        AgentRenderSettings(**settings),
        now=NOW,
    )


async def test_a_run_whose_configmap_name_is_taken_starts_no_pod_and_leaves_it_alone() -> None:
    kube = FakeKube()
    existing = {
        "metadata": {"name": "app-bridge", "namespace": "ns"},
        "data": {"settings": "admin's"},
    }
    before = copy.deepcopy(kube.put(CONFIGMAPS, existing))
    done = await reconcile_run(kube, agent_run())
    status, reason, message = condition(done.patch, "Ready")
    assert (status, reason) == ("False", "NameConflict")
    assert "ConfigMap ns/app-bridge" in message and "AgentRun/app" in message
    assert kube.objects[("configmaps", "ns", "app-bridge")] == before
    assert ("pods", "ns", "app") not in kube.objects
    assert "configMapName" not in done.patch, "the admin's ConfigMap is not the run's"
    assert done.delay is not None, "the run tries again (the name may be freed)"


async def test_a_pod_of_the_runs_name_that_is_not_its_own_is_never_read_as_the_run() -> None:
    kube = FakeKube()
    foreign = {"metadata": {"name": "app", "namespace": "ns"}, "status": {"phase": "Running"}}
    kube.put(PODS, foreign)
    done = await reconcile_run(kube, agent_run())
    status, reason, message = condition(done.patch, "Ready")
    assert (status, reason) == ("False", "NameConflict")
    assert "Pod ns/app" in message
    assert "podName" not in done.patch
    assert kube.applied == []


async def test_a_run_reconciled_again_keeps_its_own_children() -> None:
    kube = FakeKube()
    await reconcile_run(kube, agent_run())
    assert ("pods", "ns", "app") in kube.objects
    done = await reconcile_run(kube, agent_run())
    assert condition(done.patch, "Ready")[1] == "PodPending"


def test_the_conflict_message_names_the_object_its_controller_and_a_few_managers() -> None:
    found = ownership.Foreign("Workload/x", tuple(f"m{i}" for i in range(8)))
    message = ownership.conflict_message("Service", "ns", "db", "MCPServer/db", found)
    assert message.startswith("Service ns/db already exists and is not controlled by MCPServer/db")
    assert "its controller: Workload/x" in message
    assert "m0, m1, m2, m3, m4 and 3 more" in message and "m5" not in message
    assert "give the MCPServer another name" in message
