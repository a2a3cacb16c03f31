"""Tool overrides (``spec.toolsOverride`` of the MCPServer): our text, and arguments we fix.

An override names a tool by its original name and may give it another ``title`` and
``description`` (what the agent's ``tools/list`` shows) and ``fixedArguments``: values the
bridge sends whatever the agent says. Fixed arguments are removed from the ``inputSchema``
the agent sees (from ``properties`` and ``required``); the agent's arguments are validated
against that schema, and the fixed values are merged in after validation, so a call that
names a fixed argument is refused (``invalid_arguments``): a run cannot change them. The pin
(:mod:`~mcp_operator.bridge.pinning`) covers the server's original definition; the override
is ours and is not pinned. Applying overrides when the catalog is built is this module's job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_operator.api.bridge import ToolOverride
from mcp_operator.bridge.errors import ToolError


def overridden(
    tool: Mapping[str, Any], override: ToolOverride | None
) -> tuple[dict[str, Any], Any]:
    """The tool as the agent sees it (its definition for ``tools/list``) and the schema its
    arguments are validated against."""
    definition = dict(tool)
    schema = tool.get("inputSchema")
    if override is None:
        return definition, schema
    if override.title is not None:
        definition["title"] = override.title
        annotations = definition.get("annotations")
        if isinstance(annotations, Mapping) and "title" in annotations:
            definition["annotations"] = {**annotations, "title": override.title}
    if override.description is not None:
        definition["description"] = override.description
    fixed = override.fixed_arguments or {}
    if fixed and isinstance(schema, Mapping):
        schema = dict(schema)
        properties = schema.get("properties")
        if isinstance(properties, Mapping):
            schema["properties"] = {k: v for k, v in properties.items() if k not in fixed}
        required = schema.get("required")
        if isinstance(required, list):
            schema["required"] = [name for name in required if name not in fixed]
        definition["inputSchema"] = schema
    return definition, schema


def fixed_named(exposed_name: str, names: list[str]) -> ToolError:
    """``invalid_arguments``: the agent tried to set arguments the server's owner fixed."""
    listed = ", ".join(names)
    return ToolError(
        "invalid_arguments",
        f"{exposed_name} does not take {listed}: the server's configuration fixes "
        f"{'it' if len(names) == 1 else 'them'} for every call. Call it again without "
        f"{listed}; the call was not sent.",
        {"fixed": names},
    )
