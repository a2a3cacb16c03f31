"""The ASGI front: the MCP endpoint (both eras), the legacy SSE transport, health and readiness.

Owns everything HTTP: methods and status codes, the Host/Origin checks (DNS
rebinding protection), bounded bodies, JSON-or-SSE responses, session ids.
The hot path (a legacy ``tools/call`` POST) decodes the body once, hands it
to the router, writes one line to the child and answers ``application/json``
when the client accepts it; it upgrades to ``text/event-stream`` only when
the child says something about the call (progress, a server request) before
answering it. A plain ASGI app, no framework: every request goes through
``HttpFront.__call__``.

Era routing mirrors the SDK's session manager: an ``MCP-Protocol-Version``
header that names no handshake-era version selects the stateless 2026-07-28
entry; everything else is the legacy session protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
    unsupported_protocol_version_rejection,
)
from mcp_types import methods as _methods
from mcp_types.jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import ValidationError

from mcp_operator.adapter import era
from mcp_operator.adapter.child import ChildUnavailableError
from mcp_operator.adapter.core import AdapterCore
from mcp_operator.adapter.router import RouterFullError, error_response
from mcp_operator.adapter.sessions import Session, SessionLimitError

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

SESSION_HEADER = b"mcp-session-id"
KEEPALIVE_SECONDS = 15.0
_LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1")
_JSON = [(b"content-type", b"application/json")]
_SSE = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
_WANTED = frozenset(
    {
        b"host",
        b"origin",
        b"accept",
        b"content-type",
        b"content-length",
        b"mcp-session-id",
        b"mcp-protocol-version",
    }
)


def _dumps(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()


def _sse_event(message: Any, event: str = "message") -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + _dumps(message) + b"\n\n"


class _BodyTooLargeError(Exception):
    pass


class _ClientGoneError(Exception):
    pass


# ---------------------------------------------------------------------------- sinks


class _Waitable:
    """A wake-up flag that a single waiter can await many times (cheaper than a Queue)."""

    __slots__ = ("_waiter",)

    def __init__(self) -> None:
        self._waiter: asyncio.Future[None] | None = None

    def wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def sleep(self, timeout: float | None) -> None:  # noqa: ASYNC109 - wait_for below
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            if timeout is None:
                await self._waiter
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._waiter, timeout)
        finally:
            self._waiter = None


class HttpCall(_Waitable):
    """The sink of one POSTed request: its final answer, and related messages if it may stream."""

    __slots__ = ("events", "final", "gone", "limit")

    def __init__(self, *, can_stream: bool, limit: int) -> None:
        super().__init__()
        self.gone = False
        self.final: dict[str, Any] | None = None
        self.events: deque[dict[str, Any]] | None = deque() if can_stream else None
        self.limit = limit

    def respond(self, message: dict[str, Any]) -> None:
        if self.final is None:
            self.final = message
            self.wake()

    def related(self, message: dict[str, Any]) -> bool:
        if self.events is None or self.final is not None or len(self.events) >= self.limit:
            return False
        self.events.append(message)
        self.wake()
        return True


class SseStream(_Waitable):
    """A session's standalone stream (GET, or the legacy SSE transport): bounded, closable."""

    __slots__ = ("closed", "limit", "queue")

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.queue: deque[bytes] = deque()
        self.closed = False
        self.limit = limit

    def push(self, message: dict[str, Any]) -> bool:
        return self.push_raw(_sse_event(message))

    def push_raw(self, frame: bytes) -> bool:
        if self.closed:
            return False
        if len(self.queue) >= self.limit:
            logger.warning("Closed an SSE stream that fell %d messages behind", self.limit)
            self.close()
            return False
        self.queue.append(frame)
        self.wake()
        return True

    def close(self) -> None:
        self.closed = True
        self.wake()


class _StreamCall:
    """A request's sink on the legacy SSE transport: everything goes onto the session stream."""

    __slots__ = ("expiry", "stream")

    def __init__(self, stream: SseStream) -> None:
        self.stream = stream
        self.expiry: asyncio.TimerHandle | None = None
        """The request-timeout timer; cancelled with the answer so finished calls are freed."""

    def respond(self, message: dict[str, Any]) -> None:
        if self.expiry is not None:
            self.expiry.cancel()
        self.stream.push(message)

    def related(self, message: dict[str, Any]) -> bool:
        return self.stream.push(message)


# ---------------------------------------------------------------------------- host checks


def _bracket_ipv6(pattern: str) -> str:
    """``fd00::5`` -> ``[fd00::5]``: the form a Host header carries an IPv6 address in
    (a Pod IP passed as ``--allowed-host=$(POD_IP)`` on an IPv6 cluster, say)."""
    if pattern.count(":") >= 2 and not pattern.startswith("["):
        return f"[{pattern}]"
    return pattern


class HostPolicy:
    """DNS rebinding protection: which Host and Origin headers are accepted (results cached)."""

    def __init__(self, allowed_hosts: tuple[str, ...], allowed_origins: tuple[str, ...]) -> None:
        self._any_host = "*" in allowed_hosts
        self._hosts = tuple(
            _bracket_ipv6(h.lower()) for h in (*_LOCAL_HOSTS, *allowed_hosts) if h != "*"
        )
        self._origins = tuple(o.lower().rstrip("/") for o in allowed_origins)
        self._host_cache: dict[str, bool] = {}
        self._origin_cache: dict[str, bool] = {}

    def host_ok(self, host: str | None) -> bool:
        if self._any_host:
            return True
        if host is None:
            return False
        cached = self._host_cache.get(host)
        if cached is None:
            cached = self._match_host(host.lower())
            if len(self._host_cache) < 1024:
                self._host_cache[host] = cached
        return cached

    def _match_host(self, host: str) -> bool:
        name = host
        if host.startswith("["):
            name = host[: host.find("]") + 1] if "]" in host else host
        elif host.count(":") == 1:
            name = host.rsplit(":", 1)[0]
        for pattern in self._hosts:
            target = (
                host
                if (":" in pattern and not pattern.startswith("[")) or "]:" in pattern
                else name
            )
            if target == pattern or ("*" in pattern and fnmatch.fnmatchcase(target, pattern)):
                return True
        return False

    def origin_ok(self, origin: str | None) -> bool:
        if origin is None:
            return True
        cached = self._origin_cache.get(origin)
        if cached is None:
            cached = self._match_origin(origin.lower().rstrip("/"))
            if len(self._origin_cache) < 1024:
                self._origin_cache[origin] = cached
        return cached

    def _match_origin(self, origin: str) -> bool:
        if any(o == origin or ("*" in o and fnmatch.fnmatchcase(origin, o)) for o in self._origins):
            return True
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False
        return self._match_host(parts.netloc)


# ---------------------------------------------------------------------------- the app


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

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            path = scope["path"]
            if path == self._path or path == self._path + "/":
                await self._mcp(scope, receive, send)
            elif path == "/healthz" or path == "/readyz":
                await self._health(path, send)
            elif path in self._sse_paths:
                await self._legacy_sse(path, scope, receive, send)
            else:
                await _plain(send, 404, b"Not Found")
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
            "inflight": len(core.router.pending),
        }
        await _respond(send, 200 if ok else 503, _dumps(body))

    # ------------------------------------------------------------------ the MCP endpoint

    async def _mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers: dict[bytes, str] = {}
        for key, value in scope["headers"]:
            if key in _WANTED:
                headers[key] = value.decode("latin-1")
        if await self._refused(headers, send):
            return
        method = scope["method"]
        if era.is_modern(headers.get(b"mcp-protocol-version")):
            await self._modern(scope, headers, receive, send)
        elif method == "POST":
            await self._legacy_post(headers, receive, send)
        elif method == "GET":
            await self._legacy_get(headers, receive, send)
        elif method == "DELETE":
            await self._legacy_delete(headers, send)
        else:
            await _plain(send, 405, b"Method Not Allowed", [(b"allow", b"GET, POST, DELETE")])

    async def _read_json(
        self, headers: dict[bytes, str], receive: Receive, send: Send
    ) -> tuple[bool, Any]:
        """The decoded body, or (False, None) after answering 413/415/400 itself."""
        content_type = headers.get(b"content-type", "")
        if not content_type.lower().startswith("application/json"):
            await _plain(send, 415, b"Content-Type must be application/json")
            return False, None
        try:
            body = await _read_body(headers, receive, self.config.max_body_bytes)
        except _BodyTooLargeError:
            await _plain(send, 413, b"Request body too large")
            return False, None
        except _ClientGoneError:
            return False, None
        try:
            return True, json.loads(body)
        except (ValueError, RecursionError):
            await _respond(send, 400, _dumps(error_response(None, PARSE_ERROR, "Parse error")))
            return False, None

    async def _legacy_post(self, headers: dict[bytes, str], receive: Receive, send: Send) -> None:
        accept = headers.get(b"accept", "*/*")
        json_ok = "application/json" in accept or "*/*" in accept
        sse_ok = "text/event-stream" in accept
        if not json_ok and not sse_ok:
            await _plain(send, 406, b"Accept must include application/json or text/event-stream")
            return
        ok, message = await self._read_json(headers, receive, send)
        if not ok:
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            text = (
                "Batches are not supported"
                if isinstance(message, list)
                else "Invalid JSON-RPC message"
            )
            await _respond(send, 400, _dumps(error_response(None, INVALID_REQUEST, text)))
            return
        method = message.get("method")
        if method == "initialize":
            await self._initialize(message, headers, send)
            return
        session_id = headers.get(b"mcp-session-id")
        if session_id is None:
            text = "Missing Mcp-Session-Id header"
            await _respond(
                send, 400, _dumps(error_response(message.get("id"), INVALID_REQUEST, text))
            )
            return
        now = time.monotonic()
        session = self.core.sessions.get(session_id, now)
        if session is None:
            await _respond(
                send,
                404,
                _dumps(error_response(message.get("id"), INVALID_REQUEST, "Session not found")),
            )
            return
        if method is None:
            if "id" in message and ("result" in message or "error" in message):
                line = self.core.router.forward_response(message, session)
                if line is not None:
                    self.core.write_nowait(line)
                await _plain(send, 202, b"")
            else:
                await _respond(
                    send,
                    400,
                    _dumps(error_response(None, INVALID_REQUEST, "Invalid JSON-RPC message")),
                )
            return
        if not isinstance(method, str):
            await _respond(
                send, 400, _dumps(error_response(None, INVALID_REQUEST, "Invalid method"))
            )
            return
        request_id = message.get("id")
        if request_id is None:
            line = self.core.router.forward_notification(message, session)
            if line is not None:
                self.core.write_nowait(line)
            await _plain(send, 202, b"")
            return
        if not isinstance(request_id, str | int) or isinstance(request_id, bool):
            await _respond(
                send, 400, _dumps(error_response(None, INVALID_REQUEST, "Invalid request id"))
            )
            return
        session.open_requests += 1
        try:
            await self._forward(message, session, json_ok, sse_ok, receive, send, modern=None)
        finally:
            session.open_requests -= 1
            session.last_active = time.monotonic()

    async def _initialize(
        self, message: dict[str, Any], headers: dict[bytes, str], send: Send
    ) -> None:
        request_id = message.get("id")
        params = message.get("params")
        if request_id is None or not isinstance(params, dict):
            await _respond(
                send, 400, _dumps(error_response(request_id, INVALID_REQUEST, "Invalid initialize"))
            )
            return
        requested = params.get("protocolVersion")
        check_version = (
            requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
        )
        try:
            _methods.validate_client_request("initialize", str(check_version), params)
        except (ValidationError, KeyError, ValueError) as error:
            text = f"Invalid initialize params: {error.__class__.__name__}"
            await _respond(send, 400, _dumps(error_response(request_id, INVALID_PARAMS, text)))
            return
        child_result = self.core.init_result
        if child_result is None or not self.core.alive:
            await _unavailable(send, request_id)
            return
        capabilities = params.get("capabilities")
        client_info = params.get("clientInfo")
        result = era.initialize_result(child_result, requested)
        try:
            session = self.core.sessions.create(
                protocol_version=result["protocolVersion"],
                capabilities=capabilities if isinstance(capabilities, dict) else {},
                client_info=client_info if isinstance(client_info, dict) else None,
                now=time.monotonic(),
            )
        except SessionLimitError:
            await _unavailable(send, request_id, "Too many sessions")
            return
        logger.debug("Opened session %s for %s", session.id, client_info)
        body = _dumps({"jsonrpc": "2.0", "id": request_id, "result": result})
        await _respond(send, 200, body, [(SESSION_HEADER, session.id.encode())])

    async def _forward(
        self,
        message: dict[str, Any],
        session: Session | None,
        json_ok: bool,
        sse_ok: bool,
        receive: Receive,
        send: Send,
        *,
        modern: str | None,
    ) -> None:
        """Send a request to the child and answer: JSON, or SSE once something streams first."""
        core = self.core
        request_id = message["id"]
        method = message["method"]
        sink = HttpCall(can_stream=sse_ok, limit=self.config.stream_queue)
        try:
            call, line = core.router.forward_request(message, session, sink)
        except RouterFullError:
            await _unavailable(send, request_id, "Too many calls in flight")
            return
        try:
            await core.send(line)
        except ChildUnavailableError:
            core.router.cancel(call, "The MCP server is not running")
            await _unavailable(send, request_id)
            return
        watcher = (
            asyncio.create_task(_watch_disconnect(receive, sink)) if modern is not None else None
        )
        try:
            await self._await_answer(sink, call, send, json_ok, method, modern)
        finally:
            if watcher is not None:
                watcher.cancel()

    async def _await_answer(
        self, sink: HttpCall, call: Any, send: Send, json_ok: bool, method: str, modern: str | None
    ) -> None:
        core = self.core
        deadline = time.monotonic() + self.config.request_timeout_seconds
        while sink.final is None and not sink.events:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or sink.gone:
                break
            await sink.sleep(remaining)
        if sink.final is None and not sink.events:
            gone = sink.gone
            line = core.router.cancel(call, "Client disconnected" if gone else "Request timed out")
            if line is not None:
                core.write_nowait(line)
            if gone:
                return
            sink.final = error_response(
                call.client_id, REQUEST_TIMEOUT, "The MCP server did not answer in time"
            )
        if sink.final is not None and (json_ok or sink.events is None):
            status, body = self._final_body(sink.final, method, modern)
            await _respond(send, status, body)
            return
        # Something streamed before the answer (or the client takes only SSE): commit to SSE.
        await send({"type": "http.response.start", "status": 200, "headers": _SSE})
        try:
            while True:
                events = sink.events
                while events:
                    await _send_more(send, _sse_event(events.popleft()))
                if sink.final is not None:
                    break
                if sink.gone:
                    line = core.router.cancel(call, "Client disconnected")
                    if line is not None:
                        core.write_nowait(line)
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    line = core.router.cancel(call, "Request timed out")
                    if line is not None:
                        core.write_nowait(line)
                    text = "The MCP server did not answer in time"
                    sink.final = error_response(call.client_id, REQUEST_TIMEOUT, text)
                    break
                await sink.sleep(min(remaining, KEEPALIVE_SECONDS))
                if sink.final is None and not sink.events:
                    await _send_more(send, b": keepalive\n\n")
            _status, body = self._final_body(sink.final, method, modern)
            await send(
                {"type": "http.response.body", "body": b"event: message\ndata: " + body + b"\n\n"}
            )
        except _ClientGoneError:
            line = core.router.cancel(call, "Client disconnected")
            if line is not None:
                core.write_nowait(line)

    def _final_body(
        self, final: dict[str, Any], method: str, modern: str | None
    ) -> tuple[int, bytes]:
        if modern is None:
            return 200, _dumps(final)
        error = final.get("error")
        if isinstance(error, dict):
            return ERROR_CODE_HTTP_STATUS.get(error.get("code"), 200), _dumps(final)  # type: ignore[arg-type]
        server_info = self.core.init_result.get("serverInfo") if self.core.init_result else None
        final["result"] = era.modern_result(method, modern, final.get("result"), server_info)
        return 200, _dumps(final)

    async def _legacy_get(self, headers: dict[bytes, str], receive: Receive, send: Send) -> None:
        if "text/event-stream" not in headers.get(b"accept", ""):
            await _plain(send, 406, b"Accept must include text/event-stream")
            return
        session_id = headers.get(b"mcp-session-id")
        if session_id is None:
            await _plain(send, 400, b"Missing Mcp-Session-Id header")
            return
        session = self.core.sessions.get(session_id, time.monotonic())
        if session is None:
            await _plain(send, 404, b"Session not found")
            return
        if session.stream is not None:
            await _plain(send, 409, b"Only one GET stream per session")
            return
        stream = SseStream(self.config.stream_queue)
        session.stream = stream
        try:
            await send({"type": "http.response.start", "status": 200, "headers": _SSE})
            await _pump(stream, receive, send)
        finally:
            if session.stream is stream:
                session.stream = None
            session.last_active = time.monotonic()

    async def _legacy_delete(self, headers: dict[bytes, str], send: Send) -> None:
        session_id = headers.get(b"mcp-session-id")
        if session_id is None:
            await _plain(send, 400, b"Missing Mcp-Session-Id header")
            return
        session = self.core.sessions.remove(session_id)
        if session is None:
            await _plain(send, 404, b"Session not found")
            return
        self.core.end_session(session, "Session deleted by the client")
        logger.debug("Closed session %s", session.id)
        await _plain(send, 200, b"")

    # ------------------------------------------------------------------ 2026-07-28

    async def _modern(
        self, scope: Scope, headers: dict[bytes, str], receive: Receive, send: Send
    ) -> None:
        """One self-contained request: no session, envelope in ``params._meta``, headers checked."""
        if scope["method"] != "POST":
            await _plain(send, 405, b"Method Not Allowed", [(b"allow", b"POST")])
            return
        accept = headers.get(b"accept", "*/*")
        json_ok = "application/json" in accept or "*/*" in accept
        sse_ok = "text/event-stream" in accept
        if not json_ok:
            await _plain(send, 406, b"Accept must include application/json")
            return
        ok, decoded = await self._read_json(headers, receive, send)
        if not ok:
            return
        version = headers.get(b"mcp-protocol-version", "")
        if isinstance(decoded, dict) and "id" not in decoded:
            if not isinstance(decoded.get("method"), str):
                await _respond(send, 400, _dumps(_invalid_body()))
                return
            rejection = unsupported_protocol_version_rejection(version)
            if rejection is not None:
                await _reject(send, rejection, None)
                return
            await _plain(send, 202, b"")  # 2026 defines no client notifications on this wire
            return
        request_id = decoded.get("id") if isinstance(decoded, dict) else None
        if (
            not isinstance(decoded, dict)
            or decoded.get("jsonrpc") != "2.0"
            or not isinstance(decoded.get("method"), str)
            or not isinstance(request_id, str | int)
            or isinstance(request_id, bool)
            or ("params" in decoded and not isinstance(decoded["params"], dict))
        ):
            await _respond(send, 400, _dumps(_invalid_body()))
            return
        method: str = decoded["method"]
        raw_headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        duplicated = find_duplicated_routing_header(raw_headers)
        if duplicated is not None:
            rejection = InboundLadderRejection(
                code=HEADER_MISMATCH, message=f"{duplicated} header appears more than once"
            )
            await _reject(send, rejection, request_id)
            return
        verdict = classify_inbound_request(decoded, headers=dict(raw_headers))
        if isinstance(verdict, InboundLadderRejection):
            await _reject(send, verdict, request_id)
            return
        child_result = self.core.init_result
        if child_result is None or not self.core.alive:
            await _unavailable(send, request_id)
            return
        if method == "server/discover":
            result = era.discover_result(child_result, verdict.protocol_version)
            await _respond(
                send, 200, _dumps({"jsonrpc": "2.0", "id": request_id, "result": result})
            )
            return
        if method in ("initialize", "subscriptions/listen") or method.startswith("notifications/"):
            text = f"Method not found: {method}"
            await _respond(send, 404, _dumps(error_response(request_id, METHOD_NOT_FOUND, text)))
            return
        if "params" in decoded:
            decoded["params"] = era.strip_envelope(decoded["params"])
        await self._forward(
            decoded, None, json_ok, sse_ok, receive, send, modern=verdict.protocol_version
        )

    async def _refused(self, headers: dict[bytes, str], send: Send) -> bool:
        """Answer 421 for a foreign Host or 403 for a foreign Origin (DNS rebinding)."""
        if not self.policy.host_ok(headers.get(b"host")):
            await _plain(send, 421, b"Invalid Host header")
            return True
        if not self.policy.origin_ok(headers.get(b"origin")):
            await _plain(send, 403, b"Invalid Origin header")
            return True
        return False

    # ------------------------------------------------------ legacy HTTP+SSE transport (--sse)

    async def _legacy_sse(self, path: str, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k: v.decode("latin-1") for k, v in scope["headers"] if k in _WANTED}
        if await self._refused(headers, send):
            return
        if path == self.config.sse_path and scope["method"] == "GET":
            await self._sse_stream(scope, receive, send)
        elif path == self.config.messages_path and scope["method"] == "POST":
            await self._sse_message(scope, headers, receive, send)
        else:
            await _plain(send, 405, b"Method Not Allowed")

    async def _sse_stream(self, scope: Scope, receive: Receive, send: Send) -> None:
        core = self.core
        try:
            session = core.sessions.create(
                protocol_version="2024-11-05",
                capabilities={},
                client_info=None,
                now=time.monotonic(),
            )
        except SessionLimitError:
            await _plain(send, 503, b"Too many sessions")
            return
        stream = SseStream(self.config.stream_queue)
        session.stream = stream
        root = scope.get("root_path", "")
        endpoint = f"{root}{self.config.messages_path}?session_id={session.id}"
        stream.push_raw(b"event: endpoint\ndata: " + endpoint.encode() + b"\n\n")
        try:
            await send({"type": "http.response.start", "status": 200, "headers": _SSE})
            await _pump(stream, receive, send)
        finally:
            if core.sessions.remove(session.id) is not None:
                core.end_session(session, "SSE stream closed")

    async def _sse_message(
        self, scope: Scope, headers: dict[bytes, str], receive: Receive, send: Send
    ) -> None:
        core = self.core
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        session_id = (query.get("session_id") or query.get("sessionId") or [None])[0]
        session = core.sessions.get(session_id, time.monotonic()) if session_id else None
        if session is None or session.stream is None:
            await _plain(send, 404, b"Session not found")
            return
        stream = session.stream
        assert isinstance(stream, SseStream)
        ok, message = await self._read_json(headers, receive, send)
        if not ok:
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            await _respond(
                send, 400, _dumps(error_response(None, INVALID_REQUEST, "Invalid JSON-RPC message"))
            )
            return
        await _plain(send, 202, b"Accepted")
        method = message.get("method")
        request_id = message.get("id")
        if method is None:
            line = (
                core.router.forward_response(message, session) if request_id is not None else None
            )
        elif request_id is None:
            line = core.router.forward_notification(message, session)
        elif method == "initialize":
            raw_params = message.get("params")
            params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
            if core.init_result is None:
                stream.push(
                    error_response(request_id, INTERNAL_ERROR, "The MCP server is not ready")
                )
                return
            result = era.initialize_result(core.init_result, params.get("protocolVersion"))
            session.protocol_version = result["protocolVersion"]
            caps = params.get("capabilities")
            session.capabilities = caps if isinstance(caps, dict) else {}
            stream.push({"jsonrpc": "2.0", "id": request_id, "result": result})
            return
        else:
            sink = _StreamCall(stream)
            try:
                call, line = core.router.forward_request(message, session, sink)
            except RouterFullError:
                stream.push(error_response(request_id, INTERNAL_ERROR, "Too many calls in flight"))
                return
            loop = asyncio.get_running_loop()
            sink.expiry = loop.call_later(
                self.config.request_timeout_seconds, self._expire_call, call
            )
        if line is not None:
            core.write_nowait(line)

    def _expire_call(self, call: Any) -> None:
        if call.child_id in self.core.router.pending:
            line = self.core.router.cancel(call, "Request timed out")
            if line is not None:
                self.core.write_nowait(line)


# ---------------------------------------------------------------------------- helpers


def _invalid_body() -> dict[str, Any]:
    text = "Body must be a single JSON-RPC request or notification object"
    return error_response(None, INVALID_REQUEST, text)


async def _reject(send: Send, rejection: InboundLadderRejection, request_id: Any) -> None:
    error: dict[str, Any] = {"code": rejection.code, "message": rejection.message}
    if rejection.data is not None:
        error["data"] = rejection.data
    body = _dumps({"jsonrpc": "2.0", "id": request_id, "error": error})
    await _respond(send, ERROR_CODE_HTTP_STATUS.get(rejection.code, 400), body)


async def _read_body(headers: dict[bytes, str], receive: Receive, limit: int) -> bytes:
    length = headers.get(b"content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise _BodyTooLargeError
    message = await receive()
    if message["type"] == "http.disconnect":
        raise _ClientGoneError
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        if len(body) > limit:
            raise _BodyTooLargeError
        return body
    chunks = [body]
    size = len(body)
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _ClientGoneError
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _BodyTooLargeError
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _watch_disconnect(receive: Receive, sink: HttpCall) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            sink.gone = True
            sink.wake()
            return


async def _pump(stream: SseStream, receive: Receive, send: Send) -> None:
    """Write a stream's frames until it closes or the client goes away."""
    gone = asyncio.Event()

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()
        stream.wake()

    watcher = asyncio.create_task(watch())
    try:
        while not gone.is_set():
            while stream.queue:
                await _send_more(send, stream.queue.popleft())
            if stream.closed:
                break
            await stream.sleep(KEEPALIVE_SECONDS)
            if not stream.queue and not stream.closed and not gone.is_set():
                await _send_more(send, b": keepalive\n\n")
        with contextlib.suppress(Exception):
            await send({"type": "http.response.body", "body": b""})
    except _ClientGoneError:
        pass
    finally:
        watcher.cancel()


async def _send_more(send: Send, body: bytes) -> None:
    try:
        await send({"type": "http.response.body", "body": body, "more_body": True})
    except OSError as error:
        raise _ClientGoneError from error


async def _respond(
    send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [*_JSON, (b"content-length", str(len(body)).encode())]
    if extra:
        headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _plain(
    send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
    ]
    if extra:
        headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _unavailable(
    send: Send, request_id: Any, text: str = "The MCP server is not ready"
) -> None:
    body = _dumps(error_response(request_id, INTERNAL_ERROR, text))
    await _respond(send, 503, body, [(b"retry-after", b"1")])
