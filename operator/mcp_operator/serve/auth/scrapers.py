"""Who may read ``/metrics`` of the adapter and the bridge: an authenticated, authorized scraper.

The metrics of a data-plane process name its tools, its callers' refusals and its upstreams'
health; the port serving them is reachable from other Pods (the kubelet probes ``/healthz``
and ``/readyz`` on it). With ``--metrics-access FILE`` a scrape must carry a Kubernetes
ServiceAccount token of the audience :data:`~mcp_operator.METRICS_AUDIENCE`, verified offline
against the cluster's issuer keys in ``FILE`` (the access configuration's format,
:mod:`~mcp_operator.serve.auth.access`, re-read when it changes) and issued to one of the
ServiceAccounts it permits (``allow.operators``: the platform's scrapers). The one verifier
and cache of the endpoints' callers (:class:`~mcp_operator.serve.auth.gate.AuthGate`) decides:
401 without a valid token, 403 for a scraper not listed. Health and readiness stay open.

Why offline and not a TokenReview and a SubjectAccessReview per scraper (kube-rbac-proxy):
the bridge runs under the tenant's ServiceAccount, with no API token of its own; the review
rights (``system:auth-delegator``) would hand that ServiceAccount, and every agent that
mounts its token, an oracle for any token of the cluster and its RBAC, and every sidecar
would call the API server. The issuer's keys are public and already distributed by the
operator; the list of scrapers is the platform's (the operator's ``--metrics-scrapers``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from mcp_operator.serve.asgi import Scope, Send, request_headers
from mcp_operator.serve.auth.access import AccessFile
from mcp_operator.serve.auth.gate import AuthGate
from mcp_operator.serve.metrics import respond_metrics


class MetricsAccess:
    """The ``/metrics`` endpoint of one process: open without a file (a process run by hand),
    else only for the scrapers the file permits."""

    def __init__(self, path: str | None, *, clock: Callable[[], float] = time.time) -> None:
        """Reads ``path`` at once: an unreadable or invalid file is fatal to the caller
        (:class:`~mcp_operator.serve.auth.access.AccessConfigError`)."""
        self.path = path
        self._gate = (
            AuthGate(
                "kubernetes",
                AccessFile(path, clock=time.monotonic),
                clock=clock,
                require_issuer=False,
            )
            if path is not None
            else None
        )

    @property
    def guarded(self) -> bool:
        return self._gate is not None

    async def serve(self, scope: Scope, send: Send, exposition: Callable[[], bytes]) -> None:
        """Answer a ``GET /metrics``: the exposition, or 401/403 from the gate."""
        gate = self._gate
        if gate is not None and await gate.admit(scope, request_headers(scope), send) is None:
            return
        await respond_metrics(send, exposition())
