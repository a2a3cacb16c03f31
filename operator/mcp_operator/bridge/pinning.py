"""Pinned tool definitions in the bridge: a live definition that is not the pinned one.

The operator pins the digest of every tool's definition (``status.tools[].
definitionSha256``, :mod:`mcp_operator.mcp.definitions`) and the configuration carries them
(``servers[].toolDigests``). The bridge takes the digest of each tool as the server lists it
now; when the two differ (a server that changed a description, a schema or an annotation
after review: a "rug pull"), the tool is left out of ``tools/list`` (its new text never
reaches the model) and a call to it is refused with ``definition_changed``, until the
operator's next probe re-pins it (``pinning: pin``) or a person approves the change
(``strict``). Under ``strict`` a tool without a pin (added since the last approval) is
refused the same way. The catalog asks :func:`drift` when it is built; the pipeline turns
a drifted entry into :func:`refusal`.
"""

from __future__ import annotations

from typing import Literal

from mcp_operator.api.bridge import UpstreamServer
from mcp_operator.bridge.errors import ToolError

Drift = Literal["changed", "unapproved"]


def drift(server: UpstreamServer, original_name: str, live_sha256: str) -> Drift | None:
    """Why the live definition of ``original_name`` is not the pinned one, or ``None``."""
    if server.pinning == "off" or server.tool_digests is None:
        return None
    pinned = server.tool_digests.get(original_name)
    if pinned is None:
        return "unapproved" if server.pinning == "strict" else None
    return None if pinned == live_sha256 else "changed"


def refusal(
    exposed_name: str, server: UpstreamServer, original_name: str, why: Drift, live: str
) -> ToolError:
    """The ``definition_changed`` error for a drifted tool (the call is not sent)."""
    key = f"{server.namespace}/{server.name}"
    if why == "changed":
        what = (
            f"The definition of {exposed_name} (its description, schema or annotations) on "
            f"server {key} is not the one the operator pinned when it last probed the server"
        )
    else:
        what = f"The tool {exposed_name} of server {key} has no approved definition yet"
    when = (
        "until a person approves the change (toolsPinning strict: the MCPServer's "
        "ToolsChanged condition names the command)"
        if server.pinning == "strict"
        else "until the operator's next probe of the server pins the new definition "
        "(within the server's probe interval)"
    )
    return ToolError(
        "definition_changed",
        f"{what}, so the bridge did not call it: a changed definition may change what the "
        f"tool does. It stays out of tools/list and cannot be called {when}. The call was "
        "not sent; tools of other servers keep working.",
        {
            "server": key,
            "pinning": server.pinning,
            "pinnedSha256": (server.tool_digests or {}).get(original_name),
            "liveSha256": live,
        },
    )
