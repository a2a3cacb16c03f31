"""Exposed tool names and tool filters: one plan, shared by the MCPServer status and the bridge.

A server's tool ``search.docs`` is exposed to agents as ``<prefix>_search_docs``.
This module owns that mapping and everything around it, as pure functions (no
I/O, no clock, no randomness):

- :func:`default_prefix` — the prefix derived from ``metadata.name``;
- :func:`exposed_name` — ``<prefix>_<original>``, sanitised to ``[A-Za-z0-9_-]``
  and kept within 64 characters by a deterministic hash suffix;
- :func:`matches` — the ``toolsAllow`` / ``toolsDeny`` globs (``*`` and ``?`` only);
- :func:`plan` — allow, then deny, then names and collisions: the exposed name of
  every tool that remains and the reason for every tool that does not. Two tools that
  map to one exposed name never share or swap it: the one that held it before (an
  *incumbent*: status and the bridge pass the tools they exposed last) keeps it, else
  the first by original name, and the other is refused (:class:`Refused`), so a tool a
  server adds later never takes over the name of one an agent already calls. The
  exposed name of a tool is therefore a function of its prefix and original name alone,
  the same in status and in every bridge. Unbounded:
  how much of the plan fits in ``status.tools`` is the MCPServer status's business
  (``controller/mcpserver/report.py``); :meth:`ToolPlan.narrowed` applies a run's
  further filters without renaming anything.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Generic, Literal, Protocol, TypeVar

MAX_TOOL_NAME_CHARS = 128
"""A valid MCP tool name is 1 to this many characters of ``[A-Za-z0-9_.-]``."""

MAX_EXPOSED_NAME_CHARS = 64
"""Exposed names stay within this length: several LLM APIs reject longer tool names."""

MAX_PREFIX_CHARS = 32
"""``toolsPrefix`` (and the default derived from ``metadata.name``) is at most this long."""

HASH_CHARS = 8
"""Hex digits of ``sha256(original name)`` used to shorten or disambiguate an exposed name."""

ELLIPSIS = "…"

_VALID_TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_NOT_EXPOSABLE = re.compile(r"[^A-Za-z0-9_-]")
_NOT_PREFIX = re.compile(r"[^a-z0-9_-]")
_PREFIX = re.compile(r"[a-z][a-z0-9_-]{0,31}")


class Named(Protocol):
    """Anything with a tool name: the plan needs nothing else of a tool."""

    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)

DropReason = Literal["NotAllowlisted", "Denied", "InvalidName", "Duplicate", "Collision"]
"""Why a listed tool is not exposed: no allow pattern matches it; a deny pattern
matches it; its name is not a valid MCP tool name; the server listed the name before;
another tool has its exposed name (:class:`Refused`)."""


@dataclass(frozen=True)
class Dropped:
    """A listed tool that is not exposed, and why."""

    original_name: str
    reason: DropReason


@dataclass(frozen=True)
class Refused:
    """A tool whose exposed name another tool has: it is not exposed (never renamed, so that
    no name ever moves from one tool to another)."""

    original_name: str
    wanted: str
    """The exposed name the rule gives it (:func:`exposed_name`)."""
    holder: str
    """The original name of the tool that has ``wanted`` (the incumbent, else the first by
    original name)."""


@dataclass(frozen=True)
class ToolPlan(Generic[T]):
    """From the tools a server listed to the tools agents see. Deterministic: the same
    tools give the same plan in any order (of a name listed twice, the first is kept)."""

    exposed: Mapping[str, T]
    """Exposed name -> the tool as listed, in order of exposed name. Every tool that passed
    the filters and has a valid name, once."""
    dropped: tuple[Dropped, ...]
    """Every listed tool that is not exposed, in order of original name (then reason)."""
    refused: tuple[Refused, ...]
    """The exposed-name collisions: each tool left out for one, in order of original name."""
    unmatched_allow: tuple[str, ...]
    """``toolsAllow`` patterns that match no listed tool (a typo guard), in the given order."""
    discovered: int
    """How many tools the server listed (``discoveredToolCount``)."""

    def narrowed(self, *, allow: Sequence[str] = (), deny: Sequence[str] = ()) -> ToolPlan[T]:
        """This plan with further filters applied on top: ``allow`` (empty = all), then
        ``deny``. The tools that remain keep the exposed names of this plan, whichever
        tools the further filters removed (an AgentRun narrows its servers this way)."""
        exposed: dict[str, T] = {}
        dropped = list(self.dropped)
        for name, tool in self.exposed.items():
            reason = _filtered_out(tool.name, allow, deny)
            if reason is None:
                exposed[name] = tool
            else:
                dropped.append(Dropped(tool.name, reason))
        listed = [d.original_name for d in self.dropped]
        listed += [tool.name for tool in self.exposed.values()]
        return ToolPlan(
            exposed=exposed,
            dropped=_in_order(dropped),
            refused=self.refused,
            unmatched_allow=tuple(
                dict.fromkeys((*self.unmatched_allow, *_unmatched(allow, listed)))
            ),
            discovered=self.discovered,
        )


def is_valid_tool_name(name: str) -> bool:
    """Whether ``name`` is a valid MCP tool name: 1 to 128 characters of ``[A-Za-z0-9_.-]``."""
    return _VALID_TOOL_NAME.fullmatch(name) is not None


def is_valid_prefix(prefix: str) -> bool:
    """Whether ``prefix`` is a valid ``toolsPrefix``: ``[a-z][a-z0-9_-]*``, at most 32 long,
    or the empty prefix (no prefixing)."""
    return prefix == "" or _PREFIX.fullmatch(prefix) is not None


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


def _hashed(sanitised: str, original: str) -> str:
    """``sanitised`` cut to leave room for ``_`` and the hash of ``original``."""
    keep = MAX_EXPOSED_NAME_CHARS - 1 - HASH_CHARS
    return f"{sanitised[:keep]}_{_short_hash(original)}"


def exposed_name(prefix: str, original: str) -> str:
    """The name agents see: ``<prefix>_<original>``, sanitised and at most 64 characters.

    Characters outside ``[A-Za-z0-9_-]`` become ``_``. A longer result keeps its
    first 55 characters, then ``_`` and the first 8 hex digits of
    ``sha256(original)``, so the rule is deterministic and stays within 64. The empty
    prefix (a server that opted out of prefixing) exposes the original name, by the same
    rule: unchanged when it fits.
    """
    sanitised = _NOT_EXPOSABLE.sub("_", f"{prefix}_{original}" if prefix else original)
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


def quoted(name: str, limit: int = 64) -> str:
    """A tool name fit for a message: quoted, escaped and cut (servers choose these names)."""
    return repr(cut(name, limit))


def _filtered_out(name: str, allow: Sequence[str], deny: Sequence[str]) -> DropReason | None:
    if allow and not matches(allow, name):
        return "NotAllowlisted"
    if matches(deny, name):
        return "Denied"
    return None


def _unmatched(allow: Sequence[str], names: Sequence[str]) -> list[str]:
    return [p for p in dict.fromkeys(allow) if not any(matches([p], name) for name in names)]


def _in_order(dropped: list[Dropped]) -> tuple[Dropped, ...]:
    return tuple(sorted(dropped, key=lambda d: (d.original_name, d.reason)))


def plan(
    tools: Sequence[T],
    *,
    prefix: str,
    allow: Sequence[str] = (),
    deny: Sequence[str] = (),
    incumbents: Collection[str] = (),
) -> ToolPlan[T]:
    """Apply ``allow`` (empty = all), then ``deny``, then the exposed names.

    Tools with invalid names are dropped. Two tools that map to one exposed name
    never overwrite each other: the one in ``incumbents`` (original names exposed
    before) keeps the name, else the first by original name, and the other is
    dropped (``Collision``, recorded in :class:`Refused`). A name listed twice is
    exposed once (the first listed). Nothing is cut or counted out: bounds for
    status are applied by its caller.
    """
    dropped: list[Dropped] = []
    wanted: list[T] = []
    for tool in tools:
        reason = _filtered_out(tool.name, allow, deny)
        if reason is None:
            wanted.append(tool)
        else:
            dropped.append(Dropped(tool.name, reason))

    exposed: dict[str, T] = {}
    refused: list[Refused] = []
    kept: set[str] = set()
    held = set(incumbents)
    # Incumbents first, then by original name; stable: the first listed stays first.
    for tool in sorted(wanted, key=lambda t: (t.name not in held, t.name)):
        if not is_valid_tool_name(tool.name):
            dropped.append(Dropped(tool.name, "InvalidName"))
            continue
        if tool.name in kept:
            dropped.append(Dropped(tool.name, "Duplicate"))
            continue
        kept.add(tool.name)
        name = exposed_name(prefix, tool.name)
        if name in exposed:
            refused.append(Refused(tool.name, name, exposed[name].name))
            dropped.append(Dropped(tool.name, "Collision"))
            continue
        exposed[name] = tool

    return ToolPlan(
        exposed=dict(sorted(exposed.items())),
        dropped=_in_order(dropped),
        refused=tuple(sorted(refused, key=lambda r: r.original_name)),
        unmatched_allow=tuple(_unmatched(allow, [tool.name for tool in tools])),
        discovered=len(tools),
    )
