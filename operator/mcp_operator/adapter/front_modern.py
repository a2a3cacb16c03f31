"""The stateless 2026-07-28 endpoint: one self-contained POST per request, no session.

Owns what the adapter does with a request of the current revision: the
body's shape, the SDK's inbound ladder (envelope in ``params._meta``,
routing headers that agree with the body, a served version), the answers
the adapter gives itself (``server/discover``; 404 for methods this era does
not have) and the envelope stripped before a legacy child sees the request.
Leaves the Host/Origin checks and the choice of era to ``front``, and the
answer of a forwarded call (reshaped for this era) to ``front_calls``.
"""

from __future__ import annotations

from typing import Any

from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
    unsupported_protocol_version_rejection,
)
from mcp_types.jsonrpc import HEADER_MISMATCH, INVALID_REQUEST, METHOD_NOT_FOUND

from mcp_operator.adapter import era
from mcp_operator.adapter.core import AdapterCore
from mcp_operator.adapter.front_calls import CallForwarder, unavailable
from mcp_operator.serve.asgi import Receive, Scope, Send, respond_json, respond_plain
from mcp_operator.serve.jsonrpc import dumps, error_response, read_json


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
        if scope["method"] != "POST":
            await respond_plain(send, 405, b"Method Not Allowed", [(b"allow", b"POST")])
            return
        accept = headers.get(b"accept", "*/*")
        json_ok = "application/json" in accept or "*/*" in accept
        sse_ok = "text/event-stream" in accept
        if not json_ok:
            await respond_plain(send, 406, b"Accept must include application/json")
            return
        ok, decoded = await read_json(headers, receive, send, self.config.max_body_bytes)
        if not ok:
            return
        version = headers.get(b"mcp-protocol-version", "")
        if isinstance(decoded, dict) and "id" not in decoded:
            if not isinstance(decoded.get("method"), str):
                await respond_json(send, 400, dumps(_invalid_body()))
                return
            rejection = unsupported_protocol_version_rejection(version)
            if rejection is not None:
                await _reject(send, rejection, None)
                return
            await respond_plain(send, 202, b"")  # 2026 defines no client notifications on this wire
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
            await respond_json(send, 400, dumps(_invalid_body()))
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
            await unavailable(send, request_id)
            return
        if method == "server/discover":
            result = era.discover_result(child_result, verdict.protocol_version)
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
            decoded, None, json_ok, sse_ok, receive, send, modern=verdict.protocol_version
        )


def _invalid_body() -> dict[str, Any]:
    text = "Body must be a single JSON-RPC request or notification object"
    return error_response(None, INVALID_REQUEST, text)


async def _reject(send: Send, rejection: InboundLadderRejection, request_id: Any) -> None:
    error: dict[str, Any] = {"code": rejection.code, "message": rejection.message}
    if rejection.data is not None:
        error["data"] = rejection.data
    body = dumps({"jsonrpc": "2.0", "id": request_id, "error": error})
    await respond_json(send, ERROR_CODE_HTTP_STATUS.get(rejection.code, 400), body)
