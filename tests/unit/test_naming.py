"""Exposed names, the default prefix, globs and tool selection (mcp_operator.mcp.naming)."""

from __future__ import annotations

import hashlib
import re

import pytest

from mcp_operator.mcp.naming import (
    MAX_STATUS_TOOLS,
    RawTool,
    default_prefix,
    exposed_name,
    is_valid_prefix,
    is_valid_tool_name,
    matches,
    select_tools,
)


def tool(name: str, description: str | None = None, **annotations: object) -> RawTool:
    return RawTool(name=name, description=description, annotations=annotations or None)


def sha8(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


# exposed_name


def test_exposed_name_is_prefix_underscore_original() -> None:
    assert exposed_name("github", "create_issue") == "github_create_issue"
    assert exposed_name("srv", "get-env") == "srv_get-env"


def test_exposed_name_replaces_dots_and_other_characters_with_underscore() -> None:
    assert exposed_name("srv", "search.docs") == "srv_search_docs"
    assert exposed_name("srv", "a b/c:d") == "srv_a_b_c_d"


def test_exposed_name_of_exactly_64_characters_is_kept() -> None:
    original = "t" * (64 - len("srv_"))
    assert exposed_name("srv", original) == f"srv_{original}"


def test_long_exposed_name_keeps_55_characters_then_the_hash_of_the_original() -> None:
    original = "tool_" + "x" * 100
    name = exposed_name("srv", original)
    assert len(name) == 64
    assert name == f"srv_{original}"[:55] + "_" + sha8(original)
    assert exposed_name("srv", original) == name  # deterministic


def test_long_names_with_the_same_start_get_different_exposed_names() -> None:
    first, second = "a" * 100 + "1", "a" * 100 + "2"
    assert exposed_name("srv", first) != exposed_name("srv", second)


def test_exposed_names_always_fit_the_llm_name_rules() -> None:
    for original in ("x", "a.b.c", "ü" * 50, "y" * 128, "-._"):
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", exposed_name("some-prefix", original))


# default_prefix


@pytest.mark.parametrize(
    ("metadata_name", "prefix"),
    [
        ("github", "github"),
        ("github.tools", "github-tools"),
        ("My_Server", "my_server"),
        ("1password", "m1password"),
        ("-weird-", "m-weird"),
        ("", "m"),
        ("a" * 40, "a" * 32),
        ("abc" + "-" * 40, "abc"),
    ],
)
def test_default_prefix_follows_the_single_rule(metadata_name: str, prefix: str) -> None:
    assert default_prefix(metadata_name) == prefix
    assert is_valid_prefix(prefix)


def test_default_prefix_is_always_a_valid_prefix() -> None:
    for name in ("x" * 253, "0", "....", "a.b.c.d", "Ünïcödé", "z-" * 20):
        assert is_valid_prefix(default_prefix(name)), name


# is_valid_tool_name


def test_valid_tool_names_are_1_to_128_of_the_allowed_characters() -> None:
    assert is_valid_tool_name("a")
    assert is_valid_tool_name("search.docs-v2_X")
    assert is_valid_tool_name("x" * 128)
    for bad in ("", "x" * 129, "bad name", "bang!", "ünï", "tab\tname", "a/b"):
        assert not is_valid_tool_name(bad), bad


# matches


def test_star_matches_any_run_including_dots_and_empty() -> None:
    assert matches(["get-*"], "get-env")
    assert matches(["get-*"], "get-")
    assert matches(["*"], "search.docs")
    assert matches(["a*z"], "a.b.z")


def test_question_mark_matches_exactly_one_character() -> None:
    assert matches(["get-su?"], "get-sum")
    assert not matches(["get-su?"], "get-su")
    assert not matches(["get-su?"], "get-summ")


def test_bracket_is_literal_not_a_character_class() -> None:
    assert matches(["a[b]"], "a[b]")
    assert not matches(["a[b]"], "ab")
    assert not matches(["[ab]"], "a")


def test_other_regex_characters_are_literal() -> None:
    assert matches(["a.b"], "a.b")
    assert not matches(["a.b"], "axb")
    assert matches(["(x)+"], "(x)+")


def test_matching_is_case_sensitive_and_whole_name() -> None:
    assert not matches(["echo"], "Echo")
    assert not matches(["echo"], "echo2")
    assert not matches([], "echo")


# select_tools: filters


TOOLS = [tool("echo"), tool("get-env"), tool("get-sum"), tool("delete.all")]


def exposed(tools: list[RawTool], **kwargs: object) -> list[str]:
    return [t.name for t in select_tools(tools, prefix="srv", **kwargs).tools]  # type: ignore[arg-type]


def test_empty_allow_selects_every_tool() -> None:
    assert exposed(TOOLS) == ["srv_delete_all", "srv_echo", "srv_get-env", "srv_get-sum"]


def test_allow_narrows_and_deny_applies_after_allow() -> None:
    assert exposed(TOOLS, allow=["get-*"]) == ["srv_get-env", "srv_get-sum"]
    assert exposed(TOOLS, allow=["get-*"], deny=["get-env"]) == ["srv_get-sum"]
    assert exposed(TOOLS, allow=["echo"], deny=["*"]) == []


def test_deny_alone_removes_from_all() -> None:
    assert exposed(TOOLS, deny=["delete.*"]) == ["srv_echo", "srv_get-env", "srv_get-sum"]


def test_counts_are_before_and_after_the_filters() -> None:
    selection = select_tools(TOOLS, prefix="srv", allow=["get-*"])
    assert (selection.discovered, selection.selected) == (4, 2)


def test_allow_patterns_that_match_no_tool_are_reported_once() -> None:
    selection = select_tools(TOOLS, prefix="srv", allow=["get-*", "ehco", "ehco", "nope?"])
    assert selection.unmatched_allow == ["ehco", "nope?"]


def test_an_allow_pattern_matching_only_a_denied_tool_is_not_unmatched() -> None:
    selection = select_tools(TOOLS, prefix="srv", allow=["echo"], deny=["echo"])
    assert selection.unmatched_allow == []
    assert selection.selected == 0


# select_tools: names


def test_tools_are_sorted_by_exposed_name_and_keep_their_original_name() -> None:
    selection = select_tools([tool("b"), tool("a.x"), tool("A")], prefix="p")
    assert [(t.name, t.original_name) for t in selection.tools] == [
        ("p_A", "A"),
        ("p_a_x", "a.x"),
        ("p_b", "b"),
    ]


def test_collision_keeps_the_first_by_original_name_and_hashes_the_second() -> None:
    forward = select_tools([tool("a.b"), tool("a_b")], prefix="srv")
    backward = select_tools([tool("a_b"), tool("a.b")], prefix="srv")
    assert forward == backward  # the server's order does not matter
    names = {t.original_name: t.name for t in forward.tools}
    assert names == {"a.b": "srv_a_b", "a_b": f"srv_a_b_{sha8('a_b')}"}
    assert forward.collisions == [
        f"'a.b' and 'a_b' both map to srv_a_b; the second is exposed as srv_a_b_{sha8('a_b')}"
    ]
    assert forward.selected == 2


def test_collision_of_long_names_with_the_same_start_is_resolved() -> None:
    first, second = "x" * 80 + ".a", "x" * 80 + "_a"
    selection = select_tools([tool(first), tool(second)], prefix="srv")
    names = [t.name for t in selection.tools]
    assert len(set(names)) == 2
    assert all(len(name) <= 64 for name in names)


def test_a_hashed_name_that_is_already_taken_is_not_reused() -> None:
    hashed_original = f"a_b_{sha8('a_b')}"  # exposes exactly as the hash form of a_b
    selection = select_tools([tool("a.b"), tool("a_b"), tool(hashed_original)], prefix="srv")
    names = [t.name for t in selection.tools]
    assert len(names) == 3
    assert len(set(names)) == 3
    assert len(selection.collisions) == 2


def test_a_tool_listed_twice_is_exposed_once_and_reported() -> None:
    selection = select_tools([tool("dup", "first"), tool("dup", "second")], prefix="srv")
    assert [t.name for t in selection.tools] == ["srv_dup"]
    assert selection.selected == 1
    assert selection.collisions == [
        "'dup' is listed more than once by the server; it is exposed once"
    ]


def test_invalid_names_are_excluded_and_reported() -> None:
    bad = ["bad name!", "x" * 200, "", "ünï"]
    selection = select_tools([tool("ok"), *(tool(n) for n in bad)], prefix="srv")
    assert [t.name for t in selection.tools] == ["srv_ok"]
    assert selection.invalid == sorted(bad)
    assert (selection.discovered, selection.selected) == (5, 1)


def test_invalid_names_removed_by_the_filters_are_not_reported() -> None:
    selection = select_tools([tool("ok"), tool("bad name!")], prefix="srv", deny=["bad*"])
    assert selection.invalid == []


# select_tools: status bounds


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
