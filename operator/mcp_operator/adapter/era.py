"""Protocol eras as the adapter serves them: what it answers itself, and how results are shaped.

Owns the adapter's answers that do not come from the child: a legacy
session's ``initialize`` (from the child's own InitializeResult, with the
protocol version negotiated per client) and the 2026-07-28 ``server/discover``;
and the reshaping of a (legacy) child's results for 2026-07-28 callers
(``resultType``, ``ttlMs``/``cacheScope``, the ``serverInfo`` stamp, the
per-version field sieve). The version registry, the inbound validation ladder
and the result surfaces are the SDK's (``mcp_types``, ``mcp.shared.inbound``):
the adapter mirrors the SDK server's wire behaviour by calling the same code.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
)
from mcp_types import methods as _methods
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    KNOWN_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)
from pydantic import ValidationError

from mcp_operator import __version__

logger = logging.getLogger(__name__)

__all__ = [
    "ADAPTER_CLIENT_CAPABILITIES",
    "HANDSHAKE_PROTOCOL_VERSIONS",
    "LATEST_HANDSHAKE_VERSION",
    "MODERN_PROTOCOL_VERSIONS",
    "child_initialize_params",
    "discover_result",
    "initialize_result",
    "modern_result",
    "negotiate_version",
    "strip_envelope",
]

ADAPTER_CLIENT_CAPABILITIES: Final[dict[str, Any]] = {
    "roots": {"listChanged": True},
    "sampling": {},
    "elicitation": {},
}
"""What the adapter declares to the child: the union of what its clients may answer.

Each server→client request is then routed only to a session whose client
declared the capability, and refused otherwise.
"""

_RESERVED_META_KEYS: Final = frozenset(
    {
        PROTOCOL_VERSION_META_KEY,
        CLIENT_INFO_META_KEY,
        CLIENT_CAPABILITIES_META_KEY,
        LOG_LEVEL_META_KEY,
    }
)
_CACHEABLE: Final = _methods.CACHEABLE_METHODS


def child_initialize_params() -> dict[str, Any]:
    """The ``initialize`` params the adapter sends its child, once per child start."""
    return {
        "protocolVersion": LATEST_HANDSHAKE_VERSION,
        "capabilities": ADAPTER_CLIENT_CAPABILITIES,
        "clientInfo": {"name": "mcp-operator-adapter", "version": __version__},
    }


def negotiate_version(requested: Any, child_version: str) -> str:
    """The version to answer a client's ``initialize`` with.

    The client's version when the child speaks it or something newer (legacy
    revisions are wire-compatible for what the adapter forwards); otherwise
    the child's, so the adapter never claims more than its child speaks.
    """
    if (
        isinstance(requested, str)
        and requested in HANDSHAKE_PROTOCOL_VERSIONS
        and child_version in KNOWN_PROTOCOL_VERSIONS
        and KNOWN_PROTOCOL_VERSIONS.index(requested) <= KNOWN_PROTOCOL_VERSIONS.index(child_version)
    ):
        return requested
    return (
        child_version if child_version in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
    )


def initialize_result(child_result: dict[str, Any], requested: Any) -> dict[str, Any]:
    """A session's InitializeResult: the child's, at the version negotiated for this client.

    Sieved through the SDK's result surface for that version, so that fields
    the negotiated revision does not know are not sent.
    """
    version = negotiate_version(requested, str(child_result.get("protocolVersion", "")))
    result = {**child_result, "protocolVersion": version}
    try:
        return _methods.serialize_server_result("initialize", version, result)
    except (ValidationError, KeyError, ValueError):
        logger.debug("Child InitializeResult did not fit the %s surface; sent as is", version)
        return result


def discover_result(child_result: dict[str, Any], version: str) -> dict[str, Any]:
    """The 2026-07-28 ``server/discover`` result, derived from the child's InitializeResult."""
    result: dict[str, Any] = {
        "supportedVersions": list(MODERN_PROTOCOL_VERSIONS),
        "capabilities": child_result.get("capabilities") or {},
        "ttlMs": 0,
        "cacheScope": "private",
        "resultType": "complete",
    }
    if isinstance(child_result.get("instructions"), str):
        result["instructions"] = child_result["instructions"]
    return modern_result("server/discover", version, result, child_result.get("serverInfo"))


def strip_envelope(params: Any) -> Any:
    """A 2026 request's params without the per-request envelope keys, for a legacy child."""
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


def modern_result(method: str, version: str, result: Any, server_info: Any) -> dict[str, Any]:
    """Shape a (legacy) child's result the way the SDK's 2026 server shapes its own.

    Cache hints default to the SDK's (``ttlMs`` 0, ``private``) where the
    method's result carries them; ``resultType`` defaults to ``complete``;
    the result is sieved through the 2026 surface when it fits; the
    child's ``serverInfo`` is stamped into ``_meta``.
    """
    shaped: dict[str, Any] = dict(result) if isinstance(result, dict) else {}
    if method in _CACHEABLE:
        shaped.setdefault("ttlMs", 0)
        shaped.setdefault("cacheScope", "private")
    shaped.setdefault("resultType", "complete")
    if method in _methods.SPEC_CLIENT_METHODS:
        try:
            shaped = _methods.serialize_server_result(method, version, shaped)
        except (ValidationError, KeyError, ValueError):
            logger.debug(
                "Child result for %s did not fit the %s surface; sent as is", method, version
            )
    if isinstance(server_info, dict):
        meta = shaped.get("_meta")
        if meta is None:
            shaped["_meta"] = {SERVER_INFO_META_KEY: server_info}
        elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
            shaped["_meta"] = {**meta, SERVER_INFO_META_KEY: server_info}
    return shaped
