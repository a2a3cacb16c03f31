"""The operator's Prometheus metrics (``prometheus-client``), on a registry of its own.

Owns the metric names, their labels and help texts (each is documented in
docs/metrics.md) and the exposition text. What is observed, and when, is
decided by the callers: the controllers (reconciles, probes, objects by
state, queue), the API client (request errors, through a callback, since
``kube`` imports no controller) and the leader elector (leader status).
Serving the text is :mod:`mcp_operator.controller.endpoints`' job.

Label values stay bounded: ``kind`` is MCPServer or AgentRun, ``reason`` a
condition reason of the operator's own vocabulary (CamelCase words), ``verb``
an HTTP method, ``code`` an HTTP status code (or ``transport``).
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from mcp_operator.serve.metrics import Metrics

PROBE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
WAIT_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)
RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0)


def ready_of(status: Mapping[str, Any] | None) -> tuple[str, str]:
    """The ``Ready`` condition's status and reason (``Unknown`` and ``""`` when absent)."""
    for condition in (status or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            return str(condition.get("status") or "Unknown"), str(condition.get("reason") or "")
    return "Unknown", ""


class _Polled(Collector):
    """Gauges read at scrape time from the controllers (no bookkeeping on the hot path)."""

    def __init__(self) -> None:
        self.objects: dict[str, Callable[[], Mapping[str, int]]] = {}
        self.queues: dict[str, Callable[[], int]] = {}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        objects = GaugeMetricFamily(
            "mcp_operator_objects",
            "Objects the operator reconciles, by kind and the status of their Ready condition.",
            labels=["kind", "ready"],
        )
        for kind, states in self.objects.items():
            counted = states()
            for ready in ("True", "False", "Unknown"):
                objects.add_metric([kind, ready], float(counted.get(ready, 0)))
        yield objects
        queue = GaugeMetricFamily(
            "mcp_operator_queue_depth",
            "Reconciles waiting for a slot of the global concurrency limit (the probe slots).",
            labels=["kind"],
        )
        for kind, depth in self.queues.items():
            queue.add_metric([kind], float(depth()))
        yield queue


class OperatorMetrics(Metrics):
    """Every metric of one operator process (leader or follower)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        self.reconciles = self.counter(
            "mcp_operator_reconciles",
            "Reconciles by kind, outcome (ready, not-ready, unknown, error) and Ready reason.",
            ["kind", "outcome", "reason"],
        )
        self.reconcile_seconds = self.histogram(
            "mcp_operator_reconcile_duration_seconds",
            "Time of one reconcile, its probe and status write included.",
            ["kind"],
            RECONCILE_BUCKETS,
        )
        self.probes = self.counter(
            "mcp_operator_probes",
            "MCPServer probes by result (ok, failed) and reason (the Probed condition's).",
            ["result", "reason"],
        )
        self.probe_seconds = self.histogram(
            "mcp_operator_probe_duration_seconds",
            "Time of one probe (handshake and every tools/list page), by result.",
            ["result"],
            PROBE_BUCKETS,
        )
        self.queue_wait_seconds = self.histogram(
            "mcp_operator_queue_wait_seconds",
            "Time a reconcile waited for a slot of the global concurrency limit.",
            ["kind"],
            WAIT_BUCKETS,
        )
        self.api_errors = self.counter(
            "mcp_operator_api_request_errors",
            "The operator's own API server requests that failed, by verb and HTTP status code "
            "(transport: no answer). kopf's watches are not counted.",
            ["verb", "code"],
        )
        self.leader = self.gauge(
            "mcp_operator_leader",
            "1 while this process holds the leader Lease (or runs without election), else 0.",
        )
        self._polled = _Polled()
        self.registry.register(self._polled)

    # -- what the callers observe --------------------------------------------------------

    def reconciled(self, kind: str, status: Mapping[str, Any] | None, seconds: float) -> None:
        """One reconcile ended; ``status`` as written (``None``: it could not be written)."""
        if status is None:
            outcome, reason = "error", ""
        else:
            ready, reason = ready_of(status)
            outcome = {"True": "ready", "False": "not-ready"}.get(ready, "unknown")
        self.reconciles.labels(kind, outcome, reason).inc()
        self.reconcile_seconds.labels(kind).observe(seconds)

    def probed(self, ok: bool, reason: str, seconds: float) -> None:
        result = "ok" if ok else "failed"
        self.probes.labels(result, reason).inc()
        self.probe_seconds.labels(result).observe(seconds)

    def api_error(self, verb: str, code: int | None) -> None:
        self.api_errors.labels(verb, "transport" if code is None else str(code)).inc()

    def leading(self, leading: bool) -> None:
        self.leader.set(1 if leading else 0)

    def queue_waited(self, kind: str) -> Callable[[float], None]:
        """The observer of one worker's slot waits."""
        return self.queue_wait_seconds.labels(kind).observe

    def watch(
        self,
        kind: str,
        *,
        states: Callable[[], Mapping[str, int]],
        queue_depth: Callable[[], int],
    ) -> None:
        """Read a controller's objects by Ready status and its queue depth at each scrape."""
        self._polled.objects[kind] = states
        self._polled.queues[kind] = queue_depth


def count_ready(statuses: Iterator[Mapping[str, Any] | None]) -> Tally[str]:
    """How many of ``statuses`` have each Ready status (True, False, Unknown)."""
    return Tally(ready_of(status)[0] for status in statuses)
