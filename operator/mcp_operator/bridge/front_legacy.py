"""The legacy Streamable HTTP session endpoint of the bridge: POST, GET and DELETE.

Owns the handshake-era wire towards the agent: ``initialize`` answered by the bridge itself
(:func:`~mcp_operator.serve.era.initialize_result` of the bridge's own identity) with a new
``Mcp-Session-Id`` in the one session table (:mod:`~mcp_operator.serve.sessions`); that
header on every later request (400 without it, 404 for an unknown session); notifications
and answers accepted with 202; requests answered by
:meth:`~mcp_operator.bridge.core.BridgeCore.answer` as ``application/json``, a ``tools/call``
(``prompts/get``, ``resources/read``) by
:func:`~mcp_operator.bridge.front_relay.serve_legacy_call` (SSE once its upstream speaks of
it, resumable; the agent's answers to relayed requests and its ``notifications/cancelled`` go to
:func:`~mcp_operator.bridge.relay.agent_message`); one GET stream
per session, on which the bridge sends ``notifications/tools/list_changed``; DELETE ending
the session. Leaves the Host/Origin checks and the choice of era to
:mod:`~mcp_operator.bridge.front`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from mcp_types.jsonrpc import INVALID_REQUEST

from mcp_operator.bridge.core import BridgeCore
from mcp_operator.bridge.front_relay import RELAYED, serve_legacy_call
from mcp_operator.bridge.relay import BridgeSession, agent_message, end_session
from mcp_operator.serve import era
from mcp_operator.serve.asgi import Receive, Send, respond_json, respond_plain
from mcp_operator.serve.capabilities import declared_capabilities
from mcp_operator.serve.endpoint import session_stream
from mcp_operator.serve.jsonrpc import dumps, error_response, read_json
from mcp_operator.serve.sessions import SessionLimitError

logger = logging.getLogger(__name__)

SESSION_HEADER = b"mcp-session-id"
STREAM_QUEUE = 64
"""Messages a GET stream may fall behind before it is closed."""


async def _invalid(send: Send, status: int, request_id: Any, text: str) -> None:
    await respond_json(send, status, dumps(error_response(request_id, INVALID_REQUEST, text)))


class SessionEndpoint:
    """The handshake-era MCP endpoint: one session per ``initialize``."""

    def __init__(self, core: BridgeCore, max_body_bytes: int) -> None:
        self.core = core
        self.max_body_bytes = max_body_bytes

    async def post(
        self, headers: dict[bytes, str], receive: Receive, send: Send, caller: str
    ) -> None:
        accept = headers.get(b"accept", "*/*")
        if not any(kind in accept for kind in ("application/json", "*/*", "text/event-stream")):
            await respond_plain(
                send, 406, b"Accept must include application/json or text/event-stream"
            )
            return
        ok, message = await read_json(headers, receive, send, self.max_body_bytes)
        if not ok:
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            text = "Batches are not supported" if isinstance(message, list) else "Invalid JSON-RPC"
            await _invalid(send, 400, None, text)
            return
        method = message.get("method")
        request_id = message.get("id")
        if method == "initialize":
            await self._initialize(request_id, message.get("params"), caller, send)
            return
        session_id = headers.get(SESSION_HEADER)
        if session_id is None:
            await _invalid(send, 400, request_id, "Missing Mcp-Session-Id header")
            return
        session = self.core.sessions.get(session_id, time.monotonic())
        if session is None:
            await _invalid(send, 404, request_id, "Session not found")
            return
        if method is None or request_id is None:
            # A notification, or an answer to a server request relayed to the agent: accepted.
            agent_message(session, message)
            await respond_plain(send, 202, b"")
            return
        if (
            not isinstance(method, str)
            or not isinstance(request_id, str | int)
            or isinstance(request_id, bool)
        ):
            await _invalid(send, 400, None, "Invalid method or request id")
            return
        session.open_requests += 1
        try:
            if method in RELAYED:  # the upstream may speak of it: bridge.front_relay
                json_ok = "application/json" in accept or "*/*" in accept
                sse_ok = "text/event-stream" in accept
                params = message.get("params")
                await serve_legacy_call(
                    self.core, session, request_id, params, json_ok=json_ok, sse_ok=sse_ok,
                    send=send, method=method,
                )  # fmt: skip
                return
            response = await self.core.answer(request_id, method, message.get("params"), session.id)
        finally:
            session.open_requests -= 1
            session.last_active = time.monotonic()
        await respond_json(send, 200, dumps(response))

    async def _initialize(self, request_id: Any, params: Any, caller: str, send: Send) -> None:
        if request_id is None or not isinstance(params, dict):
            await _invalid(send, 400, request_id, "Invalid initialize")
            return
        result = era.initialize_result(self.core.initialize_result(), params.get("protocolVersion"))
        try:
            now = time.monotonic()
            version = result["protocolVersion"]
            declared = declared_capabilities(params.get("capabilities"))
            session, expired = self.core.sessions.create(
                lambda session_id: BridgeSession(
                    id=session_id, protocol_version=version, last_active=now, declared=declared
                ),
                caller=caller,
                now=now,
            )
        except SessionLimitError:
            body = dumps(error_response(request_id, INVALID_REQUEST, "Too many sessions"))
            await respond_json(send, 503, body, [(b"retry-after", b"1")])
            return
        for old in expired:
            end_session(old, "The session was ended to make room for a new one")
        logger.debug("Opened session %s", session.id)
        body = dumps({"jsonrpc": "2.0", "id": request_id, "result": result})
        await respond_json(send, 200, body, [(SESSION_HEADER, session.id.encode())])

    async def get(self, headers: dict[bytes, str], receive: Receive, send: Send) -> None:
        await session_stream(
            headers,
            receive,
            send,
            lookup=self.core.sessions.get,
            queue_limit=STREAM_QUEUE,
            events=self.core.events,
        )

    async def delete(self, headers: dict[bytes, str], send: Send) -> None:
        session_id = headers.get(SESSION_HEADER)
        if session_id is None:
            await respond_plain(send, 400, b"Missing Mcp-Session-Id header")
            return
        await self.core.aggregator.forget(session_id)
        session = self.core.sessions.remove(session_id)
        if session is None:
            await respond_plain(send, 404, b"Session not found")
            return
        end_session(session, "The client ended the session")
        self.core.events.drop_owner(session_id)
        await respond_plain(send, 200, b"")
