"""The bridge's tool catalog: exposed name → server, original name, input schema, hints.

Built from the configuration's servers and the tools each one listed, through the shared
naming plan: :func:`mcp_operator.mcp.naming.plan` with the server's own filters (the first
layer), narrowed by the run's (the later layers), so that the names equal the servers'
``status.tools`` whatever the run removed. **Pins** are keyed by server and original name: when
the configuration lists a server's ``tools`` (the original names the operator's probe saw),
only those are planned, and they are the plan's incumbents, so a tool the server adds later
(``search.docs`` next to a probed ``search_docs``, both ``docs_search_docs``) is neither
listed nor able to take the name over. Without pins the tools of the previous catalog are the
incumbents. A collision is never a takeover: the later tool is left out and reported. The
catalog is the allowlist: a name that is not in it is not callable. Collisions across servers
are reported and the first server in the configuration's order keeps the name. Listing tools
and talking to servers is left to others.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp_operator.api.bridge import UpstreamServer
from mcp_operator.api.bridge_filters import FilterLayer
from mcp_operator.bridge.overrides import overridden
from mcp_operator.bridge.pinning import Drift, drift
from mcp_operator.mcp import naming, uris
from mcp_operator.mcp.definitions import definition_digest


def server_key(server: UpstreamServer) -> str:
    """How the bridge names a server: ``namespace/name``."""
    return f"{server.namespace}/{server.name}"


def schema_digest(schema: Any) -> str:
    """SHA-256 of the canonical JSON of a schema (the key of the compiled-validator cache)."""
    canonical = json.dumps(schema, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class CatalogEntry:
    """One tool the agent may call."""

    exposed_name: str
    """``<prefix>_<tool>``: what the agent calls."""
    server: str
    """The server's key, ``namespace/name``."""
    original_name: str
    """The name the server knows the tool by."""
    input_schema: Any
    """The ``inputSchema`` as the server sent it (untrusted, maybe broken)."""
    annotations: Mapping[str, Any] = field(default_factory=dict)
    """The tool's annotations as the server sent them (``readOnlyHint``, …)."""
    schema_key: str = ""
    """:func:`schema_digest` of ``input_schema``; computed when left empty."""
    definition: Mapping[str, Any] = field(default_factory=dict)
    """The whole tool as the server listed it (description, title, outputSchema, ``_meta``
    …), for ``tools/list``; :meth:`listed` renames it."""

    fixed_arguments: Mapping[str, Any] = field(default_factory=dict)
    """Arguments the server's owner fixed (:mod:`~mcp_operator.bridge.overrides`): not in
    ``input_schema``, merged into every call after validation."""
    sha256: str = ""
    """:func:`~mcp_operator.mcp.definitions.definition_digest` of the server's own live
    definition (before any override)."""
    drift: Drift | None = None
    """Why the live definition is not the pinned one (:func:`~mcp_operator.bridge.pinning.
    drift`): such a tool is left out of ``tools/list`` and its calls are refused."""

    def listed(self) -> dict[str, Any]:
        """The tool as the agent's ``tools/list`` shows it: as sent, under the exposed name."""
        return {**self.definition, "name": self.exposed_name}

    def __post_init__(self) -> None:
        if not self.schema_key:
            object.__setattr__(self, "schema_key", schema_digest(self.input_schema))


@dataclass(frozen=True)
class Catalog:
    """Every callable tool of the run, by exposed name, and what went wrong building it."""

    entries: Mapping[str, CatalogEntry]
    collisions: Sequence[str] = ()
    """One sentence per exposed name that two tools wanted (the later one was left out or
    renamed)."""

    def get(self, exposed_name: str) -> CatalogEntry | None:
        return self.entries.get(exposed_name)

    def names(self) -> list[str]:
        """Exposed names in the deterministic order ``tools/list`` uses."""
        return sorted(self.entries)

    def listing(self) -> list[dict[str, Any]]:
        """Every tool for the agent's ``tools/list``, in the order of :meth:`names`, but those
        whose live definition is not the pinned one."""
        return [
            self.entries[name].listed() for name in self.names() if self.entries[name].drift is None
        ]

    def similar(self, name: str, limit: int = 3) -> list[str]:
        """Callable names close to ``name`` (for a hint when ``name`` is not allowed)."""
        close = difflib.get_close_matches(name, self.entries.keys(), n=limit, cutoff=0.6)
        if close:
            return close
        # A name whose tool part exists under another prefix: suggest those.
        tail = name.split("_", 1)[-1]
        return sorted(e for e, entry in self.entries.items() if entry.original_name == tail)[:limit]


@dataclass(frozen=True)
class _Listed:
    """A tool as the server listed it, named for the plan."""

    name: str
    tool: Mapping[str, Any]


def plan_server(
    server: UpstreamServer,
    tools: Iterable[Mapping[str, Any]],
    incumbents: Collection[str] = (),
) -> naming.ToolPlan[_Listed]:
    """The server's tools, only the pinned ones when it has pins, through its filter layers,
    named by the plan (pins, else ``incumbents``, keep their names in a collision)."""
    listed = [_Listed(str(t["name"]), t) for t in tools if isinstance(t.get("name"), str)]
    if server.tools is not None:
        pinned = set(server.tools)
        listed = [tool for tool in listed if tool.name in pinned]
        incumbents = pinned
    first, *later = server.filters or [FilterLayer()]
    planned = naming.plan(
        listed, prefix=server.prefix, allow=first.allow, deny=first.deny, incumbents=incumbents
    )
    for layer in later:
        planned = planned.narrowed(allow=layer.allow, deny=layer.deny)
    return planned


def build_catalog(
    servers: Sequence[UpstreamServer],
    listed: Mapping[str, Iterable[Mapping[str, Any]]],
    previous: Catalog | None = None,
) -> Catalog:
    """The catalog of ``servers`` given the tools each listed (``listed[server_key]``, the
    tools as the server sent them; a server missing from ``listed`` contributes nothing).
    The tools of ``previous`` keep their names in a collision with a newcomer."""
    entries: dict[str, CatalogEntry] = {}
    collisions: list[str] = []
    held: dict[str, set[str]] = {}
    for entry in previous.entries.values() if previous is not None else ():
        held.setdefault(entry.server, set()).add(entry.original_name)
    for server in servers:
        key = server_key(server)
        overrides = {o.name: o for o in server.overrides}
        planned = plan_server(server, listed.get(key, ()), held.get(key, set()))
        collisions.extend(
            f"{key}: {naming.quoted(r.holder)} and {naming.quoted(r.original_name)} both map "
            f"to {r.wanted}; {naming.quoted(r.holder)} keeps it and "
            f"{naming.quoted(r.original_name)} is left out"
            for r in planned.refused
        )
        for exposed_name, listed_tool in planned.exposed.items():
            tool = listed_tool.tool
            if exposed_name in entries:
                collisions.append(
                    f"{exposed_name} of {key} is also a tool of {entries[exposed_name].server}; "
                    f"the first keeps it"
                )
                continue
            annotations = tool.get("annotations")
            live = definition_digest(tool)  # the server's own definition is what is pinned
            override = overrides.get(listed_tool.name)
            definition, schema = overridden(tool, override)
            entries[exposed_name] = CatalogEntry(
                exposed_name=exposed_name,
                server=key,
                original_name=listed_tool.name,
                input_schema=schema,
                annotations=dict(annotations) if isinstance(annotations, Mapping) else {},
                definition=uris.with_exposed_ui(server.prefix, definition),
                fixed_arguments=dict(override.fixed_arguments or {}) if override else {},
                sha256=live,
                drift=drift(server, listed_tool.name, live),
            )
    return Catalog(entries=entries, collisions=collisions)
