"""What the bridge answers itself, in each protocol era, and how its results are shaped.

Owns the bridge's own identity towards the agent: the legacy ``initialize`` result (its own
``serverInfo``, ``capabilities.tools.listChanged: true``, the protocol version negotiated
per client), the 2026-07-28 ``server/discover`` result, and the shaping of a result for a
2026-07-28 caller the way the SDK's server (and the adapter) shape theirs: ``resultType``,
``ttlMs``/``cacheScope`` on cacheable results, the ``serverInfo`` stamp in ``_meta``. Pure:
no I/O. Which method gets which answer is the front's job.
"""

from __future__ import annotations

from typing import Any, Final

from mcp_types import SERVER_INFO_META_KEY
from mcp_types import methods as _methods
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)

from mcp_operator import __version__

SERVER_INFO: Final[dict[str, str]] = {"name": "mcp-operator-bridge", "version": __version__}
INSTRUCTIONS: Final = (
    "Tools of several MCP servers, named <prefix>_<tool>. A failed call returns a structured "
    "error with a code and a hint that says what to change."
)
_CACHEABLE: Final = _methods.CACHEABLE_METHODS


def negotiate_version(requested: Any) -> str:
    """The client's handshake-era version when the bridge speaks it, else the latest one."""
    if isinstance(requested, str) and requested in HANDSHAKE_PROTOCOL_VERSIONS:
        return requested
    return LATEST_HANDSHAKE_VERSION


def initialize_result(requested: Any) -> dict[str, Any]:
    """A legacy session's ``InitializeResult``."""
    return {
        "protocolVersion": negotiate_version(requested),
        "capabilities": {"tools": {"listChanged": True}},
        "serverInfo": SERVER_INFO,
        "instructions": INSTRUCTIONS,
    }


def discover_result(version: str) -> dict[str, Any]:
    """The 2026-07-28 ``server/discover`` result."""
    result = {
        "supportedVersions": list(MODERN_PROTOCOL_VERSIONS),
        "capabilities": {"tools": {}},
        "instructions": INSTRUCTIONS,
    }
    return modern_result("server/discover", result)


def modern_result(method: str, result: dict[str, Any]) -> dict[str, Any]:
    """``result`` shaped for a 2026-07-28 caller (a new dict; ``result`` is not changed)."""
    shaped = dict(result)
    if method in _CACHEABLE:
        shaped.setdefault("ttlMs", 0)
        shaped.setdefault("cacheScope", "private")
    shaped.setdefault("resultType", "complete")
    meta = shaped.get("_meta")
    if meta is None:
        shaped["_meta"] = {SERVER_INFO_META_KEY: SERVER_INFO}
    elif isinstance(meta, dict) and SERVER_INFO_META_KEY not in meta:
        shaped["_meta"] = {**meta, SERVER_INFO_META_KEY: SERVER_INFO}
    return shaped
