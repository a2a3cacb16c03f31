"""The fleet's scheduling: wake-ups, back-off, worker life cycle (a fake API, no cluster).

Time is virtual (:class:`tests.unit.fakes.FakeClock`): the tests move it forward
instead of sleeping, so the delays they assert are exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from mcp_operator.controller.mcpserver import fleet as fleet_module
from mcp_operator.controller.mcpserver.fleet import Fleet
from mcp_operator.controller.mcpserver.reconcile import Result
from mcp_operator.controller.mcpserver.status import Outcome
from mcp_operator.controller.settings import FleetSettings, ListenerSettings, ScheduleSettings
from mcp_operator.kube import KubeError, NotFound, Resource
from tests.unit.fakes import FakeClock, FakeKube


class PatchRecorder(FakeKube):
    """Records status patches (of objects it need not hold); can be told to fail them."""

    def __init__(self) -> None:
        super().__init__()
        self.patches: list[Mapping[str, Any]] = []
        self.fail_with: KubeError | None = None

    async def patch_status(
        self, resource: Resource, namespace: str, name: str, status: Mapping[str, Any]
    ) -> Any:
        if self.fail_with is not None:
            raise self.fail_with
        self.patches.append(status)
        return {"status": dict(status)}


def body(generation: int = 1, uid: str = "u1") -> dict[str, Any]:
    return {
        "metadata": {"name": "s", "namespace": "ns", "uid": uid, "generation": generation},
        "spec": {"mode": "external", "url": "http://x/mcp"},
    }


class Script:
    """What each reconcile returns, in order (the last one repeats), and how often it ran."""

    def __init__(self) -> None:
        self.results = [Result(Outcome("probed"), "http://x/mcp", 3600.0)]
        self.calls = 0

    async def reconcile(self, _kube: Any, _body: Any, **_: Any) -> Result:
        self.calls += 1
        return self.results[min(self.calls, len(self.results)) - 1]


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch) -> Script:
    script = Script()
    monkeypatch.setattr(fleet_module.reconcile, "mcpserver", script.reconcile)
    return script


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


SETTINGS = FleetSettings(
    schedule=ScheduleSettings(initial_backoff_seconds=0.02, max_backoff_seconds=0.08, jitter=0),
    listeners=ListenerSettings(max_listeners=0),
)


async def test_a_new_generation_wakes_the_worker_at_once(script: Script, clock: FakeClock) -> None:
    kube = PatchRecorder()
    fleet = Fleet(kube, SETTINGS, clock=clock)
    fleet.observe("ADDED", body(1))
    await clock.run_until(lambda: script.calls == 1)
    fleet.observe("MODIFIED", body(1))  # a status write: no new generation, no reconcile
    await clock.advance(0.05)
    assert script.calls == 1
    fleet.observe("MODIFIED", body(2))
    await clock.run_until(lambda: script.calls == 2)
    assert kube.patches[-1]["observedGeneration"] == 2
    await fleet.stop()


async def test_failures_back_off_doubling_up_to_the_cap(script: Script, clock: FakeClock) -> None:
    script.results[0] = Result(Outcome("failed", "Unreachable", "down"), "http://x/mcp", 3600.0)
    fleet = Fleet(PatchRecorder(), SETTINGS, clock=clock)
    started = clock.time
    fleet.observe("ADDED", body())
    await clock.run_until(lambda: script.calls == 5, within=3)
    elapsed = clock.time - started
    # 0.02 + 0.04 + 0.08 + 0.08 between five attempts: doubling, then capped.
    assert 0.2 <= elapsed < 1.0
    await fleet.stop()


async def test_a_vanished_server_leaves_no_worker_and_comes_back_with_its_next_event(
    script: Script, clock: FakeClock
) -> None:
    kube = PatchRecorder()
    kube.fail_with = NotFound(404, 'mcpservers.mcp-operator.dev "s" not found')
    fleet = Fleet(kube, SETTINGS, clock=clock)
    fleet.observe("ADDED", body())
    await clock.run_until(lambda: len(fleet) == 0)
    kube.fail_with = None
    fleet.observe("ADDED", body())
    await clock.run_until(lambda: len(kube.patches) == 1)
    assert len(fleet) == 1
    await fleet.stop()


async def test_a_deleted_server_stops_its_worker(script: Script, clock: FakeClock) -> None:
    fleet = Fleet(PatchRecorder(), SETTINGS, clock=clock)
    fleet.observe("ADDED", body())
    await clock.run_until(lambda: script.calls == 1)
    fleet.observe("DELETED", body())
    assert len(fleet) == 0
    await clock.advance(0.05)
    assert script.calls == 1


async def test_only_a_moved_rollout_state_or_a_referenced_secret_wakes_a_server(
    script: Script, clock: FakeClock
) -> None:
    fleet = Fleet(PatchRecorder(), SETTINGS, clock=clock)
    with_secret = body()
    with_secret["spec"]["headers"] = [
        {"name": "Authorization", "valueFrom": {"secretKeyRef": {"name": "token", "key": "k"}}}
    ]
    fleet.observe("ADDED", with_secret)
    await clock.run_until(lambda: script.calls == 1)
    fleet.deployment_changed("u1", (1, 1, 1, 0))
    await clock.run_until(lambda: script.calls == 2)
    fleet.deployment_changed("u1", (1, 1, 1, 0))  # the same state again
    fleet.secret_changed("ns", "other")
    fleet.secret_changed("elsewhere", "token")
    await clock.advance(0.05)
    assert script.calls == 2
    fleet.secret_changed("ns", "token")
    await clock.run_until(lambda: script.calls == 3)
    await fleet.stop()


async def test_the_fleet_counts_reconciles_probes_and_objects_in_its_metrics(
    script: Script, clock: FakeClock
) -> None:
    from mcp_operator.controller.metrics import OperatorMetrics

    script.results = [
        Result(Outcome("failed", "Timeout", "slow"), "http://x/mcp", 3600.0, probe_seconds=2.0),
    ]
    kube = PatchRecorder()
    metrics = OperatorMetrics()
    fleet = Fleet(kube, SETTINGS, clock=clock, metrics=metrics)
    fleet.observe("ADDED", body())
    await clock.run_until(lambda: script.calls == 1)
    kube.fail_with = KubeError(500, "etcd is away")
    await clock.run_until(lambda: script.calls == 2)
    value = metrics.registry.get_sample_value
    assert value("mcp_operator_probes_total", {"result": "failed", "reason": "Timeout"}) == 2
    assert value("mcp_operator_probe_duration_seconds_sum", {"result": "failed"}) == 4.0
    assert (
        value(
            "mcp_operator_reconciles_total",
            {"kind": "MCPServer", "outcome": "not-ready", "reason": "ProbeFailed"},
        )
        == 1
    )
    assert (
        value(
            "mcp_operator_reconciles_total", {"kind": "MCPServer", "outcome": "error", "reason": ""}
        )
        == 1
    )
    assert value("mcp_operator_objects", {"kind": "MCPServer", "ready": "False"}) == 1
    await fleet.stop()
    assert value("mcp_operator_objects", {"kind": "MCPServer", "ready": "False"}) == 0
