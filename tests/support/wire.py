"""The JSON-RPC messages that tests and benchmarks send to MCP peers, built in one place.

A test that speaks MCP by hand (plain HTTP or stdio) builds its messages here, so
that every one of them speaks the same protocol revision of its era unless it says
otherwise on purpose:

- :data:`LEGACY_VERSION`, the newest revision of the ``initialize`` handshake era
  (sessions, the GET stream), the one our adapter and bridge answer by default;
- :data:`MODERN_VERSION`, the newest revision of the stateless per-request era
  (``server/discover``, ``_meta`` on every request, routing headers).

Both come from the SDK's registry (``mcp_types.version``) that the operator uses
too, so a new revision moves the tests with the code. What a peer answers, and the
messages a fake *server* sends back, are the test's own business.
"""

from __future__ import annotations

from typing import Any

from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION

LEGACY_VERSION = LATEST_HANDSHAKE_VERSION
"""The ``initialize`` handshake era's current revision (2025-11-25)."""

MODERN_VERSION = LATEST_MODERN_VERSION
"""The stateless era's current revision (2026-07-28)."""

CLIENT_INFO = {"name": "test", "version": "1"}
"""The ``clientInfo`` every hand-built ``initialize`` sends."""

Message = dict[str, Any]


def request(method: str, params: dict[str, Any] | None = None, *, id: int | str = 1) -> Message:
    """A JSON-RPC request; without ``params`` the member is left out."""
    message: Message = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method: str, params: dict[str, Any] | None = None) -> Message:
    """A JSON-RPC notification (no id); without ``params`` the member is left out."""
    message: Message = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def initialize(
    *,
    id: int | str = 0,
    version: str = LEGACY_VERSION,
    capabilities: dict[str, Any] | None = None,
) -> Message:
    """The legacy era's opening request; ``version`` other than the current one on purpose only."""
    params = {
        "protocolVersion": version,
        "capabilities": capabilities if capabilities is not None else {},
        "clientInfo": dict(CLIENT_INFO),
    }
    return request("initialize", params, id=id)


def initialized() -> Message:
    """The notification a legacy client sends once ``initialize`` is answered."""
    return notification("notifications/initialized")


def traced_call(
    name: str, arguments: dict[str, Any], traceparent: str, *, id: int | str = 1
) -> Message:
    """A ``tools/call`` carrying a W3C ``traceparent`` in ``params._meta`` (the parent the
    conventions give its server span)."""
    params = {"name": name, "arguments": arguments, "_meta": {"traceparent": traceparent}}
    return request("tools/call", params, id=id)
