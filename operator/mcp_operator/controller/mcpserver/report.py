"""What a probe writes into ``MCPServer.status``, and the warnings it raises.

Pure functions from a :class:`~mcp_operator.mcp.discovery.Discovery` and a
:class:`~mcp_operator.mcp.naming.ToolSelection` to the exact camelCase status
fields (no ``None`` values; empty descriptions and annotations are left out)
and to warning sentences for the ``Probed`` condition and events. Both are
bounded: see ``docs/status-bounds.md``.
"""

from __future__ import annotations

from typing import Any

from mcp_operator.mcp.discovery import Discovery
from mcp_operator.mcp.naming import ToolSelection, cut, quoted

MAX_SERVER_NAME_CHARS = 256
MAX_SERVER_VERSION_CHARS = 128
MAX_PROTOCOL_VERSION_CHARS = 32
MAX_LISTED = 5
"""A warning names at most this many tools or patterns, then says how many more."""
MAX_WARNINGS_PER_KIND = 5
"""At most this many collision sentences; the rest are counted in one more sentence."""


def status_fields(discovery: Discovery, selection: ToolSelection) -> dict[str, Any]:
    """``tools``, ``toolCount``, ``discoveredToolCount`` and ``serverInfo`` for the status."""
    tools: list[dict[str, Any]] = []
    for tool in selection.tools:
        item: dict[str, Any] = {"name": tool.name, "originalName": tool.original_name}
        if tool.description:
            item["description"] = tool.description
        if tool.annotations:
            item["annotations"] = dict(tool.annotations)
        tools.append(item)
    server_info: dict[str, str] = {
        "protocolVersion": cut(discovery.protocol_version, MAX_PROTOCOL_VERSION_CHARS)
    }
    if discovery.server_name:
        server_info["name"] = cut(discovery.server_name, MAX_SERVER_NAME_CHARS)
    if discovery.server_version:
        server_info["version"] = cut(discovery.server_version, MAX_SERVER_VERSION_CHARS)
    return {
        "tools": tools,
        "toolCount": selection.selected,
        "discoveredToolCount": selection.discovered,
        "serverInfo": dict(sorted(server_info.items())),
    }


def _listing(items: list[str]) -> str:
    shown = ", ".join(items[:MAX_LISTED])
    more = len(items) - MAX_LISTED
    return f"{shown} and {more} more" if more > 0 else shown


def warnings(selection: ToolSelection) -> list[str]:
    """Sentences about what the operator did not expose as the server listed it."""
    found: list[str] = []
    for collision in selection.collisions[:MAX_WARNINGS_PER_KIND]:
        found.append(f"Tool name collision: {collision}.")
    hidden = len(selection.collisions) - MAX_WARNINGS_PER_KIND
    if hidden > 0:
        found.append(f"{hidden} more tool name collisions were resolved the same way.")
    if selection.invalid:
        count = len(selection.invalid)
        noun = "tool is" if count == 1 else "tools are"
        found.append(
            f"{count} {noun} not exposed because the name is not a valid MCP tool name "
            f"(1 to 128 of A-Z a-z 0-9 _ . -): {_listing([quoted(n) for n in selection.invalid])}."
        )
    if selection.unmatched_allow:
        patterns = [quoted(p) for p in selection.unmatched_allow]
        noun = "pattern matches" if len(patterns) == 1 else "patterns match"
        found.append(f"toolsAllow {noun} no tool of the server: {_listing(patterns)}.")
    if selection.truncated:
        found.append(
            f"status.tools lists the first {len(selection.tools)} of {selection.selected} "
            "exposed tools (by name); toolCount counts them all."
        )
    return found
