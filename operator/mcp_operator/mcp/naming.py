"""Exposed tool names and tool filters: one rule, shared by probe, bridge and API models.

A server's tool ``search.docs`` is exposed to agents as ``<prefix>_search_docs``.
This module owns that mapping and everything around it, as pure functions (no
I/O, no clock, no randomness):

- :func:`default_prefix` — the prefix derived from ``metadata.name``;
- :func:`exposed_name` — ``<prefix>_<original>``, sanitised to ``[A-Za-z0-9_-]``
  and kept within 64 characters by a deterministic hash suffix;
- :func:`matches` — the ``toolsAllow`` / ``toolsDeny`` globs (``*`` and ``?`` only);
- :func:`select_tools` — allow, then deny, then names, collisions and the
  bounds that keep ``status.tools`` small (see ``docs/status-bounds.md``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

MAX_STATUS_TOOLS = 256
"""At most this many tools are written to ``status.tools`` (``toolCount`` still counts all)."""

MAX_DESCRIPTION_CHARS = 1024
"""A tool description in status is cut to this many characters, the last one being ``…``."""

MAX_TITLE_CHARS = 256
"""The ``title`` annotation in status is cut to this many characters, the last one being ``…``."""

MAX_TOOL_NAME_CHARS = 128
"""A valid MCP tool name is 1 to this many characters of ``[A-Za-z0-9_.-]``."""

MAX_EXPOSED_NAME_CHARS = 64
"""Exposed names stay within this length: several LLM APIs reject longer tool names."""

MAX_PREFIX_CHARS = 32
"""``toolsPrefix`` (and the default derived from ``metadata.name``) is at most this long."""

HASH_CHARS = 8
"""Hex digits of ``sha256(original name)`` used to shorten or disambiguate an exposed name."""

BOOLEAN_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
"""The tool annotations kept in status besides ``title``; anything else is dropped."""

ELLIPSIS = "…"

_VALID_TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_NOT_EXPOSABLE = re.compile(r"[^A-Za-z0-9_-]")
_NOT_PREFIX = re.compile(r"[^a-z0-9_-]")
_PREFIX = re.compile(r"[a-z][a-z0-9_-]{0,31}")


@dataclass(frozen=True)
class RawTool:
    """A tool as the server listed it (only the fields the operator uses)."""

    name: str
    description: str | None
    annotations: dict[str, Any] | None


@dataclass(frozen=True)
class ExposedTool:
    """A tool as agents see it through the bridge, bounded for ``status.tools``."""

    name: str
    original_name: str
    description: str
    annotations: dict[str, Any]


@dataclass(frozen=True)
class ToolSelection:
    """The outcome of :func:`select_tools`: the exposed tools and what to warn about."""

    tools: list[ExposedTool]
    """After allow, deny and prefix; sorted by exposed name; at most ``MAX_STATUS_TOOLS``."""
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


def is_valid_tool_name(name: str) -> bool:
    """Whether ``name`` is a valid MCP tool name: 1 to 128 characters of ``[A-Za-z0-9_.-]``."""
    return _VALID_TOOL_NAME.fullmatch(name) is not None


def is_valid_prefix(prefix: str) -> bool:
    """Whether ``prefix`` is a valid ``toolsPrefix``: ``[a-z][a-z0-9_-]*``, at most 32 long."""
    return _PREFIX.fullmatch(prefix) is not None


def default_prefix(metadata_name: str) -> str:
    """The tool prefix derived from an object name (the ``toolsPrefix`` default).

    Lowercase; every character outside ``[a-z0-9_-]`` becomes ``-`` (so the ``.``
    of a DNS subdomain does too); ``m`` is prepended when the result does not
    start with a letter; cut to 32 characters; trailing ``-`` and ``_`` removed
    (so that ``<prefix>_<tool>`` never shows ``-_``). ``github.tools`` →
    ``github-tools``, ``1password`` → ``m1password``. Always a valid prefix.
    """
    prefix = _NOT_PREFIX.sub("-", metadata_name.lower())
    if not "a" <= prefix[:1] <= "z":
        prefix = "m" + prefix
    return prefix[:MAX_PREFIX_CHARS].rstrip("-_") or "m"


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]


def _hashed(sanitised: str, original: str, attempt: int = 0) -> str:
    """``sanitised`` cut to leave room for ``_`` and the hash of ``original``."""
    keep = MAX_EXPOSED_NAME_CHARS - 1 - HASH_CHARS
    seed = original if attempt == 0 else f"{original}#{attempt}"
    return f"{sanitised[:keep]}_{_short_hash(seed)}"


def exposed_name(prefix: str, original: str) -> str:
    """The name agents see: ``<prefix>_<original>``, sanitised and at most 64 characters.

    Characters outside ``[A-Za-z0-9_-]`` become ``_``. A longer result keeps its
    first 55 characters, then ``_`` and the first 8 hex digits of
    ``sha256(original)``, so the rule is deterministic and stays within 64.
    """
    sanitised = _NOT_EXPOSABLE.sub("_", f"{prefix}_{original}")
    if len(sanitised) <= MAX_EXPOSED_NAME_CHARS:
        return sanitised
    return _hashed(sanitised, original)


@lru_cache(maxsize=256)
def _glob(pattern: str) -> re.Pattern[str]:
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile("".join(parts), re.DOTALL)


def matches(patterns: Sequence[str], name: str) -> bool:
    """Whether ``name`` matches any of the glob ``patterns``.

    ``*`` matches any run of characters (dots included), ``?`` exactly one;
    everything else, ``[`` included, matches itself. Case-sensitive.
    """
    return any(_glob(pattern).fullmatch(name) is not None for pattern in patterns)


def cut(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its start ending with ``…``."""
    if len(text) <= limit:
        return text
    return text[: limit - 1] + ELLIPSIS


def bounded_annotations(annotations: Mapping[str, Any] | None) -> dict[str, Any]:
    """The annotations kept in status: ``title`` (cut to 256) and the four boolean hints."""
    if not annotations:
        return {}
    kept: dict[str, Any] = {}
    title = annotations.get("title")
    if isinstance(title, str) and title:
        kept["title"] = cut(title, MAX_TITLE_CHARS)
    for hint in BOOLEAN_HINTS:
        value = annotations.get(hint)
        if isinstance(value, bool):
            kept[hint] = value
    return kept


def quoted(name: str, limit: int = 64) -> str:
    """A tool name fit for a message: quoted, escaped and cut (servers choose these names)."""
    return repr(cut(name, limit))


def select_tools(
    tools: Sequence[RawTool],
    *,
    prefix: str,
    allow: Sequence[str] = (),
    deny: Sequence[str] = (),
) -> ToolSelection:
    """Apply ``allow`` (empty = all), then ``deny``, then the exposed names and the bounds.

    Tools with invalid names are left out and reported. Two tools that map to one
    exposed name never overwrite each other: in order of original name, the first
    keeps the name and each later one gets the hash-suffix form; each collision is
    reported. A name listed twice is exposed once and reported.
    """
    unmatched_allow = [
        pattern
        for pattern in dict.fromkeys(allow)
        if not any(matches([pattern], tool.name) for tool in tools)
    ]

    wanted = [
        tool
        for tool in tools
        if (not allow or matches(allow, tool.name)) and not matches(deny, tool.name)
    ]
    invalid = sorted(tool.name for tool in wanted if not is_valid_tool_name(tool.name))
    valid = sorted((t for t in wanted if is_valid_tool_name(t.name)), key=lambda t: t.name)

    collisions: list[str] = []
    taken: dict[str, str] = {}  # exposed name -> original name
    seen: set[str] = set()
    exposed: list[ExposedTool] = []
    for tool in valid:
        if tool.name in seen:
            collisions.append(
                f"{quoted(tool.name)} is listed more than once by the server; it is exposed once"
            )
            continue
        seen.add(tool.name)
        name = exposed_name(prefix, tool.name)
        if name in taken:
            first = taken[name]
            sanitised = _NOT_EXPOSABLE.sub("_", f"{prefix}_{tool.name}")
            attempt = 0
            candidate = _hashed(sanitised, tool.name)
            while candidate in taken:
                attempt += 1
                candidate = _hashed(sanitised, tool.name, attempt)
            collisions.append(
                f"{quoted(first)} and {quoted(tool.name)} both map to {name}; "
                f"the second is exposed as {candidate}"
            )
            name = candidate
        taken[name] = tool.name
        exposed.append(
            ExposedTool(
                name=name,
                original_name=tool.name,
                description=cut(tool.description or "", MAX_DESCRIPTION_CHARS),
                annotations=bounded_annotations(tool.annotations),
            )
        )

    exposed.sort(key=lambda t: t.name)
    return ToolSelection(
        tools=exposed[:MAX_STATUS_TOOLS],
        discovered=len(tools),
        selected=len(exposed),
        collisions=collisions,
        invalid=invalid,
        unmatched_allow=unmatched_allow,
        truncated=len(exposed) > MAX_STATUS_TOOLS,
    )
