"""What the adapter answers itself in each era, and how results are shaped for 2026-07-28."""

from __future__ import annotations

import argparse

import pytest
from mcp_types import SERVER_INFO_META_KEY
from mcp_types import methods as _methods

from mcp_operator.adapter import config
from mcp_operator.serve import era

CHILD = {
    "protocolVersion": "2025-06-18",
    "capabilities": {"tools": {"listChanged": True}},
    "serverInfo": {"name": "child", "version": "1.0"},
    "instructions": "be nice",
}


@pytest.mark.parametrize(
    ("requested", "child", "expected"),
    [
        ("2025-06-18", "2025-11-25", "2025-06-18"),
        ("2025-11-25", "2025-06-18", "2025-06-18"),
        ("2099-01-01", "2025-11-25", "2025-11-25"),
        ("2026-07-28", "2025-11-25", "2025-11-25"),
        (None, "2025-06-18", "2025-06-18"),
    ],
)
def test_a_session_never_gets_a_newer_version_than_the_child_speaks(
    requested: object, child: str, expected: str
) -> None:
    assert era.negotiate_version(requested, child) == expected


def test_initialize_answers_with_the_childs_identity_and_capabilities() -> None:
    result = era.initialize_result(CHILD, "2025-11-25")
    assert result["protocolVersion"] == "2025-06-18"
    assert result["serverInfo"] == {"name": "child", "version": "1.0"}
    assert result["capabilities"] == {"tools": {"listChanged": True}}


def test_discover_validates_against_the_2026_surface_and_carries_the_stamp() -> None:
    result = era.discover_result(CHILD, "2026-07-28")
    _methods.validate_server_result("server/discover", "2026-07-28", result)
    assert result["supportedVersions"] == ["2026-07-28"]
    assert result["_meta"][SERVER_INFO_META_KEY]["name"] == "child"


def test_a_legacy_tools_list_is_reshaped_into_a_valid_2026_result() -> None:
    legacy = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    result = era.modern_result("tools/list", "2026-07-28", legacy, CHILD["serverInfo"])
    _methods.validate_server_result("tools/list", "2026-07-28", result)
    assert result["ttlMs"] == 0 and result["cacheScope"] == "private"
    assert result["resultType"] == "complete"


def test_the_2026_envelope_is_stripped_for_a_legacy_child_but_progress_kept() -> None:
    params = {
        "name": "echo",
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "progressToken": 4,
        },
    }
    assert era.strip_envelope(params) == {"name": "echo", "_meta": {"progressToken": 4}}


def test_flags_win_over_environment_and_the_command_follows_the_double_dash() -> None:
    parser = argparse.ArgumentParser()
    config.add_arguments(parser)
    args = parser.parse_args(["--port", "9000", "--allowed-host", "svc", "--", "node", "x.js"])
    built = config.from_args(args, {"MCP_ADAPTER_PORT": "1", "MCP_ADAPTER_PATH": "/m"})
    assert built.port == 9000 and built.path == "/m"
    assert built.allowed_hosts == ("svc",) and built.command == ("node", "x.js")


def test_a_missing_command_is_an_error_that_says_how() -> None:
    parser = argparse.ArgumentParser()
    config.add_arguments(parser)
    with pytest.raises(ValueError, match="after --"):
        config.from_args(parser.parse_args(["--port", "9000"]), {})


def test_tool_schemas_pass_through_the_2026_reshaping_unchanged() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"a": {"$anchor": "a", "type": "string"}},
        "properties": {"kind": {"type": "string"}, "x": {"$ref": "#a"}},
        "allOf": [{"anyOf": [{"required": ["kind"]}, {"required": ["x"]}]}],
        "if": {"properties": {"kind": {"const": "b"}}},
        "then": {"required": ["x"]},
        "else": {"not": {"required": ["x"]}},
        "additionalProperties": False,
    }
    tool = {"name": "t", "inputSchema": schema, "outputSchema": {**schema, "$id": "urn:t"}}
    shaped = era.modern_result("tools/list", "2026-07-28", {"tools": [tool]}, None)
    assert shaped["tools"] == [tool]


TOOL_RESULTS = [
    # Taken as they are (text items only):
    {"content": [{"type": "text", "text": "Echo: hi"}]},
    {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "é\u2028\x00"}]},
    {"content": [{"type": "text", "text": "failed"}], "isError": True},
    {"content": [{"type": "text", "text": "fine"}], "isError": False},
    {"content": []},
    # Sieved by the SDK's surface (something in them it drops, reshapes or validates):
    {"content": [{"type": "text", "text": "a", "annotations": None}], "isError": None},
    {"content": [{"type": "text", "text": "a", "_meta": {"x": None}}], "extra": 1},
    {"content": [{"type": "text", "text": 3}]},
    {"content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}]},
    {"content": [{"type": "text", "text": "a"}], "structuredContent": {"a": None}},
    {"content": [{"type": "text", "text": "a"}], "_meta": {"k": {"z": None}}},
    {"content": [{"type": "text", "text": "a"}], "isError": 1},
    {"content": [{"type": "text", "text": "a"}], "resultType": "input_required"},
    {"content": "text"},
    {},
]


@pytest.mark.parametrize("result", TOOL_RESULTS)
@pytest.mark.parametrize("version", sorted(era.MODERN_PROTOCOL_VERSIONS))
def test_a_tool_result_taken_as_it_is_equals_the_sdks_surface_dump(
    result: dict[str, object], version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = era.modern_result("tools/call", version, result, CHILD["serverInfo"])
    monkeypatch.setattr(era, "_surface_shaped", lambda *_: False)
    assert fast == era.modern_result("tools/call", version, result, CHILD["serverInfo"])


def test_text_results_skip_the_surface_and_others_do_not() -> None:
    shaped = [era._surface_shaped("tools/call", "2026-07-28", {"resultType": "complete", **r})
              for r in TOOL_RESULTS]  # fmt: skip
    assert shaped == [True] * 5 + [False] * 10
    assert not era._surface_shaped("prompts/get", "2026-07-28", {"resultType": "complete"})
