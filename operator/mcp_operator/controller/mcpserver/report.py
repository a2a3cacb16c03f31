"""What a probe writes into ``MCPServer.status``, and the warnings it raises.

Pure functions, in two steps. :func:`status_tools` bounds a naming plan
(:func:`mcp_operator.mcp.naming.plan`, which decides every exposed name, the
same for status and the bridge) so that the object stays small: at most
``MAX_STATUS_TOOLS`` tools, descriptions and titles cut, annotations reduced to
the title and the boolean hints. :func:`status_fields` turns a
:class:`~mcp_operator.mcp.discovery.Discovery` and those tools into the exact
camelCase status fields (no ``None`` values; empty descriptions and annotations
are left out), and :func:`warnings` into sentences for the ``Probed`` condition
and events. Both are bounded: see ``docs/status-bounds.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp_operator.mcp.discovery import DiscoveredTool, Discovery, Keep
from mcp_operator.mcp.naming import ToolPlan, cut, quoted

MAX_STATUS_TOOLS = 256
"""At most this many tools are written to ``status.tools`` (``toolCount`` still counts all)."""

MAX_DESCRIPTION_CHARS = 1024
"""A tool description in status is cut to this many characters, the last one being ``…``."""

MAX_TITLE_CHARS = 256
"""The ``title`` annotation in status is cut to this many characters, the last one being ``…``."""

STATUS_KEEP = Keep(
    description_chars=MAX_DESCRIPTION_CHARS,
    title_chars=MAX_TITLE_CHARS,
    input_schema=False,
    digests=True,
)
"""What the probe keeps of each tool for status: no more than status shows, cut on arrival,
and the digest of the whole definition taken before the cut (the pin bridges enforce)."""

BOOLEAN_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
"""The tool annotations kept in status besides ``title``; anything else is dropped."""

MAX_SERVER_NAME_CHARS = 256
MAX_SERVER_VERSION_CHARS = 128
MAX_PROTOCOL_VERSION_CHARS = 32
MAX_LISTED = 5
"""A warning names at most this many tools or patterns, then says how many more."""
MAX_WARNINGS_PER_KIND = 5
"""At most this many collision sentences; the rest are counted in one more sentence."""


@dataclass(frozen=True)
class StatusTool:
    """A tool as agents see it through the bridge, bounded for ``status.tools``."""

    name: str
    original_name: str
    description: str
    annotations: dict[str, Any]
    sha256: str | None = None
    """The digest of the whole definition (``definitionSha256``), when the probe took it."""


@dataclass(frozen=True)
class StatusTools:
    """A naming plan bounded for status: the tools to list and what to warn about."""

    tools: list[StatusTool]
    """Sorted by exposed name; at most ``MAX_STATUS_TOOLS``."""
    discovered: int
    """Tools the server listed, before any filter (``discoveredToolCount``)."""
    selected: int
    """Tools exposed after the filters (``toolCount``), even when ``tools`` was cut."""
    collisions: list[str]
    """One sentence per exposed-name collision (or tool listed twice)."""
    invalid: list[str]
    """Original names that are not valid MCP tool names (sorted); excluded from ``tools``."""
    unmatched_allow: list[str]
    """``toolsAllow`` patterns that matched no discovered tool (a typo guard)."""
    truncated: bool
    """More than ``MAX_STATUS_TOOLS`` tools were selected; ``tools`` holds the first ones."""


def bounded_annotations(
    annotations: Mapping[str, Any] | None, title: str | None = None
) -> dict[str, Any]:
    """The annotations kept in status: the title (cut to 256) and the four boolean hints.

    ``title`` is the tool's own display name: it takes precedence over ``annotations.title``.
    """
    kept: dict[str, Any] = {}
    shown = title or (annotations or {}).get("title")
    if isinstance(shown, str) and shown:
        kept["title"] = cut(shown, MAX_TITLE_CHARS)
    for hint in BOOLEAN_HINTS:
        value = (annotations or {}).get(hint)
        if isinstance(value, bool):
            kept[hint] = value
    return kept


def _status_tool(name: str, tool: DiscoveredTool) -> StatusTool:
    return StatusTool(
        name=name,
        original_name=tool.name,
        description=cut(tool.description or "", MAX_DESCRIPTION_CHARS),
        annotations=bounded_annotations(tool.annotations, tool.title),
        sha256=tool.sha256,
    )


def _collisions(plan: ToolPlan[DiscoveredTool]) -> list[str]:
    """One sentence per refused collision or repeated name, in order of original name (a
    collision before the repeats of the same name), as the plan met them."""
    found = [
        (
            r.original_name,
            0,
            f"{quoted(r.holder)} and {quoted(r.original_name)} both map to "
            f"{r.wanted}; {quoted(r.holder)} keeps it and {quoted(r.original_name)} is not "
            "exposed",
        )
        for r in plan.refused
    ]
    found += [
        (
            d.original_name,
            1,
            f"{quoted(d.original_name)} is listed more than once by the server; it is exposed once",
        )
        for d in plan.dropped
        if d.reason == "Duplicate"
    ]
    return [sentence for _, _, sentence in sorted(found, key=lambda item: item[:2])]


def status_tools(plan: ToolPlan[DiscoveredTool]) -> StatusTools:
    """The part of ``plan`` that status shows, bounded, and what to warn about."""
    shown = list(plan.exposed.items())[:MAX_STATUS_TOOLS]
    return StatusTools(
        tools=[_status_tool(name, tool) for name, tool in shown],
        discovered=plan.discovered,
        selected=len(plan.exposed),
        collisions=_collisions(plan),
        invalid=sorted(d.original_name for d in plan.dropped if d.reason == "InvalidName"),
        unmatched_allow=list(plan.unmatched_allow),
        truncated=len(plan.exposed) > MAX_STATUS_TOOLS,
    )


def status_fields(discovery: Discovery, selection: StatusTools) -> dict[str, Any]:
    """``tools``, ``toolCount``, ``discoveredToolCount`` and ``serverInfo`` for the status."""
    tools: list[dict[str, Any]] = []
    for tool in selection.tools:
        item: dict[str, Any] = {"name": tool.name, "originalName": tool.original_name}
        if tool.description:
            item["description"] = tool.description
        if tool.annotations:
            item["annotations"] = dict(tool.annotations)
        if tool.sha256:
            item["definitionSha256"] = tool.sha256
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


def warnings(selection: StatusTools) -> list[str]:
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
