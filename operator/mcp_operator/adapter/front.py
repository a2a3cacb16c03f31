"""The ASGI entry: dispatch by path, method and era; health, readiness and lifespan.

Owns which endpoint serves a request and nothing of what that endpoint does:
the MCP path goes, after the Host/Origin checks (DNS rebinding protection),
to the 2026-07-28 endpoint (``front_modern``) when ``MCP-Protocol-Version``
names no handshake-era version, else to the legacy session endpoint
(``front_legacy``) by method; the ``--sse`` paths go to the legacy HTTP+SSE
transport (``front_sse``); every request to those paths first passes the
authentication gate (``serve.auth.gate``: 401/403 before the body is read), and in OIDC
mode ``/.well-known/oauth-protected-resource[/mcp]`` serves the RFC 9728 metadata;
``/healthz`` and ``/readyz`` report the core's
truth, ``/metrics`` its Prometheus metrics (``metrics``); the lifespan
starts and stops the core. A plain ASGI app, no framework: every request goes
through ``HttpFront.__call__``.

Every POST is admitted against the byte budget of bodies in flight
(``budget``) before its body is read: over the body limit → 413, over what
is left of the budget → 503 with ``Retry-After``; the reservation is held
until the request is answered. ``/readyz`` is 503 when the child is not
ready or when no new session could be opened (every slot busy).

The hot path (a legacy ``tools/call`` POST) decodes the body once, hands it
to the router, writes one line to the child and answers ``application/json``
when the client accepts it (``front_calls``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_REQUEST

from mcp_operator import tracing
from mcp_operator.adapter.auth import build_gate
from mcp_operator.adapter.budget import BodyBudget
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
    serve_lifespan,
)
from mcp_operator.serve.auth.caller import CURRENT_CALLER
from mcp_operator.serve.auth.gate import AuthGate, identity_key
from mcp_operator.serve.auth.scrapers import MetricsAccess
from mcp_operator.serve.endpoint import McpEndpoint
from mcp_operator.serve.hosts import HostPolicy
from mcp_operator.serve.jsonrpc import dumps, error_response
from mcp_operator.serve.sessions import CallerKey, client_address

NOT_FOUND = dumps(error_response(None, INVALID_REQUEST, "Session not found"))
BUDGET_SPENT = dumps(
    error_response(None, INTERNAL_ERROR, "Too many request bytes in flight; retry later")
)


class HttpFront:
    """The ASGI application."""

    def __init__(
        self,
        core: AdapterCore,
        caller_key: CallerKey | None = None,
        budget: BodyBudget | None = None,
        gate: AuthGate | None = None,
        metrics_access: MetricsAccess | None = None,
    ) -> None:
        """``caller_key`` names who asks, the key sessions are counted by (``serve.sessions``):
        by default the verified caller's identity, else the client's address. ``budget``: the
        byte budget to admit bodies against when fronts share one (the children of
        ``--child-per-session``), else one of its own. ``gate``: who may call
        (``serve.auth``), else built from the configuration's ``--auth``. ``metrics_access``:
        who may read ``/metrics``, else read from ``--metrics-access``."""
        self.core = core
        self.metrics_access = metrics_access or MetricsAccess(core.config.metrics_access)
        self.gate = gate if gate is not None else build_gate(core.config, core.metrics)
        active = self.gate if self.gate.enabled else None
        if caller_key is None:
            caller_key = identity_key if active is not None else client_address
        self.config = core.config
        self.policy = HostPolicy(core.config.allowed_hosts, core.config.allowed_origins)
        self._path = core.config.path
        self._sse_paths = (
            (core.config.sse_path, core.config.messages_path) if core.config.sse else ()
        )
        forwarder = CallForwarder(core)
        legacy = SessionEndpoint(core, forwarder)
        self._modern = StatelessEndpoint(core, forwarder)
        self._sse = SseTransport(core, caller_key)
        self.budget = budget or BodyBudget(
            limit_bytes=core.config.max_inflight_bytes,
            max_body_bytes=core.config.max_body_bytes,
        )
        self._too_large = (
            f"Request body too large: the limit is {core.config.max_body_bytes} bytes".encode()
        )
        self._endpoint = McpEndpoint(
            self.policy,
            self._stateless,
            _BudgetedSessions(legacy, self, bind=active is not None),
            caller_key,
            active,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            path = scope["path"]
            if path == self._path or path == self._path + "/":
                if tracing.ENABLED:  # the request's header context: a link of its span
                    tracing.HEADERS.set(scope["headers"])
                await self._endpoint(scope, receive, send)
            elif path == "/healthz" or path == "/readyz":
                await self._health(path, send)
            elif path == "/metrics":
                await self.metrics_access.serve(scope, send, self.core.metrics.exposition)
            elif path in self._sse_paths:
                await self._legacy_sse(path, scope, receive, send)
            elif not await self.gate.serve_metadata(path, send):
                await respond_plain(send, 404, b"Not Found")
        elif kind == "lifespan":
            await serve_lifespan(receive, send, start=self._start, stop=self.core.stop)

    async def _start(self) -> None:
        await self.gate.prepare()
        await self.core.start()

    async def _health(self, path: str, send: Send) -> None:
        core = self.core
        child = core.supervisor.child
        ok = core.alive if path == "/healthz" else core.ready and core.sessions.can_admit()
        body = {
            "status": "ok" if ok else "unavailable",
            "child": {
                "running": core.alive,
                "ready": core.ready,
                "pid": child.pid if child is not None else None,
                "restarts": core.supervisor.restart_count,
            },
            "auth": self.gate.mode,
            "sessions": len(core.sessions),
            "inflight": core.inflight,
            "limits": {
                "maxSessions": core.sessions.max_sessions,
                "sessionsEvicted": core.sessions.evicted,
                "inflightBytes": self.budget.in_use,
                "maxInflightBytes": self.budget.limit_bytes,
                "refusedForBytes": self.budget.refused,
                "replayStreams": len(core.events),
                "replayBytes": core.events.total_bytes,
                "maxReplayBytes": core.events.max_total_bytes,
            },
        }
        await respond_json(send, 200 if ok else 503, dumps(body))

    async def _stateless(
        self, scope: Scope, headers: dict[bytes, str], receive: Receive, send: Send
    ) -> None:
        await self.admitted(
            headers, send, lambda: self._modern.handle(scope, headers, receive, send)
        )

    async def admitted(
        self, headers: dict[bytes, str], send: Send, serve: Callable[[], Awaitable[None]]
    ) -> None:
        """Serve a request with a body within the byte budget, or answer 413/503 unread."""
        budget = self.budget
        cost = budget.cost(headers.get(b"content-length"))
        if cost is None or not budget.reserve(cost):
            await self.refuse(cost, send)
            return
        try:
            await serve()
        finally:
            budget.release(cost)

    async def refuse(self, cost: int | None, send: Send) -> None:
        """413 for a body over the limit (``cost`` None), else 503: the budget is spent."""
        if cost is None:
            await respond_plain(send, 413, self._too_large)
        else:
            await respond_json(send, 503, BUDGET_SPENT, [(b"retry-after", b"1")])

    async def _legacy_sse(self, path: str, scope: Scope, receive: Receive, send: Send) -> None:
        headers = request_headers(scope)
        if await self.policy.refused(headers, send):
            return
        if self.gate.enabled and await self.gate.admit(scope, headers, send) is None:
            return
        if path == self.config.sse_path and scope["method"] == "GET":
            await self._sse.stream(scope, headers, receive, send)
        elif path == self.config.messages_path and scope["method"] == "POST":
            await self.admitted(
                headers, send, lambda: self._sse.message(scope, headers, receive, send)
            )
        else:
            await respond_plain(send, 405, b"Method Not Allowed")


class _BudgetedSessions:
    """The legacy session endpoint with each POST admitted against the byte budget first.

    ``HttpFront.admitted`` written out: this is the hot path, one coroutine fewer. With
    authentication on (``bind``), a session is its opener's: a request naming another
    caller's session gets 404, as an unknown one does (a session id is no credential).
    """

    def __init__(self, endpoint: SessionEndpoint, front: HttpFront, *, bind: bool) -> None:
        self._endpoint = endpoint
        self._front = front
        self._budget = front.budget
        self._sessions = front.core.sessions
        self._bind = bind

    def _foreign(self, headers: dict[bytes, str]) -> bool:
        """Whether the request names a session another caller opened."""
        if not self._bind:
            return False
        session_id = headers.get(b"mcp-session-id")
        if session_id is None:
            return False
        owner = self._sessions.owner(session_id)
        return owner is not None and owner != CURRENT_CALLER.get().key

    async def post(
        self, headers: dict[bytes, str], receive: Receive, send: Send, caller: str
    ) -> None:
        if self._foreign(headers):
            await respond_json(send, 404, NOT_FOUND)
            return
        budget = self._budget
        cost = budget.cost(headers.get(b"content-length"))
        if cost is None or not budget.reserve(cost):
            await self._front.refuse(cost, send)
            return
        try:
            await self._endpoint.post(headers, receive, send, caller)
        finally:
            budget.release(cost)

    async def get(self, headers: dict[bytes, str], receive: Receive, send: Send) -> None:
        if self._foreign(headers):
            await respond_plain(send, 404, b"Session not found")
            return
        await self._endpoint.get(headers, receive, send)

    async def delete(self, headers: dict[bytes, str], send: Send) -> None:
        if self._foreign(headers):
            await respond_plain(send, 404, b"Session not found")
            return
        await self._endpoint.delete(headers, send)
