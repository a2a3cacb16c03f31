"""Resource URIs namespaced per server: the examples the docs give, and the rule's properties
(reversible, unambiguous between prefixes, the scheme kept) over generated URIs."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mcp_operator.mcp.uris import exposed_uri, original_uri, with_exposed_ui

PREFIXES = st.from_regex(r"[a-z][a-z0-9_-]{0,31}", fullmatch=True)
SCHEMES = st.sampled_from(["ui", "file", "https", "test", "urn", "x-custom+v1", "data", ""])
URI_TEXT = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E) | st.sampled_from("é{}"),
    max_size=40,
)


@st.composite
def uris(draw: st.DrawFn) -> str:
    scheme = draw(SCHEMES)
    slashes = draw(st.sampled_from(["", "//", "///"]))
    rest = draw(URI_TEXT)
    return f"{scheme}:{slashes}{rest}" if scheme else rest


@pytest.mark.parametrize(
    ("uri", "exposed"),
    [
        ("ui://widget/chart", "ui://apps.widget/chart"),
        ("file:///etc/hosts", "file://apps./etc/hosts"),
        ("urn:isbn:123", "urn:apps.isbn:123"),
        ("test://template/{id}/data", "test://apps.template/{id}/data"),
        ("no scheme", "apps.no scheme"),
    ],
)
def test_a_uri_keeps_its_scheme_and_carries_the_prefix_where_its_authority_begins(
    uri: str, exposed: str
) -> None:
    assert exposed_uri("apps", uri) == exposed
    assert original_uri("apps", exposed) == uri


def test_the_empty_prefix_leaves_uris_as_they_are() -> None:
    assert exposed_uri("", "ui://widget") == "ui://widget"
    assert original_uri("", "ui://widget") == "ui://widget"


def test_a_uri_of_another_prefix_is_not_mapped_back() -> None:
    assert original_uri("apps", "ui://other.widget") is None
    assert original_uri("apps", "ui://widget") is None
    assert original_uri("app", "ui://apps.widget") is None


@given(PREFIXES, uris())
@example("a", "a.b:c")
@example("p", "p.file://x")
def test_every_uri_maps_back_to_itself(prefix: str, uri: str) -> None:
    exposed = exposed_uri(prefix, uri)
    assert original_uri(prefix, exposed) == uri
    scheme = uri.partition(":")[0] + ":" if ":" in uri and uri[0].isalpha() else ""
    if scheme and all(c.isalnum() or c in "+.-" for c in scheme[:-1]):
        assert exposed.startswith(scheme)  # the scheme stays: a host still knows ui://


@given(PREFIXES, PREFIXES, uris())
def test_a_uri_belongs_to_one_prefix_only(first: str, second: str, uri: str) -> None:
    if first != second:  # a prefix has no dot, so "first." is never "second."
        assert original_uri(second, exposed_uri(first, uri)) is None


@given(PREFIXES, URI_TEXT)
def test_what_maps_back_maps_forward_to_the_same_text(prefix: str, text: str) -> None:
    original = original_uri(prefix, text)
    if original is not None:
        assert exposed_uri(prefix, original) == text


def test_an_mcp_apps_tool_names_the_exposed_ui_resource_and_keeps_the_rest_of_its_meta() -> None:
    tool = {
        "name": "chart",
        "_meta": {"ui": {"resourceUri": "ui://chart/app", "visibility": ["model"]}, "k": 1},
    }
    shown = with_exposed_ui("apps", tool)
    assert shown["_meta"] == {
        "ui": {"resourceUri": "ui://apps.chart/app", "visibility": ["model"]},
        "k": 1,
    }
    assert tool["_meta"]["ui"]["resourceUri"] == "ui://chart/app"  # not changed in place
    legacy = with_exposed_ui("apps", {"name": "x", "_meta": {"ui/resourceUri": "ui://x"}})
    assert legacy["_meta"]["ui/resourceUri"] == "ui://apps.x"
    assert with_exposed_ui("", tool) == tool
