"""What the Prometheus endpoints of the operator, the adapter and the bridge share: one
registry per process with its metric declarations and exposition text (:class:`Metrics`),
the latency buckets of the adapter's and the bridge's per-call histograms and the
exposition's content type.

One set of buckets, so that a dashboard can put the adapter's and the bridge's latency of the
same calls side by side: from half a millisecond (a call answered by a local stdio server)
to a minute (the longest request timeout).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from mcp_operator.serve.asgi import Send, respond_plain

CALL_LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
CONTENT_TYPE = CONTENT_TYPE_LATEST

_Metric = TypeVar("_Metric", Counter, Gauge, Histogram)


class Children(Generic[_Metric]):
    """A labelled metric's children by their label values, looked up once per set of values.

    prometheus-client's ``labels()`` checks and converts the values and takes the metric's
    lock on every call (about 3 µs); an observation per call looks its child up here instead.
    For metrics whose series are never removed (a removed child kept here would count into
    nothing), with label values from a bounded set; past ``limit`` sets of values the memo
    starts again, so a caller with unbounded values costs memory of the metric alone.
    """

    __slots__ = ("_children", "_limit", "_metric")

    def __init__(self, metric: _Metric, limit: int = 4096) -> None:
        self._metric: _Metric = metric
        self._limit = limit
        self._children: dict[tuple[str, ...], _Metric] = {}

    def __call__(self, *values: str) -> _Metric:
        child = self._children.get(values)
        if child is None:
            child = self._metric.labels(*values)
            if len(self._children) >= self._limit:
                self._children.clear()
            self._children[values] = child
        return child


class Metrics:
    """One process's metrics on a registry of its own (a test passes its own registry).

    The subclasses (the operator's, the adapter's, the bridge's) own their names, labels and
    help texts and declare them with :meth:`counter`, :meth:`gauge` and :meth:`histogram`;
    what they share is where the metrics live and how they are exposed.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)

    def counter(self, name: str, documentation: str, labels: Sequence[str] = ()) -> Counter:
        return Counter(name, documentation, labels, registry=self.registry)

    def gauge(self, name: str, documentation: str, labels: Sequence[str] = ()) -> Gauge:
        return Gauge(name, documentation, labels, registry=self.registry)

    def histogram(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str],
        buckets: Sequence[float],
    ) -> Histogram:
        return Histogram(name, documentation, labels, buckets=buckets, registry=self.registry)

    def exposition(self) -> bytes:
        """The registry's metrics in Prometheus' text format."""
        return generate_latest(self.registry)


async def respond_metrics(send: Send, body: bytes) -> None:
    """Answer a scrape with the exposition ``body`` and Prometheus's own content type (with
    its format version), the same on every port of ours that serves ``/metrics``."""
    await respond_plain(send, 200, body, content_type=CONTENT_TYPE.encode())
