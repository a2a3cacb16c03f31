"""Shards by label selector: parsing the selector and deciding which objects are ours."""

from __future__ import annotations

import pytest

from mcp_operator.controller.shards import owns, parse_selector


@pytest.mark.parametrize(
    ("selector", "labels", "ours"),
    [
        ("", {}, True),
        ("", {"any": "thing"}, True),
        ("mcp-operator.dev/shard=a", {"mcp-operator.dev/shard": "a"}, True),
        ("mcp-operator.dev/shard=a", {"mcp-operator.dev/shard": "b"}, False),
        ("mcp-operator.dev/shard=a", {}, False),
        ("shard==a", {"shard": "a"}, True),
        ("shard!=a", {}, True),
        ("shard!=a", {"shard": "a"}, False),
        ("shard", {"shard": ""}, True),
        ("!shard", {"shard": "a"}, False),
        ("!shard", {}, True),
        ("team=x, shard=a", {"team": "x", "shard": "a"}, True),
        ("team=x, shard=a", {"team": "x"}, False),
    ],
)
def test_an_object_belongs_to_the_shard_whose_selector_its_labels_match(
    selector: str, labels: dict[str, str], ours: bool
) -> None:
    assert owns(parse_selector(selector), labels) is ours


def test_a_set_based_selector_is_refused_with_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="'shard in \\(a\\)' is not a label requirement"):
        parse_selector("shard in (a)")
