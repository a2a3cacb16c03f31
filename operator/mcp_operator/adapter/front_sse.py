"""The legacy HTTP+SSE transport (``--sse``): a GET stream per session, POSTs to a message path.

Owns the 2024-11-05 wire: the ``endpoint`` event that names the message
path with the session id, a session that lives as long as its stream,
``initialize`` answered on the stream, and every answer and related message
written to that stream (a POST only gets 202), each call expiring after the
request timeout. Leaves the Host/Origin checks and the path dispatch to
``front``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import parse_qs

from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_REQUEST

from mcp_operator.adapter.core import AdapterCore
from mcp_operator.adapter.router import RouterFullError
from mcp_operator.adapter.sessions import declared_capabilities, open_session
from mcp_operator.serve import era
from mcp_operator.serve.asgi import Receive, Scope, Send, respond_json, respond_plain
from mcp_operator.serve.jsonrpc import dumps, error_response, read_json
from mcp_operator.serve.sessions import CallerKey, SessionLimitError
from mcp_operator.serve.sse import SSE_HEADERS, SseStream, pump


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

    def ask(self, message: dict[str, Any]) -> bool:
        return False  # a legacy session's requests go through ``related``


class SseTransport:
    """The legacy HTTP+SSE transport's two paths: the stream and the message endpoint."""

    def __init__(self, core: AdapterCore, caller_key: CallerKey) -> None:
        self.core = core
        self.config = core.config
        self._caller_key = caller_key

    async def stream(
        self, scope: Scope, headers: dict[bytes, str], receive: Receive, send: Send
    ) -> None:
        core = self.core
        try:
            session, evicted = open_session(
                core.sessions,
                caller=self._caller_key(scope, headers),
                protocol_version="2024-11-05",
                declared=frozenset(),
                now=time.monotonic(),
            )
        except SessionLimitError:
            await respond_plain(send, 503, b"Too many sessions")
            return
        for old in evicted:
            core.end_session(old, "Session evicted to make room for a new one")
        stream = SseStream(self.config.stream_queue)
        session.stream = stream
        root = scope.get("root_path", "")
        endpoint = f"{root}{self.config.messages_path}?session_id={session.id}"
        stream.push_raw(b"event: endpoint\ndata: " + endpoint.encode() + b"\n\n")
        try:
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            await pump(stream, receive, send)
        finally:
            if core.sessions.remove(session.id) is not None:
                core.end_session(session, "SSE stream closed")

    async def message(
        self, scope: Scope, headers: dict[bytes, str], receive: Receive, send: Send
    ) -> None:
        core = self.core
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        session_id = (query.get("session_id") or query.get("sessionId") or [None])[0]
        session = core.sessions.get(session_id, time.monotonic()) if session_id else None
        if session is None or session.stream is None:
            await respond_plain(send, 404, b"Session not found")
            return
        stream = session.stream
        assert isinstance(stream, SseStream)
        ok, message = await read_json(headers, receive, send, self.config.max_body_bytes)
        if not ok:
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            await respond_json(
                send, 400, dumps(error_response(None, INVALID_REQUEST, "Invalid JSON-RPC message"))
            )
            return
        await respond_plain(send, 202, b"Accepted")
        method = message.get("method")
        request_id = message.get("id")
        if method is None:
            if request_id is not None:
                core.answer(message, session)
        elif request_id is None:
            core.notify(message, session)
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
            session.declared = declared_capabilities(params.get("capabilities"))
            stream.push({"jsonrpc": "2.0", "id": request_id, "result": result})
            return
        else:
            sink = _StreamCall(stream)
            try:
                call = core.submit_nowait(message, session, sink)
            except RouterFullError:
                stream.push(error_response(request_id, INTERNAL_ERROR, "Too many calls in flight"))
                return
            loop = asyncio.get_running_loop()
            sink.expiry = loop.call_later(
                self.config.request_timeout_seconds, self.core.cancel, call, "Request timed out"
            )
