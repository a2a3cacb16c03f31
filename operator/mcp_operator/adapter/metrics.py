"""The adapter's Prometheus metrics (``prometheus-client``), on a registry of its own.

Owns the metric names, their labels and help texts (each is documented in
docs/metrics.md), the per-call timing wrapper and the exposition text. The
core wraps each forwarded call's sink (:meth:`AdapterMetrics.timed`); the
gauges (sessions, calls in flight, child restarts) and the count of messages
no call could be attributed to are read from the core at
scrape time, so the hot path pays for one clock read and one histogram
observation per call, nothing more. The HTTP front serves ``/metrics``.

Label values stay bounded: ``method`` is an MCP method name the adapter knows,
anything else counts as ``(other)``; ``outcome`` is ``result`` or ``error``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from mcp_operator.adapter.records import CallSink
from mcp_operator.serve.metrics import CALL_LATENCY_BUCKETS, Children, Metrics

OTHER = "(other)"
METHODS = frozenset(
    {
        "initialize",
        "ping",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
        "server/discover",
        "tasks/get",
        "tasks/result",
        "tasks/list",
        "tasks/cancel",
    }
)


class _TimedSink:
    """A call's sink that observes the call's latency and outcome when it is answered."""

    __slots__ = ("_done", "_inner", "_started")

    def __init__(self, inner: CallSink, done: Callable[[dict[str, Any], float], None]) -> None:
        self._inner = inner
        self._done = done
        self._started = time.perf_counter()

    def respond(self, message: dict[str, Any]) -> None:
        self._done(message, time.perf_counter() - self._started)
        self._inner.respond(message)

    def related(self, message: dict[str, Any]) -> bool:
        return self._inner.related(message)

    def ask(self, message: dict[str, Any]) -> bool:
        return self._inner.ask(message)


class _Polled(Collector):
    def __init__(self, sessions: Callable[[], int], inflight: Callable[[], int]) -> None:
        self._sessions = sessions
        self._inflight = inflight
        self.restarts: Callable[[], int] = lambda: 0
        self.unattributed: Callable[[], Mapping[str, int]] = dict

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        yield GaugeMetricFamily(
            "mcp_adapter_sessions", "Legacy-era HTTP sessions open.", value=self._sessions()
        )
        yield GaugeMetricFamily(
            "mcp_adapter_inflight_calls",
            "Calls forwarded to the child and not answered yet.",
            value=self._inflight(),
        )
        # A counter in meaning (it only grows), read from the supervisor at scrape time.
        yield GaugeMetricFamily(
            "mcp_adapter_child_restarts",
            "Times the stdio child was started again after it exited.",
            value=self.restarts(),
        )
        unattributed = CounterMetricFamily(
            "mcp_adapter_unattributed_messages",
            "Messages of the child that could not be attributed to one call: log messages "
            "dropped, server requests refused to the child.",
            labels=["kind"],
        )
        for kind, count in sorted(self.unattributed().items()):
            unattributed.add_metric([kind], count)
        yield unattributed


class AdapterMetrics(Metrics):
    """Every metric of one adapter process."""

    def __init__(
        self,
        *,
        sessions: Callable[[], int],
        inflight: Callable[[], int],
        restarts: Callable[[], int],
        unattributed: Callable[[], Mapping[str, int]] = dict,
        registry: CollectorRegistry | None = None,
    ) -> None:
        super().__init__(registry)
        self.calls = self.counter(
            "mcp_adapter_calls",
            "Requests forwarded to the child, by MCP method and outcome (result, error).",
            ["method", "outcome"],
        )
        self.call_seconds = self.histogram(
            "mcp_adapter_call_duration_seconds",
            "Time from forwarding a request to the child to its answer, by MCP method.",
            ["method"],
            CALL_LATENCY_BUCKETS,
        )
        self.call_counts = Children(self.calls)
        self.call_durations = Children(self.call_seconds)
        self.auth_refusals = self.counter(
            "mcp_adapter_auth_refusals",
            "Requests refused by inbound authentication (401/403) before they reached the "
            "child, by reason (missing, malformed, bad_signature, expired, wrong_audience, "
            "wrong_issuer, revoked, forbidden, ...).",
            ["reason"],
        )
        self.auth_mode = self.gauge(
            "mcp_adapter_auth_mode",
            "1 for the inbound authentication mode the adapter runs with (kubernetes, oidc, none).",
            ["mode"],
        )
        polled = _Polled(sessions, inflight)
        polled.restarts = restarts
        polled.unattributed = unattributed
        self.registry.register(polled)

    def refused(self, reason: str) -> None:
        """Count one request refused by inbound authentication."""
        self.auth_refusals.labels(reason).inc()

    def timed(self, message: dict[str, Any], sink: CallSink) -> CallSink:
        """``sink`` wrapped so that the call's answer is counted and timed."""
        method = message.get("method")
        label = method if method in METHODS else OTHER

        def done(answer: dict[str, Any], seconds: float) -> None:
            outcome = "error" if "error" in answer else "result"
            self.call_counts(label, outcome).inc()
            self.call_durations(label).observe(seconds)

        return _TimedSink(sink, done)
