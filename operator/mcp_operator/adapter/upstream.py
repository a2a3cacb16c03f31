"""The authenticating front of an HTTP-native MCP server in the same Pod (``--upstream-url``).

Owns the adapter's other mode: no stdio child, but a server of the Pod that speaks Streamable
HTTP (or the legacy HTTP+SSE transport) itself on a loopback port. Every request to the MCP
path passes exactly the checks of the stdio mode — the Host/Origin policy, then the
authentication gate (``serve.auth.gate``: 401/403 before the body is read) — and is then
forwarded on the house's HTTP/1.1 pool (``net.pool``, loopback only) with the hop-by-hop
headers and both credentials headers (``Authorization``, ``Mcp-Operator-Authorization``)
removed: the caller's token is never passed through (MCP authorization spec). The answer
streams back as it arrives — a JSON body or an event stream alike, chunk by chunk, never
buffered whole — until the upstream ends it or the client goes (then the upstream
connection is closed, not reused). A request body is read within ``--max-body-bytes``.

With tracing on (``OTEL_*``, :mod:`mcp_operator.tracing`), each forwarded JSON-RPC request
gets a SERVER span (its parent the caller's ``params._meta`` context, the HTTP header's a
link); the body is forwarded as it came, so the server continues the caller's context, and
the span's ``error.type`` is the HTTP status of an answer that is an HTTP error.

``/healthz`` is the front's own liveness; ``/readyz`` asks whether the upstream's port
accepts connections; ``/metrics`` and the RFC 9728 metadata are served as in stdio mode.
The server's own port must not be reachable from outside the Pod: the operator's
NetworkPolicy admits only the front's port (docs/adapter.md#authenticating-front).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any
from urllib.parse import urlsplit

from mcp_operator import tracing
from mcp_operator.adapter.audit import from_flag as audit_from_flag
from mcp_operator.adapter.audit import tool_of
from mcp_operator.adapter.config import AdapterConfig
from mcp_operator.adapter.metrics import METHODS, OTHER, AdapterMetrics
from mcp_operator.net.egress import EgressPolicy
from mcp_operator.net.http1 import Http1Error, Http1Response
from mcp_operator.net.pool import Http1Pool
from mcp_operator.serve.asgi import (
    BodyTooLargeError,
    ClientGoneError,
    Receive,
    Scope,
    Send,
    read_body,
    request_headers,
    respond_json,
    respond_plain,
    send_more,
    serve_lifespan,
    watching_disconnect,
)
from mcp_operator.serve.auth.caller import CURRENT_CALLER
from mcp_operator.serve.auth.gate import AuthGate
from mcp_operator.serve.auth.scrapers import MetricsAccess
from mcp_operator.serve.hosts import HostPolicy
from mcp_operator.serve.jsonrpc import dumps

logger = logging.getLogger("mcp_operator.adapter")

LOOPBACK = ("127.0.0.1", "::1", "localhost")

NOT_FORWARDED = frozenset(
    {
        b"host",
        b"authorization",
        b"mcp-operator-authorization",
        b"content-length",
        b"transfer-encoding",
        b"connection",
        b"keep-alive",
        b"te",
        b"trailer",
        b"upgrade",
        b"proxy-connection",
        b"proxy-authorization",
        b"expect",
    }
)
"""Request headers the front never forwards: the credentials, and what frames a hop."""

NOT_RETURNED = frozenset(
    {"transfer-encoding", "connection", "keep-alive", "trailer", "upgrade", "proxy-connection"}
)


def check_upstream_url(url: str) -> str | None:
    """Why ``url`` cannot be the front's upstream, or None: an ``http`` URL on loopback (the
    server in the same Pod; a front that forwards off the Pod would be an open proxy)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        return "--upstream-url must be an http:// URL"
    if parts.hostname not in LOOPBACK:
        return "--upstream-url must name the loopback address (the server in the same Pod)"
    if parts.username or parts.password or parts.query or parts.fragment:
        return "--upstream-url must have no credentials, query or fragment"
    return None


class UpstreamFront:
    """The ASGI application of the front mode."""

    def __init__(self, config: AdapterConfig, gate: AuthGate, metrics: AdapterMetrics) -> None:
        assert config.upstream_url is not None
        self.config = config
        self.gate = gate
        self.metrics = metrics
        self.metrics_access = MetricsAccess(config.metrics_access)
        self.policy = HostPolicy(config.allowed_hosts, config.allowed_origins)
        parts = urlsplit(config.upstream_url)
        self._upstream = config.upstream_url
        self._upstream_host = parts.netloc
        self._address = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._origin = f"http://{parts.netloc}"
        self._mcp_paths = {config.path, config.path + "/"}
        self._paths = set(self._mcp_paths)
        if config.sse:
            self._paths |= {config.sse_path, config.messages_path}
        self.pool = Http1Pool(egress=EgressPolicy(allow_loopback=True))
        self.audit = audit_from_flag(config.audit)
        self.forwarded = 0
        self.failed = 0
        self.inflight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            path = scope["path"]
            if path in self._paths:
                await self._forward(scope, receive, send)
            elif path == "/healthz":
                await self._health(send, ok=True)
            elif path == "/readyz":
                await self._health(send, ok=await self._upstream_accepts())
            elif path == "/metrics":
                await self.metrics_access.serve(scope, send, self.metrics.exposition)
            elif not await self.gate.serve_metadata(path, send):
                await respond_plain(send, 404, b"Not Found")
        elif kind == "lifespan":
            await serve_lifespan(receive, send, start=self.gate.prepare, stop=self.pool.aclose)

    async def _health(self, send: Send, *, ok: bool) -> None:
        body = {
            "status": "ok" if ok else "unavailable",
            "upstream": self._upstream,
            "auth": self.gate.mode,
            "inflight": self.inflight,
            "forwarded": self.forwarded,
            "upstreamFailures": self.failed,
        }
        await respond_json(send, 200 if ok else 503, dumps(body))

    async def _upstream_accepts(self) -> bool:
        try:
            async with asyncio.timeout(1.0):
                _, writer = await asyncio.open_connection(*self._address)
        except (OSError, TimeoutError):
            return False
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return True

    async def _forward(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = request_headers(scope)
        if await self.policy.refused(headers, send):
            return
        if self.gate.enabled and await self.gate.admit(scope, headers, send) is None:
            return
        try:
            body = await read_body(headers, receive, self.config.max_body_bytes)
        except BodyTooLargeError:
            limit = self.config.max_body_bytes
            await respond_plain(send, 413, f"Request body over {limit} bytes".encode())
            return
        except ClientGoneError:
            return
        outgoing = {"host": self._upstream_host}
        for name, value in scope["headers"]:
            if name not in NOT_FORWARDED:
                outgoing[name.decode("latin-1")] = value.decode("latin-1")
        path = scope["path"]
        target = self._upstream if path in self._mcp_paths else self._origin + path
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        message = _message(body) if scope["method"] == "POST" else None
        label = _label(message) if scope["method"] == "POST" else None
        status: int | None = None
        started = time.perf_counter()
        self.inflight += 1

        async def relay() -> dict[str, Any]:
            nonlocal status
            status = await self._relay(scope, target, outgoing, body, receive, send)
            return {} if status is not None and status < 400 else {"error": {"code": status or 502}}

        try:
            if tracing.ENABLED and _is_request(message):
                assert message is not None
                tracing.HEADERS.set(scope["headers"])  # the header context: a link of its span
                await tracing.serve(
                    message["method"],
                    message.get("params"),
                    relay(),
                    request_id=message["id"],
                    session_id=headers.get(b"mcp-session-id"),
                )
            else:
                await relay()
        finally:
            self.inflight -= 1
            seconds = time.perf_counter() - started
            if label is not None:
                self.metrics.call_counts(label, "forwarded").inc()
                self.metrics.call_durations(label).observe(seconds)
            if self.audit is not None and label == "tools/call" and message is not None:
                tool, digest = tool_of(message)
                caller = CURRENT_CALLER.get()
                self.audit.write(caller, tool, digest, "forwarded", seconds, status or 502)

    async def _relay(
        self,
        scope: Scope,
        target: str,
        outgoing: dict[str, str],
        body: bytes,
        receive: Receive,
        send: Send,
    ) -> int | None:
        """Forward one request and stream its answer back; the upstream's HTTP status, or
        ``None`` when it did not answer (the client got 502)."""
        try:
            async with asyncio.timeout(self.config.request_timeout_seconds):
                answer = await self.pool.request(scope["method"], target, outgoing, body)
        except (Http1Error, TimeoutError, OSError, ValueError) as error:
            self.failed += 1
            logger.warning("Failed to forward a request to %s: %s", self._upstream, error)
            await respond_plain(send, 502, b"The MCP server in this Pod did not answer")
            return None
        self.forwarded += 1
        await self._stream(answer, scope, receive, send)
        return answer.status_code

    async def _stream(
        self, answer: Http1Response, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """The upstream's answer, head then body chunks as they arrive, until its end or the
        client's disconnect (then the upstream connection is closed, never reused)."""
        pump = asyncio.create_task(self._pump(answer, send))

        def gone() -> None:
            pump.cancel()

        try:
            with watching_disconnect(scope, receive, gone):
                await asyncio.wait({pump})
        finally:
            if not pump.done():
                pump.cancel()
        if pump.cancelled() or pump.exception() is not None:
            answer.discard()
        else:
            await answer.aclose()

    @staticmethod
    async def _pump(answer: Http1Response, send: Send) -> None:
        head = [
            (name.encode("latin-1"), value.encode("latin-1"))
            for name, value in answer.headers.items()
            if name not in NOT_RETURNED
        ]
        await send({"type": "http.response.start", "status": answer.status_code, "headers": head})
        async for chunk in answer.aiter_bytes():
            if chunk:
                await send_more(send, chunk)
        await send({"type": "http.response.body", "body": b""})


def _is_request(message: dict[str, Any] | None) -> bool:
    """Whether ``message`` is a JSON-RPC request (a method and an id): what gets a span."""
    return (
        message is not None
        and isinstance(message.get("method"), str)
        and isinstance(message.get("id"), str | int)
    )


def _message(body: bytes) -> dict[str, Any] | None:
    """The decoded JSON-RPC message of a POST body (for the metrics' label and the audit
    line), or None; the front forwards the bytes as they came."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _label(message: dict[str, Any] | None) -> str:
    method = message.get("method") if message is not None else None
    return method if isinstance(method, str) and method in METHODS else OTHER
