"""The bridge's policies as a real process in front of real upstreams, with the SDK client.

Upstreams: a server on the official SDK whose ``change`` tool rewrites another tool's
description and announces it (a "rug pull"), probed by the operator's own probe for the
pins; server-everything over stdio behind our adapter (a managed-style upstream) for the
rules and the rate limit.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp import Client

from mcp_operator.controller.mcpserver.report import STATUS_KEEP
from mcp_operator.mcp.discovery import discover
from mcp_operator.mcp.target import ProbeTarget
from mcp_operator.net.egress import EgressPolicy
from tests.support import needs, peers
from tests.support.bridge_run import run_bridge, server_entry
from tests.support.waiting import eventually, eventually_async

pytestmark = [pytest.mark.timeout(180)]

ON_LOOPBACK = EgressPolicy(allow_loopback=True)
IDENTITY = {"namespace": "default", "serviceAccount": "researcher", "pod": "agent-1"}


def _structured(result: Any) -> dict[str, Any]:
    assert result.is_error, result
    structured: dict[str, Any] = result.structured_content
    return structured


async def _pins(url: str) -> dict[str, str]:
    """What the operator's probe pins for the server at ``url``."""
    discovery = await discover(ProbeTarget(url, egress=ON_LOOPBACK), STATUS_KEEP)
    return {tool.name: tool.sha256 for tool in discovery.tools if tool.sha256}


async def test_a_rug_pull_is_refused_until_the_probe_repins_the_new_definition() -> None:
    with peers.rug_pull_server() as url:
        pins = await _pins(url)
        assert set(pins) == {"lookup", "wipe", "change"}
        entry = server_entry("rug", url, pinning="pin", toolDigests=pins)
        with run_bridge([entry], extra_config={"identity": IDENTITY}) as bridge:
            async with Client(bridge.url) as client:
                ok = await client.call_tool("rug_lookup", {"word": "pin"})
                assert not ok.is_error and "meaning of pin" in ok.content[0].text
                await client.call_tool("rug_change", {})

                async def hidden() -> bool:
                    names = [t.name for t in (await client.list_tools()).tools]
                    return "rug_lookup" not in names and "rug_wipe" in names

                await eventually_async("the changed tool out of tools/list", hidden, 15)
                refused = _structured(await client.call_tool("rug_lookup", {"word": "pin"}))
                assert refused["code"] == "definition_changed"
                assert refused["pinnedSha256"] == pins["lookup"]
                assert "next probe" in refused["hint"]
                # The operator's next probe sees the new definition and re-pins it.
                repinned = await _pins(url)
                assert repinned["lookup"] != pins["lookup"] and repinned["wipe"] == pins["wipe"]
                assert refused["liveSha256"] == repinned["lookup"]
                bridge.rewrite(bridge.config | {"servers": [entry | {"toolDigests": repinned}]})

                async def listed() -> bool:
                    return "rug_lookup" in [t.name for t in (await client.list_tools()).tools]

                await eventually_async("the re-pinned tool listed again", listed, 15)
                again = await client.call_tool("rug_lookup", {"word": "pin"})
                assert not again.is_error
                described = next(
                    t for t in (await client.list_tools()).tools if t.name == "rug_lookup"
                )
                assert "id_rsa" in (described.description or "")  # what was reviewed now


@pytest.fixture(scope="module")
def managed_url() -> Iterator[str]:
    """server-everything over stdio behind our adapter, as the operator runs a stdio server."""
    reason = needs.node_missing()
    if reason:
        pytest.fail(reason)
    port = peers.free_port()
    argv = [sys.executable, "-m", "mcp_operator", "adapter", "--port", str(port), "--",
            "node", str(peers.SERVER_EVERYTHING), "stdio"]  # fmt: skip
    with peers.run_server(argv, port, name="adapter"):
        yield f"http://127.0.0.1:{port}/mcp"


RULES = [
    {
        "match": "tool.name.startsWith('get-') && caller.serviceAccount == 'researcher'",
        "action": "allow",
    },
    {"match": "tool.name.startsWith('get-')", "action": "deny", "reason": "for researchers"},
    {
        "match": "tool.name == 'echo' && arguments.message.matches('(?i)password')",
        "action": "deny",
        "reason": "do not send credentials",
    },
]


@pytest.mark.parametrize("account", ["researcher", "intern"])
async def test_rules_decide_by_service_account_and_arguments_on_server_everything(
    managed_url: str, account: str
) -> None:
    entry = server_entry("ev", managed_url, policy={"rules": RULES})
    identity = IDENTITY | {"serviceAccount": account}
    with run_bridge([entry], extra_config={"identity": identity}) as bridge:
        async with Client(bridge.url) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            echoed = await client.call_tool("ev_echo", {"message": "hello"})
            denied = _structured(await client.call_tool("ev_echo", {"message": "my PASSWORD"}))
            summed = await client.call_tool("ev_get-sum", {"a": 1, "b": 2})
        assert not echoed.is_error and "Echo: hello" in echoed.content[0].text
        assert denied["code"] == "policy_denied" and denied["hint"].startswith(
            "do not send credentials"
        )
        if account == "researcher":
            assert "ev_get-sum" in names
            assert not summed.is_error and "3" in summed.content[0].text
        else:
            assert "ev_get-sum" not in names and "ev_echo" in names
            assert _structured(summed)["code"] == "policy_denied"
            assert _structured(summed)["hint"].startswith("for researchers")
        lines = eventually("three audit lines", bridge.audit_lines, 10, until=len)
        assert any(line.get("policy", {}).get("rule") == "server rule 2" for line in lines)
        assert "PASSWORD" not in bridge.log()


async def test_a_burst_above_the_rate_limit_is_refused_with_retry_after(managed_url: str) -> None:
    limits = [{"tools": ["echo"], "perMinute": 6, "burst": 2}]
    entry = server_entry("ev", managed_url, policy={"rateLimits": limits})
    with run_bridge([entry]) as bridge:
        async with Client(bridge.url) as client:
            results = [await client.call_tool("ev_echo", {"message": str(i)}) for i in range(3)]
            other = await client.call_tool("ev_get-sum", {"a": 1, "b": 1})
        assert [r.is_error for r in results] == [False, False, True]
        refused = _structured(results[2])
        assert refused["code"] == "rate_limited"
        assert 9000 <= refused["retryAfterMs"] <= 10000  # 6 a minute: one every 10 s
        assert f"{refused['retryAfterMs']} ms" in refused["hint"]
        assert not other.is_error  # another tool, no limit
        async with httpx.AsyncClient() as http:
            metrics = (await http.get(f"{bridge.health}/metrics")).text
        assert 'outcome="rate_limited"' in metrics


async def test_an_overridden_tool_shows_our_text_and_keeps_its_fixed_argument(
    managed_url: str,
) -> None:
    override = {"name": "echo", "description": "Says the approved greeting.",
                "fixedArguments": {"message": "approved greeting"}}  # fmt: skip
    entry = server_entry("ev", managed_url, overrides=[override])
    with run_bridge([entry]) as bridge:
        async with Client(bridge.url) as client:
            echo = next(t for t in (await client.list_tools()).tools if t.name == "ev_echo")
            sent = await client.call_tool("ev_echo", {})
            forced = _structured(await client.call_tool("ev_echo", {"message": "rm -rf /"}))
    assert echo.description == "Says the approved greeting."
    assert "message" not in echo.input_schema.get("properties", {})
    assert "message" not in echo.input_schema.get("required", [])
    assert not sent.is_error and sent.content[0].text == "Echo: approved greeting"
    assert forced["code"] == "invalid_arguments" and forced["fixed"] == ["message"]
