"""The bridge's catalog (mcp_operator.bridge.catalog): filter layers, the shared naming plan,
collisions across servers, and suggestions for names that are not allowed."""

from __future__ import annotations

from typing import Any

from mcp_operator.api.bridge import UpstreamServer
from mcp_operator.api.bridge_filters import FilterLayer
from mcp_operator.bridge.catalog import CatalogEntry, build_catalog, schema_digest, server_key
from mcp_operator.mcp.naming import exposed_name


def upstream(name: str, prefix: str, *layers: FilterLayer) -> UpstreamServer:
    return UpstreamServer(
        name=name,
        namespace="tools",
        url=f"http://{name}.tools.svc:8080/mcp",
        prefix=prefix,
        filters=list(layers),
    )


def tool(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object"}, **extra}


def test_exposed_names_follow_the_shared_naming_plan() -> None:
    github = upstream("github", "github")
    catalog = build_catalog([github], {"tools/github": [tool("search.code"), tool("get_issue")]})
    assert catalog.names() == sorted(
        [exposed_name("github", "search.code"), exposed_name("github", "get_issue")]
    )
    found = catalog.get("github_search_code")
    assert found is not None and found.original_name == "search.code"
    assert found.server == "tools/github" == server_key(github)


def test_every_filter_layer_applies() -> None:
    github = upstream(
        "github", "github", FilterLayer(allow=["get_*", "list_*"]), FilterLayer(deny=["list_keys"])
    )
    listed = {"tools/github": [tool("get_issue"), tool("list_keys"), tool("delete_repo")]}
    assert build_catalog([github], listed).names() == ["github_get_issue"]


def test_schema_and_annotations_are_kept_as_sent() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    listed = {"tools/s": [tool("q", inputSchema=schema, annotations={"readOnlyHint": True})]}
    entry = build_catalog([upstream("s", "s")], listed).get("s_q")
    assert entry is not None
    assert entry.input_schema == schema and entry.annotations == {"readOnlyHint": True}
    assert entry.schema_key == schema_digest(schema)


def test_a_collision_across_servers_keeps_the_first_and_is_reported() -> None:
    first, second = upstream("a", "x"), upstream("b", "x_y")
    listed = {"tools/a": [tool("y_z")], "tools/b": [tool("z")]}
    catalog = build_catalog([first, second], listed)
    entry = catalog.get("x_y_z")
    assert entry is not None and entry.server == "tools/a"
    assert len(catalog.collisions) == 1 and "x_y_z" in catalog.collisions[0]


def test_run_layers_narrow_without_renaming_what_remains() -> None:
    # 'a.b' and 'a_b' both want s_a_b: the first by original name keeps it, the other is
    # refused. A run that removes the holder must not hand its name to the other tool.
    listed = {"tools/s": [tool("a.b"), tool("a_b")]}
    whole = build_catalog([upstream("s", "s")], listed)
    narrowed = build_catalog([upstream("s", "s", FilterLayer(), FilterLayer(deny=["a.b"]))], listed)
    assert [e.original_name for e in whole.entries.values()] == ["a.b"]
    assert len(whole.collisions) == 1 and "'a_b' is left out" in whole.collisions[0]
    assert narrowed.names() == []


def test_pinned_tools_are_one_more_allowlist() -> None:
    pinned = upstream("s", "s").model_copy(update={"tools": ["old"]})
    catalog = build_catalog([pinned], {"tools/s": [tool("old"), tool("added_later")]})
    assert catalog.names() == ["s_old"]


def test_a_server_that_listed_nothing_contributes_nothing() -> None:
    catalog = build_catalog([upstream("a", "a"), upstream("b", "b")], {"tools/a": [tool("t")]})
    assert catalog.names() == ["a_t"]


def test_tools_without_a_string_name_are_ignored() -> None:
    catalog = build_catalog([upstream("a", "a")], {"tools/a": [{"name": 3}, {}, tool("t")]})
    assert catalog.names() == ["a_t"]


def test_similar_names_are_suggested() -> None:
    listed = {"tools/gh": [tool("create_issue"), tool("get_issue")]}
    catalog = build_catalog([upstream("gh", "gh")], listed)
    assert "gh_create_issue" in catalog.similar("gh_create_isue")
    assert catalog.similar("other_get_issue")[0] == "gh_get_issue"
    assert catalog.similar("zzz") == []


def test_a_catalog_entry_computes_its_schema_key() -> None:
    one = CatalogEntry("a_t", "tools/a", "t", {"b": 1, "a": 2})
    two = CatalogEntry("a_t", "tools/a", "t", {"a": 2, "b": 1})
    assert one.schema_key == two.schema_key != CatalogEntry("a_t", "tools/a", "t", {}).schema_key


def test_the_listing_keeps_each_tool_as_sent_under_its_exposed_name() -> None:
    sent = tool(
        "search.code",
        description="Search code",
        title="Code search",
        outputSchema={"type": "object"},
        annotations={"readOnlyHint": True},
    )
    catalog = build_catalog([upstream("gh", "gh")], {"tools/gh": [sent, tool("a")]})
    listing = catalog.listing()
    assert [t["name"] for t in listing] == ["gh_a", "gh_search_code"]
    assert listing[1] == sent | {"name": "gh_search_code"}
    assert sent["name"] == "search.code"  # the server's listing is not changed


def test_pins_are_keyed_by_original_name_so_a_later_tool_never_takes_a_pinned_name() -> None:
    # Issue 17: the probe saw search_docs (docs_search_docs); the server then added
    # search.docs, which maps to the same name and sorts first.
    later = {"tools/s": [tool("search.docs"), tool("search_docs")]}
    pinned = upstream("s", "docs").model_copy(update={"tools": ["search_docs"]})
    catalog = build_catalog([pinned], later)
    entry = catalog.get("docs_search_docs")
    assert catalog.names() == ["docs_search_docs"]
    assert entry is not None and entry.original_name == "search_docs"


def test_without_pins_the_previous_catalog_keeps_its_names_against_a_newcomer() -> None:
    server = upstream("s", "docs")
    before = build_catalog([server], {"tools/s": [tool("search_docs")]})
    after = build_catalog([server], {"tools/s": [tool("search.docs"), tool("search_docs")]},
                          previous=before)  # fmt: skip
    entry = after.get("docs_search_docs")
    assert entry is not None and entry.original_name == "search_docs"
    assert after.names() == ["docs_search_docs"]
    assert len(after.collisions) == 1 and "'search.docs' is left out" in after.collisions[0]
