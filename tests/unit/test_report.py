"""The status fields and warnings of a probe (mcp_operator.controller.mcpserver.report)."""

from __future__ import annotations

from typing import Any

from mcp_operator.controller.mcpserver.report import (
    MAX_STATUS_TOOLS,
    StatusTools,
    status_fields,
    status_tools,
    warnings,
)
from mcp_operator.mcp.discovery import DiscoveredTool as RawTool
from mcp_operator.mcp.discovery import Discovery
from mcp_operator.mcp.naming import plan


def select_tools(tools: list[RawTool], *, prefix: str, **filters: list[str]) -> StatusTools:
    """The naming plan bounded for status, as the reconciler builds it."""
    return status_tools(plan(tools, prefix=prefix, **filters))


def tool(name: str, description: str | None = None, **annotations: object) -> RawTool:
    return RawTool(name=name, description=description, annotations=annotations or None)


def discovery(tools: list[RawTool], **info: Any) -> Discovery:
    fields: dict[str, Any] = {
        "server_name": "demo",
        "server_version": "1.2.3",
        "protocol_version": "2025-11-25",
        "list_changed": False,
    }
    fields.update(info)
    return Discovery(tools=tools, **fields)


def no_none(value: Any) -> bool:
    if isinstance(value, dict):
        return all(v is not None and no_none(v) for v in value.values())
    if isinstance(value, list):
        return all(v is not None and no_none(v) for v in value)
    return value is not None


def test_status_fields_are_exactly_the_camel_case_status_shape() -> None:
    tools = [
        RawTool("search.docs", "Searches", {"title": "Search", "readOnlyHint": True}),
        RawTool("echo", None, None),
        RawTool("hidden", "x", None),
    ]
    found = discovery(tools)
    fields = status_fields(found, select_tools(tools, prefix="srv", deny=["hidden"]))
    assert fields == {
        "tools": [
            {"name": "srv_echo", "originalName": "echo"},
            {
                "name": "srv_search_docs",
                "originalName": "search.docs",
                "description": "Searches",
                "annotations": {"title": "Search", "readOnlyHint": True},
            },
        ],
        "toolCount": 2,
        "discoveredToolCount": 3,
        "serverInfo": {"name": "demo", "protocolVersion": "2025-11-25", "version": "1.2.3"},
    }


def test_status_fields_never_hold_none_values() -> None:
    found = discovery([RawTool("t", None, None)], server_name=None, server_version=None)
    fields = status_fields(found, select_tools(found.tools, prefix="p"))
    assert no_none(fields)
    assert fields["serverInfo"] == {"protocolVersion": "2025-11-25"}


def test_server_info_text_is_bounded() -> None:
    found = discovery([], server_name="n" * 1000, server_version="v" * 1000)
    info = status_fields(found, select_tools([], prefix="p"))["serverInfo"]
    assert len(info["name"]) == 256
    assert len(info["version"]) == 128


def test_tool_count_counts_tools_cut_from_the_list() -> None:
    tools = [RawTool(f"t{i:03d}", None, None) for i in range(300)]
    fields = status_fields(discovery(tools), select_tools(tools, prefix="p"))
    assert len(fields["tools"]) == 256
    assert fields["toolCount"] == 300
    assert fields["discoveredToolCount"] == 300


def test_a_clean_selection_has_no_warnings() -> None:
    assert warnings(select_tools([RawTool("echo", None, None)], prefix="p", allow=["e*"])) == []


def test_warnings_name_collisions_invalid_names_unmatched_allow_and_truncation() -> None:
    tools = [RawTool(n, None, None) for n in ("a.b", "a_b", "bad name!", "dup", "dup")]
    tools += [RawTool(f"t{i:03d}", None, None) for i in range(300)]
    selection = select_tools(tools, prefix="srv", allow=["*", "ehco"])
    assert warnings(selection) == [
        "Tool name collision: 'a.b' and 'a_b' both map to srv_a_b; "
        "'a.b' keeps it and 'a_b' is not exposed.",
        "Tool name collision: 'dup' is listed more than once by the server; it is exposed once.",
        "1 tool is not exposed because the name is not a valid MCP tool name "
        "(1 to 128 of A-Z a-z 0-9 _ . -): 'bad name!'.",
        "toolsAllow pattern matches no tool of the server: 'ehco'.",
        "status.tools lists the first 256 of 302 exposed tools (by name); "
        "toolCount counts them all.",
    ]


def test_many_problems_make_a_bounded_number_of_warnings() -> None:
    tools = [RawTool(f"x.{i}", None, None) for i in range(50)]
    tools += [RawTool(f"x_{i}", None, None) for i in range(50)]
    tools += [RawTool(f"bad {i}", None, None) for i in range(50)]
    selection = select_tools(tools, prefix="p", allow=["*", *(f"typo{i}" for i in range(20))])
    found = warnings(selection)
    assert len(found) == 5 + 1 + 1 + 1
    assert found[5] == "45 more tool name collisions were resolved the same way."
    assert found[6].startswith("50 tools are not exposed")
    assert found[6].endswith("'bad 12' and 45 more.")
    assert found[7].endswith("'typo4' and 15 more.")
    assert all(len(w) < 600 for w in found)


def test_hostile_names_in_warnings_are_quoted_and_cut() -> None:
    name = "evil\nname " + "z" * 500
    found = warnings(select_tools([RawTool(name, None, None)], prefix="p"))
    assert "\n" not in found[0]
    assert len(found[0]) < 250


# status bounds (moved from the naming tests: bounding is the status's job)


def test_description_is_cut_to_1024_characters_ending_with_an_ellipsis() -> None:
    selection = select_tools([tool("long", "d" * 5000), tool("short", "fine")], prefix="p")
    long, short = selection.tools
    assert len(long.description) == 1024
    assert long.description.endswith("…")
    assert long.description[:1023] == "d" * 1023
    assert short.description == "fine"


def test_a_description_of_exactly_1024_characters_is_kept_whole() -> None:
    (only,) = select_tools([tool("t", "e" * 1024)], prefix="p").tools
    assert only.description == "e" * 1024


def test_missing_description_becomes_empty() -> None:
    (only,) = select_tools([tool("t")], prefix="p").tools
    assert only.description == ""


def test_annotations_keep_only_title_and_the_four_boolean_hints() -> None:
    annotations = {
        "title": "T" * 300,
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": "yes",  # not a boolean: dropped
        "vendorThing": {"big": "x" * 1000},
    }
    (only,) = select_tools([RawTool("t", None, annotations)], prefix="p").tools
    assert only.annotations == {
        "title": "T" * 255 + "…",
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
    }


def test_more_than_256_selected_tools_are_cut_but_counted() -> None:
    tools = [tool(f"tool_{i:04d}") for i in range(MAX_STATUS_TOOLS + 44)]
    selection = select_tools(list(reversed(tools)), prefix="p")
    assert len(selection.tools) == MAX_STATUS_TOOLS
    assert selection.truncated
    assert selection.selected == MAX_STATUS_TOOLS + 44
    assert selection.tools[0].name == "p_tool_0000"
    assert selection.tools[-1].name == f"p_tool_{MAX_STATUS_TOOLS - 1:04d}"


def test_exactly_256_tools_are_not_truncated() -> None:
    selection = select_tools([tool(f"t{i}") for i in range(MAX_STATUS_TOOLS)], prefix="p")
    assert not selection.truncated
    assert len(selection.tools) == MAX_STATUS_TOOLS


def test_a_discovered_tool_is_kept_whole_but_its_repr_stays_small() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string", "description": "q" * 5000}}}
    listed = RawTool("t", "d" * 100_000, {"vendor": "v" * 5000}, "T" * 5000, schema)
    assert listed.input_schema is schema
    assert len(repr(listed)) < 100
    (shown,) = select_tools([listed], prefix="p").tools
    assert shown.annotations == {"title": "T" * 255 + "…"}
