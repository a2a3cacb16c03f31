"""The stateless 2026-07-28 endpoint: one self-contained POST per request, no session.

Owns what the adapter does with a request of the current revision once
``serve.era`` has admitted it (body shape, the SDK's inbound ladder): the
answers the adapter gives itself (``server/discover``; 404 with ``-32601``
for methods this revision does not have, such as ``ping``,
``logging/setLevel`` and ``resources/subscribe``), the caller's envelope
(capabilities, log level) read and then stripped before a legacy child sees
it, and the retry of an input-required round (``requestState``, handed to
``front_rounds``). Leaves the Host/Origin checks and the choice of era to
``front``, and the answer of a forwarded call (reshaped for this era) to
``front_calls``.
"""

from __future__ import annotations

from typing import Any

from mcp_types import CLIENT_CAPABILITIES_META_KEY, LOG_LEVEL_META_KEY
from mcp_types import methods as _methods
from mcp_types.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND

from mcp_operator.adapter.front_calls import ForwardingEndpoint, unavailable
from mcp_operator.adapter.front_rounds import input_responses
from mcp_operator.adapter.records import Envelope
from mcp_operator.adapter.rounds import request_target
from mcp_operator.adapter.sessions import declared_capabilities
from mcp_operator.serve import era, listeners
from mcp_operator.serve.asgi import Receive, Scope, Send, respond_json, respond_plain
from mcp_operator.serve.endpoint import stateless_body
from mcp_operator.serve.era import ModernNotification, Refusal, classify_modern, refusal
from mcp_operator.serve.jsonrpc import dumps, error_response
from mcp_operator.serve.sse import SSE_HEADERS, SseStream, pump


class StatelessEndpoint(ForwardingEndpoint):
    """The 2026-07-28 MCP endpoint."""

    async def handle(
        self, scope: Scope, headers: dict[bytes, str], receive: Receive, send: Send
    ) -> None:
        """One self-contained request: no session, envelope in ``params._meta``, headers checked."""
        ok, decoded = await stateless_body(
            scope, headers, receive, send, self.config.max_body_bytes
        )
        if not ok:
            return
        sse_ok = "text/event-stream" in headers.get(b"accept", "*/*")
        outcome = classify_modern(
            decoded, headers.get(b"mcp-protocol-version", ""), scope["headers"]
        )
        if isinstance(outcome, Refusal):
            await respond_json(send, outcome.status, dumps(outcome.message))
            return
        if isinstance(outcome, ModernNotification):
            await respond_plain(send, 202, b"")  # 2026 defines no client notifications on this wire
            return
        request_id, method = outcome.request_id, outcome.method
        child_result = self.core.init_result
        if child_result is None or not self.core.alive:
            await unavailable(send, request_id)
            return
        if method == "server/discover":
            result = era.discover_result(child_result, outcome.protocol_version)
            await respond_json(
                send, 200, dumps({"jsonrpc": "2.0", "id": request_id, "result": result})
            )
            return
        version = outcome.protocol_version
        agreed = (
            listeners.honored(_filter(decoded), child_result.get("capabilities") or {})
            if method == "subscriptions/listen"
            else None
        )
        if (method, version) not in _methods.CLIENT_REQUESTS or agreed == {}:
            text = f"Method not found: {method}"
            await respond_json(send, 404, dumps(error_response(request_id, METHOD_NOT_FOUND, text)))
            return
        if agreed is not None:
            await self._listen(request_id, agreed, receive, send)
            return
        params: dict[str, Any] = decoded.get("params") or {}
        if method == "tools/call":
            mismatch = self.core.router.tool_headers.check(params, scope["headers"])
            if mismatch is not None:
                refused = refusal(mismatch, request_id)
                await respond_json(send, refused.status, dumps(refused.message))
                return
        envelope = _envelope(params)
        params = era.strip_envelope(params)
        decoded["params"] = params
        forwarder = self._forwarder
        if method in _methods.INPUT_REQUIRED_METHODS:
            valid, answers = input_responses(params)
            if not valid:
                text = "inputResponses must be an object whose values are results"
                invalid = dumps(error_response(request_id, INVALID_PARAMS, text))
                await respond_json(send, 400, invalid)
                return
            if "requestState" in params:
                resumed = await forwarder.rounds.resume(
                    request_id, method, params, answers, sse_ok, send
                )
                if resumed is not None:
                    call, sink, rounds = resumed
                    await forwarder.answer(
                        sink, call, receive, send, True, method, version, rounds, scope
                    )
                return
            envelope = Envelope(
                envelope.capabilities, envelope.log_level, answers, request_target(method, params)
            )
        await forwarder.forward(
            decoded,
            None,
            True,
            sse_ok,
            receive,
            send,
            modern=version,
            envelope=envelope,
            scope=scope,
        )

    async def _listen(
        self, request_id: Any, agreed: dict[str, Any], receive: Receive, send: Send
    ) -> None:
        """A ``subscriptions/listen`` stream: acknowledged first, then what it agreed to hear."""
        router = self.core.router
        if len(router.listeners) >= self.config.max_sessions:
            await unavailable(send, request_id, "Too many listen streams")
            return
        stream = SseStream(self.config.stream_queue)
        listener = listeners.Listener.for_filter(request_id, stream, agreed)
        for uri in listener.uris:
            self.core.subscribe_child(uri)
        stream.push(listener.acknowledgement(agreed))
        router.listeners.append(listener)
        try:
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            await pump(stream, receive, send)
        finally:
            if listener in router.listeners:
                router.listeners.remove(listener)


def _filter(decoded: dict[str, Any]) -> dict[str, Any]:
    params = decoded.get("params")
    requested = params.get("notifications") if isinstance(params, dict) else None
    return requested if isinstance(requested, dict) else {}


def _envelope(params: dict[str, Any]) -> Envelope:
    """The caller's declared capabilities and log level, from ``params._meta``."""
    meta = params.get("_meta")
    meta = meta if isinstance(meta, dict) else {}
    capabilities = meta.get(CLIENT_CAPABILITIES_META_KEY)
    level = meta.get(LOG_LEVEL_META_KEY)
    return Envelope(
        declared_capabilities(capabilities),  # names only: the caller's objects are not kept
        level if isinstance(level, str) else None,
    )
