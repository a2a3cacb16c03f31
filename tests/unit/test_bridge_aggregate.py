"""Prompts and resources across servers, without a wire: names, URIs, filters, fan-out.

The upstream pool's states are set by hand (no server is called): the prompt catalog, the
routing of exposed URIs, the filters that hide an item, the capabilities announced, and which
agent session an upstream's notification reaches.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from mcp_operator.api.bridge import UpstreamServer
from mcp_operator.api.bridge_filters import FilterLayer
from mcp_operator.bridge.aggregate import AgentInterest, Aggregator, capabilities
from mcp_operator.bridge.catalog import build_catalog
from mcp_operator.bridge.prompts import build_prompts
from mcp_operator.bridge.upstreams import ServerState, UpstreamPool, upstream_session


def server(name: str, prefix: str, **filters: Any) -> UpstreamServer:
    layers = [FilterLayer.model_validate(filters)] if filters else []
    return UpstreamServer(
        name=name, namespace="ns", url=f"http://{name}/mcp", prefix=prefix, filters=layers
    )


def pool_of(*servers: UpstreamServer, caps: types.ServerCapabilities | None = None) -> UpstreamPool:
    pool = UpstreamPool(on_change=lambda _catalog: None)
    pool.servers = list(servers)
    for upstream in servers:
        key = f"ns/{upstream.name}"
        session = upstream_session(key, upstream.url, pool.http1)
        session.capabilities = caps or types.ServerCapabilities(
            prompts=types.PromptsCapability(),
            resources=types.ResourcesCapability(subscribe=True),
            logging=types.LoggingCapability(),
        )
        pool.states[key] = ServerState(server=upstream, upstream=session, headers_signature="")
    return pool


PROMPTS = [{"name": "review", "description": "r"}, {"name": "secret_plan"}]


def test_prompts_of_two_servers_are_named_by_the_plan_and_the_filters_hide_some() -> None:
    a, b = server("a", "gh"), server("b", "docs", promptsDeny=["secret_*"])
    catalog = build_prompts([a, b], {"ns/a": PROMPTS, "ns/b": PROMPTS})
    assert sorted(catalog.entries) == ["docs_review", "gh_review", "gh_secret_plan"]
    assert catalog.get("docs_review").original_name == "review"  # type: ignore[union-attr]
    assert catalog.get("docs_secret_plan") is None
    assert catalog.listing()[0] == {"name": "docs_review", "description": "r"}


def test_a_run_layer_narrows_the_prompts_and_never_renames_them() -> None:
    layered = server("a", "gh").model_copy(
        update={"filters": [FilterLayer(), FilterLayer(prompts_allow=["rev*"])]}
    )
    assert sorted(build_prompts([layered], {"ns/a": PROMPTS}).entries) == ["gh_review"]


def test_two_unprefixed_servers_with_one_prompt_name_keep_the_first_and_report_the_other() -> None:
    catalog = build_prompts([server("a", ""), server("b", "")], {"ns/a": PROMPTS, "ns/b": PROMPTS})
    assert catalog.get("review").server == "ns/a"  # type: ignore[union-attr]
    assert any("review of ns/b" in line for line in catalog.collisions)


def test_the_empty_prefix_exposes_the_servers_own_tool_names() -> None:
    tools = [{"name": "test_simple_text", "inputSchema": {}}, {"name": "a.b", "inputSchema": {}}]
    catalog = build_catalog([server("a", "")], {"ns/a": tools})
    assert sorted(catalog.entries) == ["a_b", "test_simple_text"]


def test_a_uri_routes_to_its_prefixed_server_else_to_the_unprefixed_one() -> None:
    pool = pool_of(server("a", "apps"), server("b", "docs"), server("c", ""))
    routes = Aggregator(pool)
    found = routes.route("ui://apps.widget")
    assert found is not None and found[0].server.name == "a" and found[1] == "ui://widget"
    found = routes.route("file://docs./README.md")
    assert found is not None and found[0].server.name == "b" and found[1] == "file:///README.md"
    found = routes.route("ui://widget")
    assert found is not None and found[0].server.name == "c" and found[1] == "ui://widget"


def test_without_an_unprefixed_server_an_unknown_uri_routes_nowhere() -> None:
    routes = Aggregator(pool_of(server("a", "apps")))
    assert routes.route("ui://widget") is None
    assert routes.route("ui://other.widget") is None


def test_a_filtered_resource_is_neither_listed_nor_routed() -> None:
    pool = pool_of(server("a", "apps", resourcesDeny=["ui://secret*"]))
    routes = Aggregator(pool)
    state = pool.states["ns/a"]
    assert routes.route("ui://apps.secret/x") is None
    assert routes._exposed(state, "ui://secret/x") is None
    assert routes._exposed(state, "ui://open/x") == "ui://apps.open/x"


def test_an_unprefixed_servers_uri_that_looks_prefixed_is_not_listed_as_its_own() -> None:
    """``ui://apps.x`` of the unprefixed server would be read from the server of ``apps``."""
    pool = pool_of(server("a", "apps"), server("c", ""))
    routes = Aggregator(pool)
    assert routes._exposed(pool.states["ns/c"], "ui://apps.x") is None
    assert routes._exposed(pool.states["ns/c"], "ui://plain") == "ui://plain"


async def test_a_bad_cursor_is_invalid_params() -> None:
    routes = Aggregator(pool_of(server("a", "apps")))
    answer = await routes.answer(1, "resources/list", {"cursor": "forged"})
    assert answer["error"]["code"] == -32602
    assert (await routes.answer(2, "prompts/list", {"cursor": "x"}))["error"]["code"] == -32602


async def test_a_feature_no_server_offers_is_method_not_found() -> None:
    routes = Aggregator(pool_of(server("a", "apps"), caps=types.ServerCapabilities()))
    for method in ("prompts/list", "resources/read", "completion/complete", "logging/setLevel"):
        assert (await routes.answer(1, method, {}))["error"]["code"] == -32601


async def test_an_unknown_resource_or_prompt_is_refused_without_calling_a_server() -> None:
    routes = Aggregator(pool_of(server("a", "apps")))
    read = await routes.answer(1, "resources/read", {"uri": "ui://nowhere.x"})
    assert read["error"]["code"] == -32602 and read["error"]["data"] == {"uri": "ui://nowhere.x"}
    got = await routes.answer(2, "prompts/get", {"name": "apps_nothing"})
    assert got["error"]["code"] == -32602


def test_capabilities_follow_the_upstreams_in_both_eras() -> None:
    pool = pool_of(server("a", "apps"))
    legacy = capabilities(pool.states, modern=False)
    assert legacy == {
        "tools": {"listChanged": True},
        "prompts": {"listChanged": True},
        "resources": {"listChanged": True, "subscribe": True},
        "logging": {},
    }
    # 2026-07-28 carries the same changes on subscriptions/listen streams.
    assert capabilities(pool.states, modern=True) == legacy
    bare = pool_of(server("a", "apps"), caps=types.ServerCapabilities())
    assert capabilities(bare.states, modern=False) == {"tools": {"listChanged": True}}


@pytest.mark.parametrize("level", ["debug", "error"])
def test_an_update_reaches_its_subscribers_and_a_log_only_who_asked(level: str) -> None:
    pool = pool_of(server("a", "apps"))
    routes = Aggregator(pool)
    routes.interests = {
        "s1": AgentInterest(subscriptions={"ui://apps.widget"}),
        "s2": AgentInterest(log_level=level),
        "s3": AgentInterest(),
    }
    update = {"method": "notifications/resources/updated", "params": {"uri": "ui://widget"}}
    sent = routes.notice("ns/a", update)
    assert sent == [
        (
            "s1",
            {
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": {"uri": "ui://apps.widget"},
            },
        )
    ]
    log = {"method": "notifications/message", "params": {"level": "warning", "data": "x"}}
    assert [who for who, _ in routes.notice("ns/a", log)] == (["s2"] if level == "debug" else [])
    assert routes.notice("ns/gone", update) == []


async def test_a_listing_walks_the_servers_pages_under_its_own_cursor() -> None:
    """Server a lists two pages (its own cursor), b one: three pages of ours at a page size of
    one item, each cursor ours and each item under its server's prefix."""
    pool = pool_of(server("a", "apps"), server("b", "docs"))
    pages = {
        ("ns/a", None): {"resources": [{"uri": "x://1"}], "nextCursor": "a-2"},
        ("ns/a", "a-2"): {"resources": [{"uri": "x://2"}]},
        ("ns/b", None): {"resources": [{"uri": "x://3", "_meta": {"k": 1}}]},
    }
    for key, state in pool.states.items():

        async def request(method: str, params: Any, seconds: Any = None, key: str = key) -> Any:
            assert method == "resources/list"
            return pages[(key, params.get("cursor"))]

        state.upstream.request = request  # type: ignore[method-assign]
    routes = Aggregator(pool)
    routes.page_items = 1
    seen, cursor, walked = [], None, 0
    while True:
        answer = await routes.answer(1, "resources/list", {"cursor": cursor} if cursor else {})
        walked += 1
        seen += answer["result"]["resources"]
        cursor = answer["result"].get("nextCursor")
        assert cursor not in ("a-2", "")  # never the upstream's own
        if cursor is None:
            break
    assert walked == 3
    assert seen == [
        {"uri": "x://apps.1"},
        {"uri": "x://apps.2"},
        {"uri": "x://docs.3", "_meta": {"k": 1}},
    ]
    routes.page_items = 100  # a's own cursor still ends the first page; then a's last and b's
    first = await routes.answer(1, "resources/list", {})
    rest = await routes.answer(2, "resources/list", {"cursor": first["result"]["nextCursor"]})
    assert [r["uri"] for r in rest["result"]["resources"]] == ["x://apps.2", "x://docs.3"]
    assert "nextCursor" not in rest["result"]


async def test_an_agent_cannot_hold_more_than_the_bound_of_subscriptions() -> None:
    from mcp_operator.bridge import aggregate

    pool = pool_of(server("a", "apps"))
    sent: list[str] = []

    async def request(method: str, params: Any, seconds: Any = None) -> Any:
        sent.append(params["uri"])
        return {}

    pool.states["ns/a"].upstream.request = request  # type: ignore[method-assign]
    pool.states["ns/a"].upstream.protocol_version = "2025-11-25"  # legacy: subscribe is sent
    routes = Aggregator(pool)
    for n in range(aggregate.MAX_SUBSCRIPTIONS):
        ok = await routes.answer(n, "resources/subscribe", {"uri": f"x://apps.{n}"}, "s1")
        assert ok["result"] == {}
    refused = await routes.answer(0, "resources/subscribe", {"uri": "x://apps.more"}, "s1")
    assert refused["error"]["code"] == -32602
    assert len(sent) == aggregate.MAX_SUBSCRIPTIONS and "x://more" not in sent
    await routes.forget("s1")  # the session ends: every subscription is given back upstream
    assert len(sent) == 2 * aggregate.MAX_SUBSCRIPTIONS and routes.interests == {}
