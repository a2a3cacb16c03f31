"""Exposed names, the default prefix, globs and the naming plan (mcp_operator.mcp.naming)."""

from __future__ import annotations

import hashlib
import random
import re

import pytest

from mcp_operator.controller.mcpserver.report import StatusTools, status_tools
from mcp_operator.mcp.discovery import DiscoveredTool as RawTool
from mcp_operator.mcp.naming import (
    Dropped,
    Refused,
    ToolPlan,
    default_prefix,
    exposed_name,
    is_valid_prefix,
    is_valid_tool_name,
    matches,
    plan,
)


def select_tools(tools: list[RawTool], *, prefix: str, **filters: list[str]) -> StatusTools:
    """The plan as the MCPServer status shows it (the selection these tests were written for)."""
    return status_tools(plan(tools, prefix=prefix, **filters))


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


def test_collision_keeps_the_first_by_original_name_and_refuses_the_second() -> None:
    # Issue 17: a renamed second tool let a newcomer take a name over; now it is refused.
    forward = select_tools([tool("a.b"), tool("a_b")], prefix="srv")
    backward = select_tools([tool("a_b"), tool("a.b")], prefix="srv")
    assert forward == backward  # the server's order does not matter
    names = {t.original_name: t.name for t in forward.tools}
    assert names == {"a.b": "srv_a_b"}
    assert forward.collisions == [
        "'a.b' and 'a_b' both map to srv_a_b; 'a.b' keeps it and 'a_b' is not exposed"
    ]
    assert forward.selected == 1


def test_collision_of_long_names_with_the_same_start_is_resolved() -> None:
    first, second = "x" * 80 + ".a", "x" * 80 + "_a"
    selection = select_tools([tool(first), tool(second)], prefix="srv")
    names = [t.name for t in selection.tools]
    assert len(set(names)) == 2
    assert all(len(name) <= 64 for name in names)


def test_a_tool_added_later_never_takes_over_the_name_of_an_incumbent() -> None:
    # The probe saw search_docs as docs_search_docs; the server then adds search.docs, which
    # sorts first and maps to the same name. The incumbent keeps it; the newcomer is refused.
    before = plan([tool("search_docs")], prefix="docs")
    assert exposed_by_original(before) == {"search_docs": "docs_search_docs"}
    after = plan([tool("search.docs"), tool("search_docs")], prefix="docs",
                 incumbents=["search_docs"])  # fmt: skip
    assert exposed_by_original(after) == {"search_docs": "docs_search_docs"}
    assert after.refused == (Refused("search.docs", "docs_search_docs", "search_docs"),)
    assert Dropped("search.docs", "Collision") in after.dropped
    # Without that memory the first by original name would win: the takeover of issue 17.
    assert (
        exposed_by_original(plan([tool("search.docs"), tool("search_docs")], prefix="docs"))[
            "search.docs"
        ]
        == "docs_search_docs"
    )


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


# plan: the names themselves, unbounded, and how the bridge narrows them


def exposed_by_original(tool_plan: ToolPlan[RawTool]) -> dict[str, str]:
    return {t.name: name for name, t in tool_plan.exposed.items()}


def test_the_plan_maps_exposed_names_to_the_tools_as_listed() -> None:
    listed = [tool("search.docs", "d" * 5000, title="T" * 300), tool("echo")]
    result = plan(listed, prefix="srv")
    assert list(result.exposed) == ["srv_echo", "srv_search_docs"]
    assert result.exposed["srv_search_docs"] is listed[0]  # kept whole: nothing is cut
    assert (result.discovered, result.dropped, result.refused) == (2, (), ())


def test_the_plan_gives_a_reason_for_every_tool_it_leaves_out() -> None:
    listed = [tool(n) for n in ("get-env", "echo", "delete.all", "bad name!", "get-env", "zap")]
    result = plan(listed, prefix="srv", allow=["get-*", "delete.*", "bad*"], deny=["delete.*"])
    assert result.dropped == (
        Dropped("bad name!", "InvalidName"),
        Dropped("delete.all", "Denied"),
        Dropped("echo", "NotAllowlisted"),
        Dropped("get-env", "Duplicate"),
        Dropped("zap", "NotAllowlisted"),
    )
    assert list(result.exposed) == ["srv_get-env"]
    assert len(result.exposed) + len(result.dropped) == result.discovered


def test_the_plan_is_not_bounded() -> None:
    listed = [tool(f"tool_{i:04d}") for i in range(1000)]
    assert len(plan(listed, prefix="p").exposed) == 1000


def test_a_collision_is_recorded_with_both_names() -> None:
    result = plan([tool("a_b"), tool("a.b")], prefix="srv")
    assert result.refused == (Refused(original_name="a_b", wanted="srv_a_b", holder="a.b"),)
    assert result.dropped == (Dropped("a_b", "Collision"),)


COLLIDING = ["a.b", "a_b", "a-b", "a b", "x" * 80 + ".q", "x" * 80 + "_q", "dup", "dup", "solo"]


def test_collisions_are_resolved_the_same_whatever_the_order_of_the_list() -> None:
    expected = plan([tool(n) for n in COLLIDING], prefix="srv")
    shuffler = random.Random(7)
    for _ in range(50):
        names = COLLIDING[:]
        shuffler.shuffle(names)
        again = plan([tool(n) for n in names], prefix="srv")
        assert exposed_by_original(again) == exposed_by_original(expected)
        assert (again.refused, again.dropped) == (expected.refused, expected.dropped)
        assert list(again.exposed) == list(expected.exposed)


def test_narrowing_never_hands_a_refused_tool_the_name_of_the_one_it_removed() -> None:
    listed = [tool("a.b"), tool("a_b"), tool("other")]
    server = plan(listed, prefix="srv")
    run = server.narrowed(deny=["a.b"])
    assert exposed_by_original(run) == {"other": "srv_other"}
    assert Dropped("a.b", "Denied") in run.dropped and Dropped("a_b", "Collision") in run.dropped
    assert [r.original_name for r in run.refused] == ["a_b"]
    # A server-level filter, by contrast, is part of the plan that status shows (as before).
    assert exposed_by_original(plan(listed, prefix="srv", deny=["a.b"]))["a_b"] == "srv_a_b"


def test_narrower_filters_never_change_the_names_of_the_remaining_tools() -> None:
    alphabet = ["a.b", "a_b", "a-b", "get.x", "get_x", "get-y", "z" * 70 + ".1", "z" * 70 + "_1"]
    patterns = ["*", "a*", "get*", "*_*", "*.*", "z*", "?_?", "nope"]
    shuffler = random.Random(11)
    for _ in range(300):
        listed = [tool(n) for n in shuffler.sample(alphabet, shuffler.randint(1, len(alphabet)))]
        server = plan(
            listed,
            prefix="srv",
            allow=shuffler.sample(patterns, shuffler.randint(0, 2)),
            deny=shuffler.sample(patterns, shuffler.randint(0, 1)),
        )
        allow = shuffler.sample(patterns, shuffler.randint(0, 2))
        deny = shuffler.sample(patterns, shuffler.randint(0, 2))
        run = server.narrowed(allow=allow, deny=deny)
        assert run.exposed.items() <= server.exposed.items()
        remaining = {
            t.name for t in server.exposed.values() if (not allow or matches(allow, t.name))
        } - {t.name for t in server.exposed.values() if matches(deny, t.name)}
        assert set(exposed_by_original(run)) == remaining
        assert len(run.exposed) + len(run.dropped) == run.discovered


def test_narrowing_reports_run_patterns_that_match_no_listed_tool() -> None:
    server = plan([tool("echo"), tool("hidden")], prefix="srv", deny=["hidden"])
    run = server.narrowed(allow=["echo", "hidden", "ehco"])
    assert run.unmatched_allow == ("ehco",)
    assert list(run.exposed) == ["srv_echo"]
