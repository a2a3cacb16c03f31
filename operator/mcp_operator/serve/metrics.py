"""What the adapter's and the bridge's Prometheus endpoints share: the latency buckets of
their per-call histograms and the exposition's content type.

One set of buckets, so that a dashboard can put the adapter's and the bridge's latency of the
same calls side by side: from half a millisecond (a call answered by a local stdio server)
to a minute (the longest request timeout).
"""

from __future__ import annotations

from prometheus_client.exposition import CONTENT_TYPE_LATEST

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
