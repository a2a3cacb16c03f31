"""The bridge as a real process in front of real upstreams of both eras, with real clients.

Upstreams: server-everything over its own Streamable HTTP (legacy era), behind a TCP proxy
that counts the ``tools/call`` requests reaching it; mcp-server-time on the SDK (serving
2026-07-28); server-everything over stdio behind our adapter (a managed-style upstream).
Clients: the official Python SDK client in every mode, plain HTTP, the inspector CLI.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp import Client

from tests.support import needs, peers, wire
from tests.support.bridge_run import CountingProxy, RunningBridge, run_bridge, server_entry
from tests.support.waiting import eventually, eventually_async

pytestmark = [pytest.mark.timeout(180), needs.mark(needs.node_missing())]

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
EMAIL = "jane.doe@example.com"
INIT = wire.initialize()


def _structured(result: Any) -> dict[str, Any]:
    assert result.is_error, result
    structured: dict[str, Any] = result.structured_content
    return structured


def _text(result: Any) -> str:
    assert not result.is_error, result
    text: str = result.content[0].text
    return text


@pytest.fixture(scope="module")
def managed_url() -> Iterator[str]:
    """server-everything over stdio behind our adapter, as the operator runs a stdio server."""
    port = peers.free_port()
    argv = [sys.executable, "-m", "mcp_operator", "adapter", "--port", str(port), "--auth=none",
            "--", "node", str(peers.SERVER_EVERYTHING), "stdio"]  # fmt: skip
    with peers.run_server(argv, port, name="adapter", ready="/readyz"):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def counted(everything_url: str) -> Iterator[CountingProxy]:
    with CountingProxy(everything_url) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def bridge(counted: CountingProxy, time_url: str, managed_url: str) -> Iterator[RunningBridge]:
    servers = [
        server_entry("everything", counted.url, "ev", filters=[{"deny": ["get-env"]}]),
        server_entry("time", time_url),
        server_entry("managed", managed_url),
        server_entry("blocking", counted.url, "blk", policy={"pii": {"arguments": "block"}}),
        server_entry("redacting", counted.url, "red", policy={"pii": {"arguments": "redact"}}),
    ]
    with run_bridge(servers) as running:
        yield running


# ------------------------------------------------------------------ both eras, official SDK client


@pytest.mark.parametrize("mode", ["legacy", "auto", "2026-07-28"])
async def test_the_sdk_client_lists_and_calls_the_prefixed_tools_of_upstreams_of_both_eras(
    bridge: RunningBridge, mode: str
) -> None:
    async with Client(bridge.url, mode=mode) as client:  # type: ignore[arg-type]
        listed = await client.list_tools()
        names = [tool.name for tool in listed.tools]
        echoed = await client.call_tool("ev_echo", {"message": f"hello {mode}"})
        managed = await client.call_tool("managed_echo", {"message": "via the adapter"})
        timed = await client.call_tool("time_get_current_time", {"timezone": "UTC"})
    assert names == sorted(names)
    assert {"ev_echo", "managed_echo", "time_get_current_time", "time_convert_time"} <= set(names)
    assert "ev_get-env" not in names and "managed_get-env" in names  # the server's filter
    echo = next(tool for tool in listed.tools if tool.name == "ev_echo")
    assert echo.input_schema["properties"]["message"]["type"] == "string"  # schema as sent
    assert _text(echoed) == f"Echo: hello {mode}"
    assert _text(managed) == "Echo: via the adapter"
    assert '"timezone": "UTC"' in _text(timed)


async def test_a_denied_tool_and_invalid_arguments_fail_with_hints_before_the_upstream(
    bridge: RunningBridge, counted: CountingProxy
) -> None:
    before = counted.calls
    async with Client(bridge.url, mode="legacy") as client:
        denied = _structured(await client.call_tool("ev_get-env", {}))
        invalid = _structured(await client.call_tool("ev_echo", {"message": 42}))
        assert counted.calls == before, "a refused call reached the upstream"
        await client.call_tool("ev_echo", {"message": "allowed"})
    assert counted.calls == before + 1  # the proxy does count calls that are sent
    assert denied["code"] == "not_allowlisted"
    assert "not available to this agent" in denied["hint"]
    assert invalid["code"] == "invalid_arguments"
    assert "$.message" in invalid["hint"] and "string" in invalid["hint"]


async def test_pii_block_mode_stops_an_email_and_redact_mode_rewrites_it(
    bridge: RunningBridge, counted: CountingProxy
) -> None:
    before = counted.calls
    async with Client(bridge.url) as client:
        blocked = _structured(await client.call_tool("blk_echo", {"message": f"mail {EMAIL}"}))
        assert counted.calls == before
        redacted = _text(await client.call_tool("red_echo", {"message": f"mail {EMAIL}"}))
    assert blocked["code"] == "pii_blocked" and "email" in blocked["hint"]
    assert EMAIL not in redacted and "[REDACTED:email]" in redacted


async def test_every_audit_line_is_json_and_carries_no_argument_value(
    bridge: RunningBridge,
) -> None:
    secret = "a-value-that-must-not-be-logged"
    async with Client(bridge.url) as client:
        await client.call_tool("ev_echo", {"message": secret})
        await client.call_tool("ev_echo", {"message": 7, "other": secret})
        await client.call_tool("nobody_tool", {"message": secret})
    lines = eventually("three audit lines", lambda: bridge.audit_lines(), 10, until=len)
    assert secret not in bridge.log() and EMAIL not in bridge.log()
    outcomes = {(line["tool"], line["outcome"]) for line in lines}
    assert {("ev_echo", "ok"), ("ev_echo", "invalid_arguments")} <= outcomes
    # A name that is not in the catalog is never written (issue 17): "(unknown)" and a hash.
    assert ("(unknown)", "not_allowlisted") in outcomes and "nobody_tool" not in bridge.log()
    assert all(len(line["argumentsSha256"]) == 64 for line in lines)


def test_health_and_metrics_report_the_calls(bridge: RunningBridge) -> None:
    assert httpx.get(f"{bridge.health}/healthz").status_code == 200
    ready = httpx.get(f"{bridge.health}/readyz").json()
    assert ready["servers"]["default/time"]["up"] is True
    scrape = httpx.get(f"{bridge.health}/metrics")
    assert scrape.headers["content-type"].startswith("text/plain; version=")
    metrics = scrape.text
    assert 'mcp_bridge_upstream_up{server="default/everything"} 1.0' in metrics
    assert "mcp_bridge_catalog_tools " in metrics
    assert "mcp_bridge_call_duration_seconds_bucket" in metrics


# ------------------------------------------------------------------ the wire, by hand


def test_legacy_sessions_are_the_bridges_own(bridge: RunningBridge) -> None:
    with httpx.Client(timeout=10) as http:
        # An older revision than the bridge's newest: the answer shows it was negotiated.
        older = wire.initialize(version="2025-06-18")
        answer = http.post(bridge.url, json=older, headers=ACCEPT)
        result = answer.json()["result"]
        assert result["protocolVersion"] == "2025-06-18"
        assert result["serverInfo"]["name"] == "mcp-operator-bridge"
        assert result["capabilities"]["tools"]["listChanged"] is True
        session = {**ACCEPT, "mcp-session-id": answer.headers["mcp-session-id"]}
        ping = http.post(bridge.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                         headers=session)  # fmt: skip
        assert ping.json()["result"] == {}
        listed = {"jsonrpc": "2.0", "id": 2, "method": "resources/list"}
        resources = http.post(bridge.url, json=listed, headers=session).json()["result"]
        assert resources["resources"]  # the servers' resources, namespaced (test_bridge_catalog)
        other = {"jsonrpc": "2.0", "id": 3, "method": "no/such-method"}
        assert http.post(bridge.url, json=other, headers=session).json()["error"]["code"] == -32601
        unknown = {**ACCEPT, "mcp-session-id": "nope"}
        assert http.post(bridge.url, json=other, headers=unknown).status_code == 404
        assert http.delete(bridge.url, headers=session).status_code == 200
        assert http.post(bridge.url, json=other, headers=session).status_code == 404


def test_the_2026_era_is_stateless_and_checks_its_envelope(bridge: RunningBridge) -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}
    headers = {**ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}
    with httpx.Client(timeout=10) as http:
        listed = http.post(bridge.url, json=body, headers=headers).json()["result"]
        assert listed["resultType"] == "complete" and listed["ttlMs"] == 0
        assert listed["cacheScope"] == "private"
        wrong = {**headers, "mcp-method": "tools/call"}
        assert http.post(bridge.url, json=body, headers=wrong).status_code == 400
        bare = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        assert http.post(bridge.url, json=bare, headers=headers).status_code == 400


def test_results_relayed_from_a_2026_upstream_are_the_bridges_own_in_both_eras(
    bridge: RunningBridge,
) -> None:
    """The adapter (``managed``) answers the bridge at 2026-07-28, stamping its child's
    identity; an agent gets the bridge's answer: none of that era's fields in a legacy
    session, the bridge's own ``serverInfo`` at 2026-07-28."""
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "managed_echo", "arguments": {"message": "whose"}}}  # fmt: skip
    with httpx.Client(timeout=10) as http:
        opened = http.post(bridge.url, json=wire.initialize(), headers=ACCEPT)
        session = {**ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"]}
        http.post(bridge.url, json=wire.initialized(), headers=session)
        prompts = http.post(bridge.url, json={"jsonrpc": "2.0", "id": 3, "method": "prompts/list"},
                            headers=session).json()["result"]["prompts"]  # fmt: skip
        bare = next(p for p in prompts if p["name"].startswith("managed_")
                    and not any(a.get("required") for a in p.get("arguments", [])))  # fmt: skip
        get = {"jsonrpc": "2.0", "id": 4, "method": "prompts/get",
               "params": {"name": bare["name"]}}  # fmt: skip
        for body in (call, get):
            legacy = http.post(bridge.url, json=body, headers=session).json()["result"]
            assert "resultType" not in legacy, legacy
            assert "io.modelcontextprotocol/serverInfo" not in legacy.get("_meta", {}), legacy
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        modern = {**ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
                  "mcp-name": "managed_echo"}  # fmt: skip
        params = {**call["params"], "_meta": meta}  # type: ignore[dict-item]
        stamped = http.post(bridge.url, json={**call, "params": params}, headers=modern)
        result = stamped.json()["result"]
    assert result["content"][0]["text"] == "Echo: whose"
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-operator-bridge"


# ------------------------------------------------------------------ failures and reloads


async def test_a_dead_upstream_leaves_the_others_working_and_its_return_is_noticed(
    everything_url: str,
) -> None:
    port = peers.free_port()
    time_server = peers.mcp_server_time(port)
    time_url = time_server.__enter__()
    servers = [server_entry("everything", everything_url, "ev"), server_entry("time", time_url)]
    try:
        with run_bridge(servers) as bridge:
            time_server.__exit__(None, None, None)
            async with Client(bridge.url, mode="legacy") as client:
                dead = _structured(
                    await client.call_tool("time_get_current_time", {"timezone": "UTC"})
                )
                assert dead["code"] in ("upstream_unavailable", "circuit_open")
                assert "default/time" in dead["hint"] and "other servers" in dead["hint"]
                assert _text(await client.call_tool("ev_echo", {"message": "alive"})) == (
                    "Echo: alive"
                )
                names = {tool.name for tool in (await client.list_tools()).tools}
                assert "time_get_current_time" in names  # kept listed while it is down
                time_server = peers.mcp_server_time(port)
                time_server.__enter__()

                def back() -> bool:
                    state = httpx.get(f"{bridge.health}/readyz").json()["servers"]
                    return bool(state["default/time"]["up"])

                await asyncio.to_thread(eventually, "the time server noticed", back, 30)
                again = await client.call_tool("time_get_current_time", {"timezone": "UTC"})
                assert "UTC" in _text(again)
    finally:
        time_server.__exit__(None, None, None)


async def _stream_until_list_changed(
    url: str, session: str, got: asyncio.Event, opened: asyncio.Event
) -> None:
    """Follow the session's GET stream; ``opened`` once its 200 arrived (the bridge attaches
    the stream to the session before it answers), ``got`` at the first ``list_changed``."""
    headers = {"accept": "text/event-stream", "mcp-session-id": session}
    async with (
        httpx.AsyncClient(timeout=None) as http,
        http.stream("GET", url, headers=headers) as s,
    ):
        assert s.status_code == 200, s.status_code
        opened.set()
        async for line in s.aiter_lines():
            if "notifications/tools/list_changed" in line:
                got.set()
                return


async def test_a_reload_adds_and_removes_a_server_without_a_restart(
    everything_url: str, time_url: str
) -> None:
    with run_bridge([server_entry("everything", everything_url, "ev")]) as bridge:
        pid = bridge.process.pid
        async with Client(bridge.url, mode="legacy") as client:
            assert not any(t.name.startswith("time_") for t in (await client.list_tools()).tools)
            async with httpx.AsyncClient() as http:
                init = await http.post(bridge.url, headers=ACCEPT, json=INIT)
            changed, opened = asyncio.Event(), asyncio.Event()
            streaming = asyncio.create_task(
                _stream_until_list_changed(
                    bridge.url, init.headers["mcp-session-id"], changed, opened
                )
            )
            await asyncio.wait_for(opened.wait(), 10)
            added = dict(bridge.config)
            added["servers"] = [*bridge.config["servers"], server_entry("time", time_url)]
            bridge.rewrite(added)
            await asyncio.wait_for(changed.wait(), 20)
            streaming.cancel()
            names = {t.name for t in (await client.list_tools()).tools}
            assert "time_get_current_time" in names
            assert "UTC" in _text(await client.call_tool("time_get_current_time",
                                                         {"timezone": "UTC"}))  # fmt: skip
            bridge.rewrite({**added, "servers": "not a list"})  # refused, the old one kept

            def refused() -> bool:
                metrics = httpx.get(f"{bridge.health}/metrics").text
                return 'mcp_bridge_config_reloads_total{result="invalid"} 1.0' in metrics

            await asyncio.to_thread(eventually, "the bad config refused", refused, 20)
            assert "time_get_current_time" in {t.name for t in (await client.list_tools()).tools}
            bridge.rewrite({**added, "servers": added["servers"][:1]})

            async def removed() -> bool:
                listed = await client.list_tools()
                return not any(t.name.startswith("time_") for t in listed.tools)

            await eventually_async("the time server's tools removed", removed, 10, interval=0.2)
            assert await removed()
        metrics = (await asyncio.to_thread(httpx.get, f"{bridge.health}/metrics")).text
        assert 'mcp_bridge_config_reloads_total{result="applied"} 2.0' in metrics
        assert 'mcp_bridge_config_reloads_total{result="invalid"} 1.0' in metrics
        assert bridge.process.pid == pid and bridge.process.poll() is None


# ------------------------------------------------------------------ the official inspector CLI


@needs.mark(needs.inspector_missing())
def test_the_inspector_cli_lists_and_calls_tools_through_the_bridge(
    bridge: RunningBridge, tmp_path: Any
) -> None:
    names, text = peers.inspector_lists_and_calls(bridge.url, tmp_path, "ev_echo", "hi")
    assert "ev_echo" in names and text == "Echo: hi"


def test_sigterm_ends_the_bridge_cleanly(everything_url: str) -> None:
    with run_bridge([server_entry("everything", everything_url, "ev")]) as bridge:
        bridge.process.terminate()
        assert bridge.process.wait(15) == 0
        assert "Stopping" in bridge.log()


async def test_an_upstreams_list_changed_reaches_the_agent_with_the_new_tools() -> None:
    with peers.hostile_server("changing") as url, run_bridge([server_entry("chg", url)]) as bridge:
        base = url.rsplit("/", 1)[0]
        async with httpx.AsyncClient(timeout=10) as http:

            async def following() -> bool:
                return bool((await http.post(f"{base}/streams")).json()["open"])

            await eventually_async(
                "the bridge following the server's GET stream", following, 10, interval=0.1
            )
            init = await http.post(bridge.url, headers=ACCEPT, json=INIT)
            changed, opened = asyncio.Event(), asyncio.Event()
            streaming = asyncio.create_task(
                _stream_until_list_changed(
                    bridge.url, init.headers["mcp-session-id"], changed, opened
                )
            )
            await asyncio.wait_for(opened.wait(), 10)
            await http.post(f"{base}/change")
            await asyncio.wait_for(changed.wait(), 10)
            streaming.cancel()
        async with Client(bridge.url, mode="legacy") as client:
            assert [t.name for t in (await client.list_tools()).tools] == ["chg_tool_v1"]


async def test_a_2026_upstreams_list_changed_reaches_the_agent_through_its_listen_stream() -> None:
    """The 2026-07-28 revision has no GET stream: the bridge hears the change on the answer to
    its ``subscriptions/listen`` (the periodic re-listing is 300 s away, so it cannot be that)."""
    with peers.sdk_changing_server() as url, run_bridge([server_entry("chg", url)]) as bridge:
        async with Client(bridge.url, mode="legacy") as client, httpx.AsyncClient() as http:
            servers = (await http.get(f"{bridge.health}/readyz")).json()["servers"]
            assert [s["protocol"] for s in servers.values()] == ["2026-07-28"]
            assert [t.name for t in (await client.list_tools()).tools] == ["chg_grow"]
            init = await http.post(bridge.url, headers=ACCEPT, json=INIT)
            changed, opened = asyncio.Event(), asyncio.Event()
            streaming = asyncio.create_task(
                _stream_until_list_changed(
                    bridge.url, init.headers["mcp-session-id"], changed, opened
                )
            )
            await asyncio.wait_for(opened.wait(), 10)
            assert _text(await client.call_tool("chg_grow", {})) == "grown"
            await asyncio.wait_for(changed.wait(), 10)
            streaming.cancel()
            names = [t.name for t in (await client.list_tools()).tools]
            assert names == ["chg_added", "chg_grow"]
            assert _text(await client.call_tool("chg_added", {})) == "added"


async def test_a_server_down_at_start_does_not_hold_readiness_and_joins_when_it_comes_up(
    everything_url: str,
) -> None:
    port = peers.free_port()
    servers = [
        server_entry("everything", everything_url, "ev"),
        server_entry("time", f"http://127.0.0.1:{port}/mcp"),
    ]
    with run_bridge(servers) as bridge:  # ready although time is down
        ready = await asyncio.to_thread(httpx.get, f"{bridge.health}/readyz")
        state = ready.json()["servers"]["default/time"]
        assert state == {"listed": True, "up": False, "protocol": None, "tools": 0}
        async with Client(bridge.url, mode="legacy") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "ev_echo" in names and not any(n.startswith("time_") for n in names)
            with peers.mcp_server_time(port):

                async def joined() -> bool:
                    listed = await client.list_tools()
                    return "time_get_current_time" in {tool.name for tool in listed.tools}

                await eventually_async("the server's return noticed", joined, 20, interval=0.2)
