"""The bridge's prompt catalog: exposed name → server and original name, as for tools.

Prompts are named by the same plan as tools (:func:`mcp_operator.mcp.naming.plan`:
``<prefix>_<prompt>``, sanitised, within 64 characters, the empty prefix keeping the server's
own name), filtered by the servers' and the run's prompt filters (``promptsAllow``,
``promptsDeny`` of each :class:`~mcp_operator.api.bridge_filters.FilterLayer`: the first
layer names, the later ones narrow), so a prompt's exposed name is a function of its prefix
and its name alone. Prompts that the run hides are not in the catalog, and a name that is not
in it cannot be got. Two servers that want one name: the first in the configuration's order
keeps it, the other's prompt is left out and reported. A prompt of the previous catalog keeps
its name against a newcomer of its own server. Pure: listing prompts is the upstream pool's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp_operator.api.bridge import UpstreamServer
from mcp_operator.api.bridge_filters import FilterLayer
from mcp_operator.mcp import naming


def _key(server: UpstreamServer) -> str:
    return f"{server.namespace}/{server.name}"


@dataclass(frozen=True)
class PromptEntry:
    """One prompt the agent may get."""

    exposed_name: str
    server: str
    """The server's key, ``namespace/name``."""
    original_name: str
    definition: Mapping[str, Any] = field(default_factory=dict)
    """The prompt as the server listed it (description, arguments, ``_meta`` …)."""

    def listed(self) -> dict[str, Any]:
        return {**self.definition, "name": self.exposed_name}


@dataclass(frozen=True)
class PromptCatalog:
    """Every prompt of the run, by exposed name, and the collisions met building it."""

    entries: Mapping[str, PromptEntry]
    collisions: Sequence[str] = ()

    def get(self, exposed_name: str) -> PromptEntry | None:
        return self.entries.get(exposed_name)

    def listing(self) -> list[dict[str, Any]]:
        """Every prompt for ``prompts/list``, in order of exposed name."""
        return [self.entries[name].listed() for name in sorted(self.entries)]


@dataclass(frozen=True)
class _Listed:
    name: str
    prompt: Mapping[str, Any]


def plan_prompts(
    server: UpstreamServer, prompts: Iterable[Mapping[str, Any]], incumbents: Iterable[str] = ()
) -> naming.ToolPlan[_Listed]:
    """The server's prompts through its filter layers, named by the plan."""
    listed = [_Listed(str(p["name"]), p) for p in prompts if isinstance(p.get("name"), str)]
    first, *later = server.filters or [FilterLayer()]
    planned = naming.plan(
        listed,
        prefix=server.prefix,
        allow=first.prompts_allow,
        deny=first.prompts_deny,
        incumbents=set(incumbents),
    )
    for layer in later:
        planned = planned.narrowed(allow=layer.prompts_allow, deny=layer.prompts_deny)
    return planned


def build_prompts(
    servers: Sequence[UpstreamServer],
    listed: Mapping[str, Iterable[Mapping[str, Any]]],
    previous: PromptCatalog | None = None,
) -> PromptCatalog:
    """The prompt catalog of ``servers`` given the prompts each listed (by server key)."""
    held: dict[str, set[str]] = {}
    for entry in previous.entries.values() if previous is not None else ():
        held.setdefault(entry.server, set()).add(entry.original_name)
    entries: dict[str, PromptEntry] = {}
    collisions: list[str] = []
    for server in servers:
        key = _key(server)
        planned = plan_prompts(server, listed.get(key, ()), held.get(key, ()))
        collisions.extend(
            f"{key}: prompts {naming.quoted(r.holder)} and {naming.quoted(r.original_name)} "
            f"both map to {r.wanted}; {naming.quoted(r.holder)} keeps it"
            for r in planned.refused
        )
        for exposed_name, item in planned.exposed.items():
            if exposed_name in entries:
                collisions.append(
                    f"prompt {exposed_name} of {key} is also a prompt of "
                    f"{entries[exposed_name].server}; the first keeps it"
                )
                continue
            entries[exposed_name] = PromptEntry(exposed_name, key, item.name, dict(item.prompt))
    return PromptCatalog(entries=entries, collisions=collisions)
