"""Prompts, resources, templates, completion and subscriptions of two servers through the bridge.

Two upstreams on the official SDK (``tests/support/catalog_server.py``) offer the same prompt
names and the same resource URIs (an MCP Apps ``ui://`` resource among them), so without the
prefixes they would collide; one is reached in 2026-07-28, the other in the legacy era (its
configuration names a legacy protocol version). The agent is the official SDK client, in
both eras. Each answer carries its server's label, so the test sees which server answered.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.support import peers
from tests.support.bridge_run import RunningBridge, run_bridge, server_entry

pytestmark = [pytest.mark.timeout(120), pytest.mark.filterwarnings("ignore::DeprecationWarning")]

CATALOG_SERVER = peers.REPO / "tests" / "support" / "catalog_server.py"
HIDDEN = {"promptsDeny": ["secret_*"], "resourcesDeny": ["secret://*"]}
MODES = ["legacy", "2026-07-28"]


@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, str]]:
    urls: dict[str, str] = {}
    with (
        peers.run_server(
            [sys.executable, str(CATALOG_SERVER), str(a := peers.free_port()), "A"], a, name="A"
        ),
        peers.run_server(
            [sys.executable, str(CATALOG_SERVER), str(b := peers.free_port()), "B"], b, name="B"
        ),
    ):
        urls["a"], urls["b"] = f"http://127.0.0.1:{a}/mcp", f"http://127.0.0.1:{b}/mcp"
        yield urls


@pytest.fixture(scope="module")
def bridge(upstreams: dict[str, str]) -> Iterator[RunningBridge]:
    servers = [
        server_entry("a", upstreams["a"], "a", filters=[HIDDEN]),
        server_entry("b", upstreams["b"], "b", filters=[HIDDEN], protocolVersion="2025-11-25"),
    ]
    with run_bridge(servers) as running:
        yield running


def _text(result: Any) -> str:
    content = result.messages[0].content if hasattr(result, "messages") else result.contents[0]
    text: str = content.text
    return text


@pytest.mark.parametrize("mode", MODES)
async def test_prompts_of_both_servers_are_listed_under_their_prefixes_and_got_from_them(
    bridge: RunningBridge, mode: str
) -> None:
    async with Client(bridge.url, mode=mode) as client:  # type: ignore[arg-type]
        listed = await client.list_prompts()
        a = await client.get_prompt("a_review", {"topic": "docs"})
        b = await client.get_prompt("b_review", {"topic": "code"})
        with pytest.raises(MCPError):
            await client.get_prompt("a_secret_plan")
        with pytest.raises(MCPError):
            await client.get_prompt("review", {"topic": "x"})  # the unprefixed name is nobody's
    assert sorted(p.name for p in listed.prompts) == ["a_review", "b_review"]
    assert _text(a) == "A reviews docs" and _text(b) == "B reviews code"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_bridge_announces_what_its_upstreams_offer_in_both_eras(
    bridge: RunningBridge, mode: str
) -> None:
    async with Client(bridge.url, mode=mode) as client:  # type: ignore[arg-type]
        version, caps = client.protocol_version, client.server_capabilities
    assert version == ("2026-07-28" if mode == "auto" else "2025-11-25")
    assert caps.prompts is not None and caps.resources is not None
    assert caps.resources.subscribe and caps.completions is not None


@pytest.mark.parametrize("mode", MODES)
async def test_resources_and_templates_are_namespaced_read_from_their_server_and_filtered(
    bridge: RunningBridge, upstreams: dict[str, str], mode: str
) -> None:
    async with Client(bridge.url, mode=mode) as client:  # type: ignore[arg-type]
        listed = await client.list_resources()
        templates = await client.list_resource_templates()
        readme_a = await client.read_resource("file://a./README.md")
        note_b = await client.read_resource("notes://b.todo")
        chart = await client.read_resource("ui://b.chart/app.html")
        tools = await client.list_tools()
        for hidden in ("secret://a.key", "secret://key", "file:///README.md"):
            with pytest.raises(MCPError):
                await client.read_resource(hidden)
    async with Client(upstreams["b"], mode=mode) as direct:  # type: ignore[arg-type]
        direct_listed = await direct.list_resources()
        direct_chart = await direct.read_resource("ui://chart/app.html")
    uris = sorted(str(r.uri) for r in listed.resources)
    assert uris == [
        "file://a./README.md",
        "file://b./README.md",
        "ui://a.chart/app.html",
        "ui://b.chart/app.html",
    ]
    assert sorted(t.uri_template for t in templates.resource_templates) == [
        "notes://a.{name}",
        "notes://b.{name}",
    ]
    assert _text(readme_a) == "# README of A" and _text(note_b) == "B note todo"
    # The MCP App: listed and read with its _meta as the server gave it, only the URI changed.
    shown = next(r for r in listed.resources if str(r.uri) == "ui://b.chart/app.html")
    own = next(r for r in direct_listed.resources if str(r.uri) == "ui://chart/app.html")
    assert shown.meta == own.meta and shown.mime_type == own.mime_type
    assert chart.contents[0].meta == direct_chart.contents[0].meta
    assert chart.contents[0].meta is not None and "ui" in chart.contents[0].meta
    assert str(chart.contents[0].uri) == "ui://b.chart/app.html"
    assert _text(chart) == "<!doctype html><title>chart B</title>"
    app_tool = next(t for t in tools.tools if t.name == "b_show_chart")
    assert (
        app_tool.meta is not None and app_tool.meta["ui"]["resourceUri"] == "ui://b.chart/app.html"
    )


@pytest.mark.parametrize("mode", MODES)
async def test_completion_is_routed_by_prompt_name_and_by_template(
    bridge: RunningBridge, mode: str
) -> None:
    async with Client(bridge.url, mode=mode) as client:  # type: ignore[arg-type]
        by_prompt = await client.complete(
            types.PromptReference(type="ref/prompt", name="b_review"),
            {"name": "topic", "value": "al"},
        )
        by_template = await client.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="notes://a.{name}"),
            {"name": "name", "value": "i"},
        )
        with pytest.raises(MCPError):
            await client.complete(
                types.PromptReference(type="ref/prompt", name="a_secret_plan"),
                {"name": "topic", "value": ""},
            )
    assert by_prompt.completion.values == ["alpha-B"]
    assert by_template.completion.values == ["ideas-A"]


@pytest.mark.parametrize("server", ["a", "b"])
async def test_a_legacy_agents_subscription_reaches_the_server_and_its_update_comes_back(
    bridge: RunningBridge, server: str
) -> None:
    """Server ``a`` is reached in 2026-07-28 (the bridge's listen stream names the URI),
    ``b`` in the legacy era (``resources/subscribe``)."""
    updates: asyncio.Queue[str] = asyncio.Queue()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            await updates.put(str(message.params.uri))

    exposed = f"file://{server}./README.md"
    async with Client(bridge.url, mode="legacy", message_handler=on_message) as client:
        await client.subscribe_resource(exposed)
        await asyncio.sleep(1.0)  # the bridge opens the upstream's stream anew with the URI
        await client.call_tool(f"{server}_touch", {"uri": "file:///README.md"})
        got = await asyncio.wait_for(updates.get(), 15)
        await client.call_tool(f"{server}_touch", {"uri": "secret://key"})  # nobody's
        await client.unsubscribe_resource(exposed)
    assert got == exposed
    assert updates.empty()


async def test_a_2026_agents_listen_stream_gets_the_update_of_the_uri_it_named(
    bridge: RunningBridge,
) -> None:
    async with (
        Client(bridge.url, mode="2026-07-28") as client,
        client.listen(resource_subscriptions=["notes://a.todo"]) as subscription,
    ):
        assert subscription.honored.resource_subscriptions == ["notes://a.todo"]
        await asyncio.sleep(1.0)
        await client.call_tool("a_touch", {"uri": "notes://todo"})
        event = await asyncio.wait_for(anext(aiter(subscription)), 15)
    assert getattr(event, "uri", None) == "notes://a.todo"


async def test_one_listing_holds_both_servers_and_a_forged_cursor_is_invalid_params(
    bridge: RunningBridge,
) -> None:
    async with Client(bridge.url, mode="legacy") as client:
        first = await client.session.list_resources()
        with pytest.raises(MCPError) as refused:
            await client.session.list_resources(
                params=types.PaginatedRequestParams(cursor="eyJtIjoicmVzb3VyY2VzL2xpc3QifQ.AAAA")
            )
    assert refused.value.error.code == -32602
    assert first.next_cursor is None and len(first.resources) == 4


async def test_a_servers_new_prompt_is_announced_to_the_agent_and_listed(
    bridge: RunningBridge,
) -> None:
    changed = asyncio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.PromptListChangedNotification):
            changed.set()

    async with Client(bridge.url, mode="legacy", message_handler=on_message) as client:
        before = {p.name for p in (await client.list_prompts()).prompts}
        await client.call_tool("a_grow_prompt", {})
        await asyncio.wait_for(changed.wait(), 15)
        after = {p.name for p in (await client.list_prompts()).prompts}
        got = await client.get_prompt("a_added")
    assert "a_added" not in before and after == before | {"a_added"}
    assert _text(got) == "A added"
