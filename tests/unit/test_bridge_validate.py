"""Arguments against the tool's inputSchema (mcp_operator.bridge.validate): JSON paths in
errors, both drafts, one compilation per schema, and odd or tampered schemas."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_operator.bridge import validate
from mcp_operator.bridge.catalog import CatalogEntry
from mcp_operator.bridge.validate import ArgumentValidator, invalid_arguments, json_path

ISSUE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "minLength": 1},
        "milestone": {"type": "integer", "minimum": 1},
        "labels": {"type": "array", "items": {"type": "string"}},
        "links": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"kind": {"enum": ["blocks", "relates"]}},
                "required": ["kind"],
            },
        },
    },
    "required": ["title"],
    "additionalProperties": False,
}


def entry(schema: Any, name: str = "tracker_create_issue") -> CatalogEntry:
    return CatalogEntry(
        exposed_name=name, server="tools/tracker", original_name="create_issue", input_schema=schema
    )


def test_valid_arguments_pass() -> None:
    verdict = ArgumentValidator().check(entry(ISSUE_SCHEMA), {"title": "x", "labels": ["a"]})
    assert verdict.ok and verdict.schema_problem is None


def test_each_wrong_field_is_named_by_its_json_path() -> None:
    arguments = {
        "title": "x",
        "milestone": 0,
        "labels": ["ok", 3],
        "links": [{"kind": "relates"}, {"kind": "causes"}],
    }
    verdict = ArgumentValidator().check(entry(ISSUE_SCHEMA), arguments)
    paths = [e.path for e in verdict.errors]
    assert paths == ["$.labels[1]", "$.links[1].kind", "$.milestone"]


def test_a_missing_required_field_is_named_itself() -> None:
    verdict = ArgumentValidator().check(entry(ISSUE_SCHEMA), {"links": [{}]})
    assert {e.path for e in verdict.errors} == {"$.title", "$.links[0].kind"}


def test_the_hint_names_paths_but_never_the_values() -> None:
    secret = "alice@example.com-very-private"
    verdict = ArgumentValidator().check(entry(ISSUE_SCHEMA), {"title": "t", "milestone": secret})
    error = invalid_arguments(entry(ISSUE_SCHEMA), verdict)
    assert error.code == "invalid_arguments"
    assert "$.milestone" in error.hint and "tracker_create_issue" in error.hint
    assert secret not in error.hint and secret not in str(error.to_result())
    message = verdict.errors[0].message
    assert error.details["fields"] == [{"path": "$.milestone", "message": message}]


def test_the_hint_shows_five_errors_and_counts_the_rest() -> None:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(8)}}
    verdict = ArgumentValidator().check(entry(schema), {f"p{i}": "x" for i in range(8)})
    hint = invalid_arguments(entry(schema), verdict).hint
    assert "(and 3 more)" in hint


def test_an_unexpected_property_is_reported() -> None:
    verdict = ArgumentValidator().check(entry(ISSUE_SCHEMA), {"title": "t", "titel": "typo"})
    assert len(verdict.errors) == 1 and "titel" in verdict.errors[0].message


def test_missing_arguments_count_as_an_empty_object() -> None:
    verdict = ArgumentValidator().check(entry(ISSUE_SCHEMA), None)
    assert [e.path for e in verdict.errors] == ["$.title"]


@pytest.mark.parametrize("arguments", [[1, 2], "text", 3])
def test_arguments_must_be_an_object(arguments: Any) -> None:
    verdict = ArgumentValidator().check(entry(ISSUE_SCHEMA), arguments)
    assert [e.path for e in verdict.errors] == ["$"]
    assert "must be an object" in verdict.errors[0].message


def test_draft_07_schemas_with_definitions_are_understood() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"who": {"$ref": "#/definitions/login"}},
        "definitions": {"login": {"type": "string", "maxLength": 3}},
    }
    verdict = ArgumentValidator().check(entry(schema), {"who": "toolong"})
    assert [e.path for e in verdict.errors] == ["$.who"]


def test_2020_12_keywords_apply_by_default() -> None:
    schema = {"type": "object", "properties": {"pair": {"prefixItems": [{"type": "integer"}]}}}
    verdict = ArgumentValidator().check(entry(schema), {"pair": ["x"]})
    assert [e.path for e in verdict.errors] == ["$.pair[0]"]


def test_a_schema_is_compiled_once_per_tool_and_version(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[Any] = []
    real = validate.compile_schema
    monkeypatch.setattr(validate, "compile_schema", lambda s: compiled.append(s) or real(s))
    validator = ArgumentValidator()
    for _ in range(5):
        validator.check(entry(ISSUE_SCHEMA), {"title": "t"})
    assert len(compiled) == 1
    changed = ISSUE_SCHEMA | {"required": []}
    validator.check(entry(changed), {})
    assert len(compiled) == 2


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        (None, "has no inputSchema"),
        ("object", "not an object"),
        ([{"type": "object"}], "not an object"),
        ({"type": "objekt"}, "not a valid JSON Schema"),
        ({"type": "object", "properties": "title"}, "not a valid JSON Schema"),
        ({"$ref": "#/$defs/missing"}, "not a valid JSON Schema"),
        ({"type": "object", "required": "title"}, "not a valid JSON Schema"),
    ],
)
def test_a_broken_schema_is_reported_and_the_arguments_go_unchecked(
    schema: Any, problem: str
) -> None:
    verdict = ArgumentValidator().check(entry(schema), {"anything": 1})
    assert verdict.ok
    assert verdict.schema_problem is not None and problem in verdict.schema_problem


def test_a_broken_schema_still_requires_object_arguments() -> None:
    verdict = ArgumentValidator().check(entry({"type": "objekt"}), ["not", "an", "object"])
    assert not verdict.ok and verdict.schema_problem is not None


def test_a_remote_ref_is_never_fetched() -> None:
    fetched: list[str] = []
    schema = {"$ref": "http://127.0.0.1:9/schema.json"}
    original = validate._refuse_retrieval

    def spy(uri: str) -> Any:
        fetched.append(uri)
        return original(uri)

    validate._refuse_retrieval = spy  # type: ignore[assignment]
    try:
        verdict = ArgumentValidator().check(entry(schema), {})
    finally:
        validate._refuse_retrieval = original  # type: ignore[assignment]
    assert fetched == ["http://127.0.0.1:9/schema.json"]  # asked, and refused without I/O
    assert verdict.schema_problem is not None
    assert "does not fetch remote schemas" in verdict.schema_problem


def test_a_boolean_schema_is_a_valid_schema() -> None:
    assert ArgumentValidator().check(entry(True), {"x": 1}).ok
    verdict = ArgumentValidator().check(entry(False), {"x": 1})
    assert not verdict.ok and verdict.schema_problem is None


def test_json_paths_quote_names_that_are_not_identifiers() -> None:
    assert json_path([]) == "$"
    assert json_path(["a", 0, "b c", "x-y"]) == "$.a[0]['b c']['x-y']"


def test_the_hint_says_when_the_schema_itself_is_broken_too() -> None:
    broken = entry({"type": "objekt"})
    verdict = ArgumentValidator().check(broken, "not an object")
    hint = invalid_arguments(broken, verdict).hint
    assert "$: arguments must be an object" in hint and "schema is broken too" in hint
