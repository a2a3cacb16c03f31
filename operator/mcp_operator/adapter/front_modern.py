"""The stateless 2026-07-28 endpoint: one self-contained POST per request, no session.

Owns what the adapter does with a request of the current revision once
``serve.era`` has admitted it (body shape, the SDK's inbound ladder): the
answers the adapter gives itself (``server/discover``; 404 for methods this
era does not have) and the envelope stripped before a legacy child sees it.
Leaves the Host/Origin checks and the choice of era to ``front``, and the
answer of a forwarded call (reshaped for this era) to ``front_calls``.
"""

from __future__ import annotations

from mcp_types.jsonrpc import METHOD_NOT_FOUND

from mcp_operator.adapter import era
from mcp_operator.adapter.core import AdapterCore
from mcp_operator.adapter.front_calls import CallForwarder, unavailable
from mcp_operator.serve.asgi import Receive, Scope, Send, respond_json, respond_plain
from mcp_operator.serve.endpoint import stateless_body
from mcp_operator.serve.era import ModernNotification, Refusal, classify_modern
from mcp_operator.serve.jsonrpc import dumps, error_response


class StatelessEndpoint:
    """The 2026-07-28 MCP endpoint."""

    def __init__(self, core: AdapterCore, forwarder: CallForwarder) -> None:
        self.core = core
        self.config = core.config
        self._forwarder = forwarder

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
        if method in ("initialize", "subscriptions/listen") or method.startswith("notifications/"):
            text = f"Method not found: {method}"
            await respond_json(send, 404, dumps(error_response(request_id, METHOD_NOT_FOUND, text)))
            return
        if "params" in decoded:
            decoded["params"] = era.strip_envelope(decoded["params"])
        await self._forwarder.forward(
            decoded, None, True, sse_ok, receive, send, modern=outcome.protocol_version
        )
