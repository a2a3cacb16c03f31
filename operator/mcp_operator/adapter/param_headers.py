"""``Mcp-Param-*`` headers of 2026-07-28 tool calls, checked against the child's own tool schemas.

Owns what the adapter remembers of the child's tools for this check and the
check itself: only the input schemas that annotate properties with
``x-mcp-header`` are kept (by tool name, at most ``MAX_TOOLS``), learnt from
every ``tools/list`` result the child gives (the adapter lists once after
each handshake; callers' listings refresh it) and forgotten when the child
says its list changed or restarts. A call to a tool whose schema is not
known is not checked. The comparison itself is the SDK's
(``validate_mcp_param_headers``): the adapter refuses what the SDK's own
server refuses, ``-32020`` with HTTP 400. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from mcp.shared.inbound import InboundLadderRejection, validate_mcp_param_headers

MAX_TOOLS: Final = 1000
PARAM_HEADER_PREFIX: Final = b"mcp-param-"


def _annotated(schema: Any) -> bool:
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return isinstance(properties, dict) and any(
        isinstance(p, dict) and "x-mcp-header" in p for p in properties.values()
    )


class ToolHeaderSchemas:
    """The child's tool input schemas that declare ``x-mcp-header`` properties."""

    def __init__(self) -> None:
        self._schemas: dict[str, dict[str, Any]] = {}

    def __len__(self) -> int:
        return len(self._schemas)

    def learn(self, result: Any) -> None:
        """Remember the annotated schemas of one ``tools/list`` result (page)."""
        tools = result.get("tools") if isinstance(result, dict) else None
        if not isinstance(tools, list):
            return
        for tool in tools:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            schema = tool.get("inputSchema")
            if isinstance(schema, dict) and _annotated(schema):
                if len(self._schemas) < MAX_TOOLS or tool["name"] in self._schemas:
                    self._schemas[tool["name"]] = schema
            else:
                self._schemas.pop(tool["name"], None)

    def forget(self) -> None:
        """The child's tool list changed (or the child restarted)."""
        self._schemas.clear()

    def check(
        self, params: Mapping[str, Any], raw_headers: Iterable[tuple[bytes, bytes]]
    ) -> InboundLadderRejection | None:
        """A ``tools/call``'s ``Mcp-Param-*`` headers against the tool's schema, if known."""
        name = params.get("name")
        schema = self._schemas.get(name) if isinstance(name, str) else None
        if schema is None:
            return None
        arguments = params.get("arguments")
        headers = {
            key.decode("latin-1"): value.decode("latin-1").strip(" \t")
            for key, value in raw_headers
            if key.lower().startswith(PARAM_HEADER_PREFIX)
        }
        return validate_mcp_param_headers(
            schema, arguments if isinstance(arguments, dict) else {}, headers
        )
