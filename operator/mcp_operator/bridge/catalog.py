"""The bridge's tool catalog: exposed name → server, original name, input schema, hints.

Built from the configuration's servers and the tools each one listed: every server's filter
layers, then the shared naming plan (:func:`mcp_operator.mcp.naming.select_tools`, so the
names equal the servers' ``status.tools``). The catalog is the allowlist: a name that is not
in it is not callable. Collisions across servers are reported and the first server in the
configuration's order keeps the name. Listing tools and talking to servers is left to others.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp_operator.api.bridge import UpstreamServer
from mcp_operator.mcp.naming import RawTool, select_tools


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
        """Every tool for the agent's ``tools/list``, in the order of :meth:`names`."""
        return [self.entries[name].listed() for name in self.names()]

    def similar(self, name: str, limit: int = 3) -> list[str]:
        """Callable names close to ``name`` (for a hint when ``name`` is not allowed)."""
        close = difflib.get_close_matches(name, self.entries.keys(), n=limit, cutoff=0.6)
        if close:
            return close
        # A name whose tool part exists under another prefix: suggest those.
        tail = name.split("_", 1)[-1]
        return sorted(e for e, entry in self.entries.items() if entry.original_name == tail)[:limit]


def _raw(tool: Mapping[str, Any]) -> RawTool:
    annotations = tool.get("annotations")
    description = tool.get("description")
    return RawTool(
        name=str(tool.get("name", "")),
        description=description if isinstance(description, str) else None,
        annotations=dict(annotations) if isinstance(annotations, Mapping) else None,
    )


def build_catalog(
    servers: Sequence[UpstreamServer], listed: Mapping[str, Iterable[Mapping[str, Any]]]
) -> Catalog:
    """The catalog of ``servers`` given the tools each listed (``listed[server_key]``, the
    tools as the server sent them; a server missing from ``listed`` contributes nothing)."""
    entries: dict[str, CatalogEntry] = {}
    collisions: list[str] = []
    for server in servers:
        key = server_key(server)
        tools = {
            str(tool.get("name")): tool
            for tool in listed.get(key, ())
            if isinstance(tool.get("name"), str) and server.allows(str(tool.get("name")))
        }
        selection = select_tools([_raw(t) for t in tools.values()], prefix=server.prefix)
        collisions.extend(f"{key}: {sentence}" for sentence in selection.collisions)
        for exposed in selection.tools:
            tool = tools[exposed.original_name]
            if exposed.name in entries:
                collisions.append(
                    f"{exposed.name} of {key} is also a tool of {entries[exposed.name].server}; "
                    f"the first keeps it"
                )
                continue
            annotations = tool.get("annotations")
            entries[exposed.name] = CatalogEntry(
                exposed_name=exposed.name,
                server=key,
                original_name=exposed.original_name,
                input_schema=tool.get("inputSchema"),
                annotations=dict(annotations) if isinstance(annotations, Mapping) else {},
                definition=dict(tool),
            )
    return Catalog(entries=entries, collisions=collisions)
