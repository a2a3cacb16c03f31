"""Protocol eras as our servers serve them: which era a request speaks, and what we answer.

The one module of per-era knowledge that every server side (adapter, bridge) shares, so
that both answer alike, as the SDK's own server does (its version registry, inbound
ladder and result surfaces are called, not copied). It owns:

- **the era**: an ``MCP-Protocol-Version`` header that names no handshake-era
  version selects the stateless 2026-07-28 entry; everything else is the
  legacy session protocol (``is_modern``);
- **a 2026 request's admission**: the body is a single JSON-RPC request or
  notification object, the routing headers appear once, and the SDK's
  inbound ladder passes (envelope in ``params._meta``, headers that agree
  with the body, a served version). The outcome is a value, not a response:
  an accepted call, an accepted notification, or a refusal with its HTTP
  status (``classify_modern``);
- **our own answers**: a legacy session's ``initialize`` result from the server's own
  InitializeResult (the adapter's child's, the bridge's) at the version negotiated per
  client (``negotiate_version``, ``initialize_result``), the 2026-07-28
  ``server/discover`` result derived from it (``discover_result``), and a result shaped
  for a 2026-07-28 caller (``modern_result``: ``resultType``, ``ttlMs``/``cacheScope``,
  the ``serverInfo`` stamp, the per-version field sieve), and an upstream's result taken
  back to no era by a server in the middle (``plain_result``);
- **the 2026 envelope** taken off a request for a legacy server (``strip_envelope``).

Pure: no I/O. Leaves who the server is (its InitializeResult) to the server.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
    unsupported_protocol_version_rejection,
)
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
)
from mcp_types import methods as _methods
from mcp_types.jsonrpc import HEADER_MISMATCH, INVALID_REQUEST
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    KNOWN_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)
from pydantic import ValidationError

from mcp_operator.serve.jsonrpc import RequestId, error_response

logger = logging.getLogger(__name__)

_RESERVED_META_KEYS: Final = frozenset(
    {
        PROTOCOL_VERSION_META_KEY,
        CLIENT_INFO_META_KEY,
        CLIENT_CAPABILITIES_META_KEY,
        LOG_LEVEL_META_KEY,
    }
)
_CACHEABLE: Final = _methods.CACHEABLE_METHODS
_ROUTING_HEADERS: Final = frozenset(
    name.encode("latin-1")
    for name in (MCP_PROTOCOL_VERSION_HEADER, MCP_METHOD_HEADER, MCP_NAME_HEADER)
)
"""The headers the SDK's ladder reads (every copy of each, for its duplicate check); the
rest of a request's headers are not decoded for it."""


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
    headers = [
        (k.decode("latin-1"), v.decode("latin-1").strip(" \t"))
        for k, v in raw_headers
        if k.lower() in _ROUTING_HEADERS
    ]
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


# ---------------------------------------------------------------- our own answers


def negotiate_version(requested: Any, speaks: str = LATEST_HANDSHAKE_VERSION) -> str:
    """The version to answer a client's ``initialize`` with, for a server that ``speaks`` one.

    The client's version when the server speaks it or something newer (legacy
    revisions are wire-compatible for what we forward); otherwise the server's, so
    that we never claim more than the server speaks (the adapter passes its child's
    version; the bridge speaks the latest).
    """
    if (
        isinstance(requested, str)
        and requested in HANDSHAKE_PROTOCOL_VERSIONS
        and speaks in KNOWN_PROTOCOL_VERSIONS
        and KNOWN_PROTOCOL_VERSIONS.index(requested) <= KNOWN_PROTOCOL_VERSIONS.index(speaks)
    ):
        return requested
    return speaks if speaks in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION


def initialize_result(server_result: dict[str, Any], requested: Any) -> dict[str, Any]:
    """A session's InitializeResult: the server's own, at the version negotiated for this client.

    Sieved through the SDK's result surface for that version, so that fields
    the negotiated revision does not know are not sent.
    """
    version = negotiate_version(requested, str(server_result.get("protocolVersion", "")))
    result = {**server_result, "protocolVersion": version}
    try:
        return _methods.serialize_server_result("initialize", version, result)
    except (ValidationError, KeyError, ValueError):
        logger.debug("An InitializeResult did not fit the %s surface; sent as is", version)
        return result


def discover_result(server_result: dict[str, Any], version: str) -> dict[str, Any]:
    """The 2026-07-28 ``server/discover`` result, derived from the server's InitializeResult
    (its capabilities, instructions and ``serverInfo``)."""
    result: dict[str, Any] = {
        "supportedVersions": list(MODERN_PROTOCOL_VERSIONS),
        "capabilities": server_result.get("capabilities") or {},
        "ttlMs": 0,
        "cacheScope": "private",
        "resultType": "complete",
    }
    if isinstance(server_result.get("instructions"), str):
        result["instructions"] = server_result["instructions"]
    return modern_result("server/discover", version, result, server_result.get("serverInfo"))


def strip_envelope(params: Any) -> Any:
    """A 2026 request's params without the per-request envelope keys, for a legacy server."""
    if not isinstance(params, dict):
        return params
    meta = params.get("_meta")
    if not isinstance(meta, dict) or not _RESERVED_META_KEYS.intersection(meta):
        return params
    kept = {k: v for k, v in meta.items() if k not in _RESERVED_META_KEYS}
    stripped = {k: v for k, v in params.items() if k != "_meta"}
    if kept:
        stripped["_meta"] = kept
    return stripped


def plain_result(result: Any) -> Any:
    """An upstream's result without what a 2026-07-28 server stamps on it for its caller
    (``modern_result``): ``resultType: complete`` and the answering server's ``serverInfo``
    in ``_meta`` come off, the rest stays (an ``input_required`` result keeps its type).

    What a server in the middle (the bridge) relays is its own answer: a legacy caller gets
    a result of its era, a 2026-07-28 caller the middle server's own stamp, not the identity
    of whichever upstream answered."""
    if not isinstance(result, dict) or ("resultType" not in result and "_meta" not in result):
        return result
    plain = dict(result)
    if plain.get("resultType") == "complete":
        del plain["resultType"]
    meta = plain.get("_meta")
    if isinstance(meta, dict) and SERVER_INFO_META_KEY in meta:
        rest = {key: value for key, value in meta.items() if key != SERVER_INFO_META_KEY}
        if rest:
            plain["_meta"] = rest
        else:
            del plain["_meta"]
    return plain


_TEXT_RESULT_KEYS: Final = frozenset({"content", "isError", "resultType"})


def _surface_shaped(method: str, version: str, result: dict[str, Any]) -> bool:
    """Whether ``result`` is already its own dump through the 2026 surface, so that sieving it
    would only rebuild it: a ``tools/call`` result of text items alone (most tool calls), with
    no field the surface drops or reshapes. Anything else goes through the surface; a unit
    test holds this to the SDK's dump for every modern revision."""
    if method != "tools/call" or version not in MODERN_PROTOCOL_VERSIONS:
        return False
    if not result.keys() <= _TEXT_RESULT_KEYS or result.get("resultType") != "complete":
        return False
    if "isError" in result and type(result["isError"]) is not bool:
        return False
    content = result.get("content")
    if type(content) is not list:
        return False
    for item in content:
        if (
            type(item) is not dict
            or len(item) != 2
            or item.get("type") != "text"
            or type(item.get("text")) is not str
        ):
            return False
    return True


def modern_result(method: str, version: str, result: Any, server_info: Any) -> dict[str, Any]:
    """Shape a (legacy) result the way the SDK's 2026 server shapes its own.

    Cache hints default to the SDK's (``ttlMs`` 0, ``private``) where the
    method's result carries them; ``resultType`` defaults to ``complete``;
    the result is sieved through the 2026 surface when it fits; the
    server's ``serverInfo`` is stamped into ``_meta``. ``result`` is not changed.
    """
    shaped: dict[str, Any] = dict(result) if isinstance(result, dict) else {}
    if method in _CACHEABLE:
        shaped.setdefault("ttlMs", 0)
        shaped.setdefault("cacheScope", "private")
    shaped.setdefault("resultType", "complete")
    if method in _methods.SPEC_CLIENT_METHODS and not _surface_shaped(method, version, shaped):
        try:
            shaped = _methods.serialize_server_result(method, version, shaped)
        except (ValidationError, KeyError, ValueError):
            logger.debug("A result for %s did not fit the %s surface; sent as is", method, version)
    if isinstance(server_info, dict):
        meta = shaped.get("_meta")
        if meta is None:
            shaped["_meta"] = {SERVER_INFO_META_KEY: server_info}
        elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
            shaped["_meta"] = {**meta, SERVER_INFO_META_KEY: server_info}
    return shaped
