"""The legacy Streamable HTTP session endpoint: POST, GET and DELETE with ``Mcp-Session-Id``.

Owns the handshake-era wire: ``initialize`` answered from the child's own
InitializeResult and a session opened for it, the session header on every
later request (400 without it, 404 for an unknown one), notifications and
answers to server requests (202), requests handed to the call forwarder,
the session's GET stream (one at a time) and DELETE. Leaves the Host/Origin
checks and the choice of era to ``front``, and the answer of a call to
``front_calls``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from mcp_types import methods as _methods
from mcp_types.jsonrpc import INVALID_PARAMS, INVALID_REQUEST
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import ValidationError

from mcp_operator.adapter.front_calls import ForwardingEndpoint, unavailable
from mcp_operator.adapter.sessions import declared_capabilities, open_session
from mcp_operator.serve import era
from mcp_operator.serve.asgi import Receive, Send, respond_json, respond_plain
from mcp_operator.serve.endpoint import session_stream
from mcp_operator.serve.jsonrpc import dumps, error_response, read_json
from mcp_operator.serve.sessions import SessionLimitError

logger = logging.getLogger(__name__)

SESSION_HEADER = b"mcp-session-id"


class SessionEndpoint(ForwardingEndpoint):
    """The handshake-era MCP endpoint: one session per ``initialize``."""

    async def post(
        self, headers: dict[bytes, str], receive: Receive, send: Send, caller: str
    ) -> None:
        accept = headers.get(b"accept", "*/*")
        json_ok = "application/json" in accept or "*/*" in accept
        sse_ok = "text/event-stream" in accept
        if not json_ok and not sse_ok:
            await respond_plain(
                send, 406, b"Accept must include application/json or text/event-stream"
            )
            return
        ok, message = await read_json(headers, receive, send, self.config.max_body_bytes)
        if not ok:
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            text = (
                "Batches are not supported"
                if isinstance(message, list)
                else "Invalid JSON-RPC message"
            )
            await respond_json(send, 400, dumps(error_response(None, INVALID_REQUEST, text)))
            return
        method = message.get("method")
        if method == "initialize":
            await self._initialize(message, caller, send)
            return
        session_id = headers.get(b"mcp-session-id")
        if session_id is None:
            text = "Missing Mcp-Session-Id header"
            await respond_json(
                send, 400, dumps(error_response(message.get("id"), INVALID_REQUEST, text))
            )
            return
        now = time.monotonic()
        session = self.core.sessions.get(session_id, now)
        if session is None:
            await respond_json(
                send,
                404,
                dumps(error_response(message.get("id"), INVALID_REQUEST, "Session not found")),
            )
            return
        if method is None:
            if "id" in message and ("result" in message or "error" in message):
                self.core.answer(message, session)
                await respond_plain(send, 202, b"")
            else:
                await respond_json(
                    send,
                    400,
                    dumps(error_response(None, INVALID_REQUEST, "Invalid JSON-RPC message")),
                )
            return
        if not isinstance(method, str):
            await respond_json(
                send, 400, dumps(error_response(None, INVALID_REQUEST, "Invalid method"))
            )
            return
        request_id = message.get("id")
        if request_id is None:
            self.core.notify(message, session)
            await respond_plain(send, 202, b"")
            return
        if not isinstance(request_id, str | int) or isinstance(request_id, bool):
            await respond_json(
                send, 400, dumps(error_response(None, INVALID_REQUEST, "Invalid request id"))
            )
            return
        session.open_requests += 1
        try:
            await self._forwarder.forward(
                message, session, json_ok, sse_ok, receive, send, modern=None
            )
        finally:
            session.open_requests -= 1
            session.last_active = time.monotonic()

    async def _initialize(self, message: dict[str, Any], caller: str, send: Send) -> None:
        request_id = message.get("id")
        params = message.get("params")
        if request_id is None or not isinstance(params, dict):
            await respond_json(
                send, 400, dumps(error_response(request_id, INVALID_REQUEST, "Invalid initialize"))
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
            await respond_json(send, 400, dumps(error_response(request_id, INVALID_PARAMS, text)))
            return
        child_result = self.core.init_result
        if child_result is None or not self.core.alive:
            await unavailable(send, request_id)
            return
        result = era.initialize_result(child_result, requested)
        try:
            session, evicted = open_session(
                self.core.sessions,
                caller=caller,
                protocol_version=result["protocolVersion"],
                declared=declared_capabilities(params.get("capabilities")),
                now=time.monotonic(),
            )
        except SessionLimitError:
            await unavailable(send, request_id, "Too many sessions")
            return
        for old in evicted:
            logger.debug("Evicted idle session %s to make room for %s", old.id, session.id)
            self.core.end_session(old, "Session evicted to make room for a new one")
        logger.debug("Opened session %s", session.id)
        body = dumps({"jsonrpc": "2.0", "id": request_id, "result": result})
        await respond_json(send, 200, body, [(SESSION_HEADER, session.id.encode())])

    async def get(self, headers: dict[bytes, str], receive: Receive, send: Send) -> None:
        await session_stream(
            headers,
            receive,
            send,
            lookup=self.core.sessions.get,
            queue_limit=self.config.stream_queue,
            events=self.core.events,
        )

    async def delete(self, headers: dict[bytes, str], send: Send) -> None:
        session_id = headers.get(b"mcp-session-id")
        if session_id is None:
            await respond_plain(send, 400, b"Missing Mcp-Session-Id header")
            return
        session = self.core.sessions.remove(session_id)
        if session is None:
            await respond_plain(send, 404, b"Session not found")
            return
        self.core.end_session(session, "Session deleted by the client")
        logger.debug("Closed session %s", session.id)
        await respond_plain(send, 200, b"")
