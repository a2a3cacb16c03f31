"""Pinned tool definitions: what a probe changed, and which digests bridges enforce. Pure.

Each ``status.tools[]`` entry carries ``definitionSha256``, the digest of the tool's whole
definition as the probe saw it (:mod:`mcp_operator.mcp.definitions`); bridges refuse a tool
whose live definition has another digest (``definition_changed``). ``spec.toolsPinning``
says when a new digest becomes the pin:

- ``pin`` (the default): at the probe that sees it (a change reaches agents only once the
  operator has seen it, and the change is reported);
- ``strict``: only when a person approves the whole set, by setting the annotation
  ``mcp-operator.dev/approved-tools`` to the set's digest (:func:`set_digest`, named in the
  ``ToolsChanged`` condition); until then a changed tool keeps its old pin (so bridges refuse
  it) and a new tool has none (so bridges refuse it). The first probe of a server pins what
  it sees (trust on first use);
- ``off``: digests are still recorded, bridges do not check them.

This module decides the pins, the ``ToolsChanged`` condition and the change listing of its
Event; :mod:`~mcp_operator.controller.mcpserver.status` writes them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from mcp_operator.controller.conditions import WantedCondition

APPROVED_TOOLS_ANNOTATION: Final = "mcp-operator.dev/approved-tools"
"""Holds the :func:`set_digest` a person approved (``spec.toolsPinning: strict``)."""

Pinning = Literal["strict", "pin", "off"]

MAX_NAMED = 10
"""A change listing names at most this many tools per kind, then says how many more."""

SHA = "definitionSha256"


@dataclass(frozen=True)
class ToolChanges:
    """Exposed names of the tools a probe added, removed or saw with another definition."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    def sentence(self) -> str:
        """``added: a, b; removed: c; changed: d`` (each list bounded)."""
        parts = [
            f"{kind}: {_named(names)}"
            for kind, names in (
                ("added", self.added),
                ("removed", self.removed),
                ("changed", self.changed),
            )
            if names
        ]
        return "; ".join(parts) or "no change"


def _named(names: Sequence[str]) -> str:
    shown = ", ".join(names[:MAX_NAMED])
    more = len(names) - MAX_NAMED
    return f"{shown} and {more} more" if more > 0 else shown


def changes(
    previous: Sequence[Mapping[str, Any]] | None, new: Sequence[Mapping[str, Any]]
) -> ToolChanges:
    """What changed from ``previous`` to ``new`` (``status.tools`` lists, by exposed name):
    a tool is added when it was not there, or had no pin and has one now (added under
    ``strict`` and approved since); changed when its digest differs from its pin."""
    old = {str(t.get("name")): t.get(SHA) for t in previous or ()}
    now = {str(t.get("name")): t.get(SHA) for t in new}
    return ToolChanges(
        added=sorted(
            name for name, sha in now.items() if name not in old or (sha and not old[name])
        ),
        removed=sorted(set(old) - set(now)),
        changed=sorted(name for name, sha in now.items() if old.get(name) and sha != old[name]),
    )


def set_digest(tools: Sequence[Mapping[str, Any]]) -> str:
    """The digest of a whole set of definitions: SHA-256 over the sorted
    ``originalName=definitionSha256`` lines (what the approval annotation holds)."""
    lines = sorted(f"{t.get('originalName')}={t.get(SHA) or ''}" for t in tools)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


@dataclass(frozen=True)
class Pinned:
    """The tools as status lists them (with their pins), and the ``ToolsChanged`` verdict."""

    tools: list[dict[str, Any]]
    condition: WantedCondition | None
    """``None``: leave the condition as it is."""
    changes: ToolChanges
    """What this probe saw change against the previous pins (for the Event)."""


def pin(
    observed: Sequence[Mapping[str, Any]],
    previous: Sequence[Mapping[str, Any]] | None,
    *,
    mode: Pinning,
    approved: str | None,
    server: str,
) -> Pinned:
    """The pins after a probe that ``observed`` these tools (each with the digest it saw),
    given the ``previous`` status tools (their pins) and the approval annotation."""
    seen = changes(previous, observed)
    tools = [dict(tool) for tool in observed]
    # The first probe, or the first since digests were recorded: trust on first use.
    first = not any(tool.get(SHA) for tool in previous or ())
    if first:
        return Pinned(
            tools, WantedCondition("ToolsChanged", "False", "Pinned", _pinned(tools)), seen
        )
    if mode != "strict":
        if not seen:
            return Pinned(tools, None, seen)
        message = f"The probe saw tool definitions change ({seen.sentence()}); pinned them"
        return Pinned(tools, WantedCondition("ToolsChanged", "True", "ToolsChanged", message), seen)
    wanted = set_digest(tools)
    if approved == wanted or not seen:
        reason = "Approved" if approved == wanted else "Pinned"
        condition = WantedCondition("ToolsChanged", "False", reason, _pinned(tools))
        return Pinned(tools, condition, seen)
    pins = {str(t.get("name")): t.get(SHA) for t in previous or ()}
    for tool in tools:
        old = pins.get(str(tool.get("name")))
        if old:
            tool[SHA] = old
        else:
            tool.pop(SHA, None)
    message = (
        f"Tool definitions changed ({seen.sentence()}); with toolsPinning strict the changed "
        "and added tools are not callable until approved: kubectl annotate mcpserver "
        f"{server} {APPROVED_TOOLS_ANNOTATION}={wanted} --overwrite"
    )
    return Pinned(tools, WantedCondition("ToolsChanged", "True", "ApprovalRequired", message), seen)


def _pinned(tools: Sequence[Mapping[str, Any]]) -> str:
    count = sum(1 for tool in tools if tool.get(SHA))
    return f"Pinned {count} tool definitions"
