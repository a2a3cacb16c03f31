"""The bridge's Prometheus metrics (``prometheus-client``), on a registry of its own.

Owns the metric names, their labels and help texts (each is documented in docs/bridge.md) and
the exposition text. What is observed, and when, is decided by the callers (the bridge core,
the upstream pool, the configuration watcher).

Label values stay bounded: ``tool`` is an exposed name from the catalog (a name the agent
made up is counted under ``(unknown)``), ``server`` a configured server, ``method`` of a
server's request one the bridge relays (or ``other``).
"""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry

from mcp_operator.bridge.audit import AuditRecord
from mcp_operator.bridge.upstreams import MISCONFIGURATIONS, Misconfiguration
from mcp_operator.serve.capabilities import CAPABILITY_FOR_METHOD
from mcp_operator.serve.metrics import CALL_LATENCY_BUCKETS, Children, Metrics

UNKNOWN = "(unknown)"
RELAYED_METHODS = frozenset({*CAPABILITY_FOR_METHOD, "ping"})
"""The ``method`` label's values besides ``other`` (a server cannot grow the label set)."""


class BridgeMetrics(Metrics):
    """Every metric of one bridge process."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        self.calls = self.counter(
            "mcp_bridge_calls",
            "Tool calls by server, exposed tool and outcome code.",
            ["server", "tool", "outcome"],
        )
        self.call_seconds = self.histogram(
            "mcp_bridge_call_duration_seconds",
            "Time from a tools/call's arrival to its answer, all pipeline steps included.",
            ["server"],
            CALL_LATENCY_BUCKETS,
        )
        self._call_counts = Children(self.calls)
        self._call_durations = Children(self.call_seconds)
        self.upstream_up = self.gauge(
            "mcp_bridge_upstream_up",
            "1 when the server's last listing or call reached it, 0 while it is down.",
            ["server"],
        )
        self.misconfigured = self.gauge(
            "mcp_bridge_upstream_misconfigured",
            "1 while the server cannot be called as configured (reason InvalidHeader: a "
            "header value with a control character; UnreadableHeader: a header's valueFile "
            "could not be read); the bridge never contacts it.",
            ["server", "reason"],
        )
        self.listings = self.counter(
            "mcp_bridge_upstream_listings",
            "tools/list rounds sent to a server, by result (ok, failed).",
            ["server", "result"],
        )
        self.catalog_tools = self.gauge(
            "mcp_bridge_catalog_tools", "Tools the agent's tools/list shows."
        )
        self.server_requests = self.counter(
            "mcp_bridge_server_requests",
            "Requests servers made of agents during their calls, by method and outcome "
            "(relayed, agent_error, undeclared, unsupported, bounded, dropped, ended).",
            ["method", "outcome"],
        )
        self.config_reloads = self.counter(
            "mcp_bridge_config_reloads",
            "Configuration file changes seen, by result (applied, invalid).",
            ["result"],
        )

    def observe_server_request(self, method: str, outcome: str) -> None:
        """One request a server made of an agent during its call (``bridge.relay``)."""
        shown = method if method in RELAYED_METHODS else "other"
        self.server_requests.labels(shown, outcome).inc()

    def observe_call(self, audit: AuditRecord) -> None:
        server = audit.server or UNKNOWN
        tool = audit.tool if audit.server is not None else UNKNOWN
        self._call_counts(server, tool, audit.outcome).inc()
        self._call_durations(server).observe(audit.duration_ms / 1000.0)

    def observe_listing(self, server: str, ok: bool) -> None:
        self.listings.labels(server, "ok" if ok else "failed").inc()
        self.upstream_up.labels(server).set(1 if ok else 0)

    def observe_problem(self, server: str, reason: Misconfiguration | None) -> None:
        """A server was configured: whether it can be called at all, and if not, why."""
        for each in MISCONFIGURATIONS:
            self.misconfigured.labels(server, each).set(1 if each == reason else 0)
        if reason is not None:
            self.upstream_up.labels(server).set(0)

    def forget_server(self, server: str) -> None:
        """A server left the configuration: drop its availability series."""
        with contextlib.suppress(KeyError):
            self.upstream_up.remove(server)
        for reason in MISCONFIGURATIONS:
            with contextlib.suppress(KeyError):
                self.misconfigured.remove(server, reason)
