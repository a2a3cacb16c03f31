"""Metrics: what the controllers observe, and docs/metrics.md listing exactly what is served."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from mcp_operator.adapter.front_pool import PoolMetrics
from mcp_operator.adapter.metrics import AdapterMetrics
from mcp_operator.adapter.pool import ChildPool
from mcp_operator.controller.metrics import OperatorMetrics, count_ready
from mcp_operator.controller.slots import Slots
from mcp_operator.serve.metrics import Children

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def served_names(registry: CollectorRegistry) -> set[str]:
    """The names a scrape shows for each family (counters with their ``_total``)."""
    names = set()
    for family in registry.collect():
        names.add(family.name + "_total" if family.type == "counter" else family.name)
    return names


def documented_names(prefix: str) -> set[str]:
    return set(re.findall(rf"^\| `({prefix}[a-z_]+)` \|", DOC.read_text(), re.MULTILINE))


def sample(metrics: OperatorMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_every_operator_metric_is_documented_and_every_documented_one_is_served() -> None:
    assert served_names(OperatorMetrics().registry) == documented_names("mcp_operator_")


def test_every_adapter_metric_is_documented_and_every_documented_one_is_served() -> None:
    # the per-session pool's metrics are the adapter's with the pool's own
    metrics = PoolMetrics(ChildPool(max_children=1, idle_seconds=1))
    assert served_names(metrics.registry) == documented_names("mcp_adapter_")
    shared = AdapterMetrics(sessions=lambda: 0, inflight=lambda: 0, restarts=lambda: 0)
    assert served_names(shared.registry) < served_names(metrics.registry)


def ready(status: str, reason: str) -> dict[str, Any]:
    return {"conditions": [{"type": "Ready", "status": status, "reason": reason}]}


def test_a_reconcile_is_counted_by_the_ready_status_and_reason_it_wrote() -> None:
    metrics = OperatorMetrics()
    metrics.reconciled("MCPServer", ready("True", "ToolsDiscovered"), 0.2)
    metrics.reconciled("MCPServer", ready("False", "ProbeTimeout"), 1.0)
    metrics.reconciled("MCPServer", None, 0.1)
    assert sample(
        metrics,
        "mcp_operator_reconciles_total",
        kind="MCPServer",
        outcome="ready",
        reason="ToolsDiscovered",
    )
    assert sample(
        metrics,
        "mcp_operator_reconciles_total",
        kind="MCPServer",
        outcome="not-ready",
        reason="ProbeTimeout",
    )
    assert sample(
        metrics, "mcp_operator_reconciles_total", kind="MCPServer", outcome="error", reason=""
    )
    count = sample(metrics, "mcp_operator_reconcile_duration_seconds_count", kind="MCPServer")
    assert count == 3.0


def test_objects_are_counted_by_ready_status_at_scrape_time() -> None:
    metrics = OperatorMetrics()
    statuses: list[dict[str, Any] | None] = [ready("True", "A"), ready("True", "A"), None]
    metrics.watch("MCPServer", states=lambda: count_ready(iter(statuses)), queue_depth=lambda: 4)
    assert sample(metrics, "mcp_operator_objects", kind="MCPServer", ready="True") == 2.0
    assert sample(metrics, "mcp_operator_objects", kind="MCPServer", ready="Unknown") == 1.0
    statuses.append(ready("False", "B"))
    assert sample(metrics, "mcp_operator_objects", kind="MCPServer", ready="False") == 1.0
    assert sample(metrics, "mcp_operator_queue_depth", kind="MCPServer") == 4.0


def test_api_errors_are_counted_by_verb_and_code_or_transport() -> None:
    metrics = OperatorMetrics()
    metrics.api_error("PATCH", 409)
    metrics.api_error("GET", None)
    assert sample(metrics, "mcp_operator_api_request_errors_total", verb="PATCH", code="409")
    assert sample(metrics, "mcp_operator_api_request_errors_total", verb="GET", code="transport")


async def test_slots_count_who_waits_and_report_each_wait() -> None:
    import asyncio

    waits: list[float] = []
    clock = iter([0.0, 0.0, 1.0, 5.0]).__next__
    slots = Slots(1, observe_wait=waits.append, monotonic=clock)
    async with slots:
        assert waits == [0.0]
        second = asyncio.create_task(slots.__aenter__())
        await asyncio.sleep(0)
        assert slots.waiting == 1
    await second
    assert slots.waiting == 0 and waits == [0.0, 4.0]
    await slots.__aexit__(None, None, None)


def test_adapter_calls_are_timed_with_a_bounded_method_label() -> None:
    answered: list[dict[str, Any]] = []

    class Sink:
        def respond(self, message: dict[str, Any]) -> None:
            answered.append(message)

        def related(self, message: dict[str, Any]) -> bool:
            return True

    metrics = AdapterMetrics(sessions=lambda: 2, inflight=lambda: 1, restarts=lambda: 3)
    metrics.timed({"method": "tools/call"}, Sink()).respond({"id": 1, "result": {}})
    metrics.timed({"method": "x-made-up/" * 50}, Sink()).respond({"id": 2, "error": {}})
    value = metrics.registry.get_sample_value
    assert value("mcp_adapter_calls_total", {"method": "tools/call", "outcome": "result"}) == 1
    assert value("mcp_adapter_calls_total", {"method": "(other)", "outcome": "error"}) == 1
    assert value("mcp_adapter_sessions") == 2 and value("mcp_adapter_child_restarts") == 3
    assert len(answered) == 2, "the answer still reaches the caller"


def test_remembered_children_count_into_the_series_labels_would_give() -> None:
    metrics = AdapterMetrics(sessions=lambda: 0, inflight=lambda: 0, restarts=lambda: 0)
    children = Children(metrics.calls, limit=2)
    for values in [("a", "result"), ("a", "result"), ("b", "error"), ("c", "result")]:
        children(*values).inc()
    assert children("a", "result") is metrics.calls.labels("a", "result")
    metrics.calls.labels("c", "result").inc()
    exposed = metrics.exposition().decode()
    assert 'mcp_adapter_calls_total{method="a",outcome="result"} 2.0' in exposed
    assert 'mcp_adapter_calls_total{method="c",outcome="result"} 2.0' in exposed
    assert len(children._children) <= 2
