"""Progressive discovery (``discovery: search``): two tools instead of the whole catalog.

With many servers, every tool's schema in ``tools/list`` fills the model's context before it
has done anything. In ``search`` mode the agent's ``tools/list`` holds two tools of the
bridge's own: :data:`SEARCH_TOOL` ranks the run's catalog (what ``tools/list`` would show in
``full`` mode: the tools the policies hide stay hidden) by a query over names, titles and
descriptions and returns each hit with its schema; :data:`CALL_TOOL` calls a tool by name,
through the same pipeline as any call (every check, hook, rule and audit line). This module
owns the two definitions and the ranking; answering them is the core's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

SEARCH_TOOL: Final = "search_tools"
CALL_TOOL: Final = "call_tool"
DEFAULT_HITS: Final = 5
MAX_HITS: Final = 20

TOOLS: Final[list[dict[str, Any]]] = [
    {
        "name": SEARCH_TOOL,
        "title": "Search tools",
        "description": (
            "Finds the tools this agent may call: give a few words of what you want to do; "
            "returns the best matches with their input schemas. Call one with call_tool."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 512},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_HITS},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": CALL_TOOL,
        "title": "Call a tool",
        "description": "Calls a tool that search_tools found, by its name, with its arguments.",
        "inputSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
            "required": ["name"],
            "additionalProperties": False,
        },
    },
]
"""The ``tools/list`` of a run in ``search`` mode."""

_WORDS = re.compile(r"[a-z0-9]+")
WEIGHTS: Final = (("name", 3.0), ("title", 2.0), ("description", 1.0))
"""How much a query word found in each field counts."""


def _words(text: Any) -> list[str]:
    return _WORDS.findall(text.lower()) if isinstance(text, str) else []


def _title(tool: Mapping[str, Any]) -> Any:
    annotations = tool.get("annotations")
    fallback = annotations.get("title") if isinstance(annotations, Mapping) else None
    return tool.get("title") or fallback


def score(tool: Mapping[str, Any], query: Sequence[str]) -> float:
    """How well ``tool`` matches the query words: per word, the weight of each field that
    holds it (a prefix of a field's word counts half), so a word in the name weighs most."""
    fields = {
        "name": _words(str(tool.get("name", "")).replace("_", " ").replace("-", " ")),
        "title": _words(_title(tool)),
        "description": _words(tool.get("description")),
    }
    total = 0.0
    for word in query:
        for field, weight in WEIGHTS:
            found = fields[field]
            if word in found:
                total += weight
            elif any(candidate.startswith(word) for candidate in found):
                total += weight / 2
    return total


def search(listing: Sequence[Mapping[str, Any]], query: str, limit: int) -> list[dict[str, Any]]:
    """The best ``limit`` tools of ``listing`` for ``query``, best first (ties by name), each
    as ``{name, title, description, inputSchema}``; tools that match no word are left out."""
    words = _words(query)
    ranked = sorted(
        ((score(tool, words), str(tool.get("name", ""))) for tool in listing),
        key=lambda item: (-item[0], item[1]),
    )
    by_name = {str(tool.get("name", "")): tool for tool in listing}
    hits = []
    for points, name in ranked[: max(1, min(limit, MAX_HITS))]:
        if points <= 0:
            break
        tool = by_name[name]
        hit = {"name": name, "inputSchema": tool.get("inputSchema")}
        for key, value in (("title", _title(tool)), ("description", tool.get("description"))):
            if value:
                hit[key] = value
        hits.append(hit)
    return hits


def search_result(listing: Sequence[Mapping[str, Any]], arguments: Any) -> dict[str, Any]:
    """The ``CallToolResult`` of a :data:`SEARCH_TOOL` call."""
    query = arguments.get("query") if isinstance(arguments, Mapping) else None
    limit = arguments.get("limit", DEFAULT_HITS) if isinstance(arguments, Mapping) else None
    if not isinstance(query, str) or not query.strip() or not isinstance(limit, int):
        hint = "search_tools needs a query: a few words of what you want to do."
        return {
            "content": [{"type": "text", "text": f"invalid_arguments: {hint}"}],
            "structuredContent": {"code": "invalid_arguments", "hint": hint},
            "isError": True,
        }
    hits = search(listing, query[:512], limit)
    names = ", ".join(hit["name"] for hit in hits) or "no tool matched; try other words"
    return {
        "content": [{"type": "text", "text": f"Found: {names}."}],
        "structuredContent": {"tools": hits},
        "isError": False,
    }
