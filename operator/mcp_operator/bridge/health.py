"""Health, readiness and metrics of the bridge, on their own port for the kubelet.

``/healthz`` answers 200 while the process serves; ``/readyz`` 200 once the configuration is
loaded and every server's first listing is done, successful or not (an optional server that
is down must not keep the run from starting), else 503; both list every server (listed, up,
protocol, tools, and ``problem``: why a server cannot be called at all, such as a header value
it must not send); ``/metrics`` the Prometheus
exposition, to the scrapers ``--metrics-access`` permits (``serve.auth.scrapers``: 401 or 403
to anyone else, since other Pods reach this port too). This port listens on every address
(the kubelet probes the Pod IP), unlike the MCP endpoint. What ready means is the core's to
say.
"""

from __future__ import annotations

from mcp_operator.bridge.core import BridgeCore
from mcp_operator.serve.asgi import (
    Receive,
    Scope,
    Send,
    respond_json,
    respond_plain,
    serve_lifespan,
)
from mcp_operator.serve.auth.scrapers import MetricsAccess
from mcp_operator.serve.jsonrpc import dumps


class HealthApp:
    """The ASGI app of the health port."""

    def __init__(self, core: BridgeCore, scrapers: MetricsAccess | None = None) -> None:
        self.core = core
        self.scrapers = scrapers or MetricsAccess(None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await serve_lifespan(receive, send)
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path == "/metrics":
            await self.scrapers.serve(scope, send, self.core.metrics.exposition)
        elif path in ("/healthz", "/readyz"):
            await self._health(path, send)
        else:
            await respond_plain(send, 404, b"Not Found")

    async def _health(self, path: str, send: Send) -> None:
        core = self.core
        ok = True if path == "/healthz" else core.ready
        states = core.pool.states
        servers: dict[str, dict[str, object]] = {}
        for key, state in states.items():
            servers[key] = {
                "listed": state.listed_once,
                "up": state.up,
                "protocol": state.upstream.protocol_version,
                "tools": len(state.tools or ()),
            }
            if state.problem is not None:
                servers[key]["problem"] = state.problem.message
        body = {
            "status": "ok" if ok else "unavailable",
            "servers": servers,
            "tools": len(core.pipeline.catalog.entries),
            "sessions": len(core.sessions),
            "inflight": core.inflight,
        }
        await respond_json(send, 200 if ok else 503, dumps(body))
