"""The ASGI entry: dispatch by path, method and era; health, readiness and lifespan.

Owns which endpoint serves a request and nothing of what that endpoint does:
the MCP path goes, after the Host/Origin checks (DNS rebinding protection),
to the 2026-07-28 endpoint (``front_modern``) when ``MCP-Protocol-Version``
names no handshake-era version, else to the legacy session endpoint
(``front_legacy``) by method; the ``--sse`` paths go to the legacy HTTP+SSE
transport (``front_sse``); ``/healthz`` and ``/readyz`` report the core's
truth, ``/metrics`` its Prometheus metrics (``metrics``); the lifespan
starts and stops the core. A plain ASGI app, no framework: every request goes
through ``HttpFront.__call__``.

The hot path (a legacy ``tools/call`` POST) decodes the body once, hands it
to the router, writes one line to the child and answers ``application/json``
when the client accepts it (``front_calls``).
"""

from __future__ import annotations

from mcp_operator.adapter.core import AdapterCore
from mcp_operator.adapter.front_calls import CallForwarder
from mcp_operator.adapter.front_legacy import SessionEndpoint
from mcp_operator.adapter.front_modern import StatelessEndpoint
from mcp_operator.adapter.front_sse import SseTransport
from mcp_operator.serve.asgi import (
    Receive,
    Scope,
    Send,
    request_headers,
    respond_json,
    respond_plain,
)
from mcp_operator.serve.endpoint import route
from mcp_operator.serve.hosts import HostPolicy
from mcp_operator.serve.jsonrpc import dumps


class HttpFront:
    """The ASGI application."""

    def __init__(self, core: AdapterCore) -> None:
        self.core = core
        self.config = core.config
        self.policy = HostPolicy(core.config.allowed_hosts, core.config.allowed_origins)
        self._path = core.config.path
        self._sse_paths = (
            (core.config.sse_path, core.config.messages_path) if core.config.sse else ()
        )
        forwarder = CallForwarder(core)
        self._legacy = SessionEndpoint(core, forwarder)
        self._modern = StatelessEndpoint(core, forwarder)
        self._sse = SseTransport(core)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            path = scope["path"]
            if path == self._path or path == self._path + "/":
                await self._mcp(scope, receive, send)
            elif path == "/healthz" or path == "/readyz":
                await self._health(path, send)
            elif path == "/metrics":
                await respond_plain(send, 200, self.core.metrics.exposition())
            elif path in self._sse_paths:
                await self._legacy_sse(path, scope, receive, send)
            else:
                await respond_plain(send, 404, b"Not Found")
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.core.start()
                except Exception as error:
                    await send({"type": "lifespan.startup.failed", "message": str(error)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.core.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _health(self, path: str, send: Send) -> None:
        core = self.core
        child = core.supervisor.child
        ok = core.alive if path == "/healthz" else core.ready
        body = {
            "status": "ok" if ok else "unavailable",
            "child": {
                "running": core.alive,
                "ready": core.ready,
                "pid": child.pid if child is not None else None,
                "restarts": core.supervisor.restart_count,
            },
            "sessions": len(core.sessions),
            "inflight": core.inflight,
        }
        await respond_json(send, 200 if ok else 503, dumps(body))

    async def _mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        await route(
            scope,
            receive,
            send,
            policy=self.policy,
            stateless=self._modern.handle,
            sessions=self._legacy,
        )

    async def _legacy_sse(self, path: str, scope: Scope, receive: Receive, send: Send) -> None:
        headers = request_headers(scope)
        if await self.policy.refused(headers, send):
            return
        if path == self.config.sse_path and scope["method"] == "GET":
            await self._sse.stream(scope, receive, send)
        elif path == self.config.messages_path and scope["method"] == "POST":
            await self._sse.message(scope, headers, receive, send)
        else:
            await respond_plain(send, 405, b"Method Not Allowed")
