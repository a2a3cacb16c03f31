"""Which protocol era an incoming MCP request speaks, and whether a 2026 request is well formed.

Owns two decisions that every server side (adapter, bridge) makes the same
way, as the SDK's own server makes them:

- **the era**: an ``MCP-Protocol-Version`` header that names no handshake-era
  version selects the stateless 2026-07-28 entry; everything else is the
  legacy session protocol (``is_modern``);
- **a 2026 request's admission**: the body is a single JSON-RPC request or
  notification object, the routing headers appear once, and the SDK's
  inbound ladder passes (envelope in ``params._meta``, headers that agree
  with the body, a served version). The outcome is a value, not a response:
  an accepted call, an accepted notification, or a refusal with its HTTP
  status (``classify_modern``). Pure: no I/O.

Leaves what each era answers (``initialize``, ``server/discover``, results)
to the server that serves it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
    unsupported_protocol_version_rejection,
)
from mcp_types.jsonrpc import HEADER_MISMATCH, INVALID_REQUEST
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from mcp_operator.serve.jsonrpc import RequestId, error_response


def is_modern(version: str | None) -> bool:
    """Whether an ``MCP-Protocol-Version`` header routes the request to the stateless era.

    Mirrors the SDK's session manager: a header naming anything but a
    handshake version (unknown values included) goes to the 2026 entry, whose
    ladder rejects what it does not serve.
    """
    return version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS


@dataclass(frozen=True, slots=True)
class ModernCall:
    """A 2026-07-28 request that passed every check: serve it."""

    request_id: RequestId
    method: str
    protocol_version: str
    """The revision the request's envelope names (one the server supports)."""


@dataclass(frozen=True, slots=True)
class ModernNotification:
    """A 2026-07-28 notification at a served version: accept it (202)."""

    method: str


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request refused before it is served: the HTTP status and the JSON-RPC error to send."""

    status: int
    message: dict[str, Any]


def classify_modern(
    body: Any, version_header: str, raw_headers: Iterable[tuple[bytes, bytes]]
) -> ModernCall | ModernNotification | Refusal:
    """Admit or refuse a decoded 2026-07-28 POST body.

    ``version_header`` is the request's ``MCP-Protocol-Version``; ``raw_headers``
    are the ASGI header pairs (every copy, so that a duplicated routing header
    is seen).
    """
    if isinstance(body, dict) and "id" not in body:
        method = body.get("method")
        if not isinstance(method, str):
            return _invalid_body()
        rejection = unsupported_protocol_version_rejection(version_header)
        if rejection is not None:
            return refusal(rejection, None)
        return ModernNotification(method)
    request_id = body.get("id") if isinstance(body, dict) else None
    if (
        not isinstance(body, dict)
        or body.get("jsonrpc") != "2.0"
        or not isinstance(body.get("method"), str)
        or not isinstance(request_id, str | int)
        or isinstance(request_id, bool)
        or ("params" in body and not isinstance(body["params"], dict))
    ):
        return _invalid_body()
    # Optional whitespace around a field value is not part of it (RFC 9110 §5.5).
    headers = [(k.decode("latin-1"), v.decode("latin-1").strip(" \t")) for k, v in raw_headers]
    duplicated = find_duplicated_routing_header(headers)
    if duplicated is not None:
        rejection = InboundLadderRejection(
            code=HEADER_MISMATCH, message=f"{duplicated} header appears more than once"
        )
        return refusal(rejection, request_id)
    verdict = classify_inbound_request(body, headers=dict(headers))
    if isinstance(verdict, InboundLadderRejection):
        return refusal(verdict, request_id)
    return ModernCall(request_id, body["method"], verdict.protocol_version)


def refusal(rejection: InboundLadderRejection, request_id: RequestId | None) -> Refusal:
    """The answer to a failed rung of the SDK's inbound ladder."""
    error: dict[str, Any] = {"code": rejection.code, "message": rejection.message}
    if rejection.data is not None:
        error["data"] = rejection.data
    message = {"jsonrpc": "2.0", "id": request_id, "error": error}
    return Refusal(ERROR_CODE_HTTP_STATUS.get(rejection.code, 400), message)


def _invalid_body() -> Refusal:
    text = "Body must be a single JSON-RPC request or notification object"
    return Refusal(400, error_response(None, INVALID_REQUEST, text))
