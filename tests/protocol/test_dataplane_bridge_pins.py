"""Pinned tool definitions and tool overrides in the compiled bridge (``mcp-dataplane
bridge``), held to the Python bridge's assertions.

The home override test of ``test_bridge_policies.py`` runs here unchanged against the binary
(the autouse fixture swaps the program, as ``test_dataplane_bridge.py`` does); the home pin
tests, which re-pin by rewriting a running bridge's configuration, run in
``test_dataplane_bridge_reload.py``. The tests below assert what they observe without a
reload, against both bridges (``program``), so that the two stay alike: a changed
definition hidden and refused with ``definition_changed`` and never sent, a bridge started
with the new pins listing it again, ``strict`` refusing a tool without a pin and ``off``
checking nothing. The pins are the operator's own probe's, so these tests also hold the
compiled digest to the probe's.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client, types

from tests.protocol.test_bridge_policies import (
    IDENTITY,
    _pins,
    _structured,
    managed_url,
    test_an_overridden_tool_shows_our_text_and_keeps_its_fixed_argument,
)
from tests.support import peers
from tests.support.bridge_run import CountingProxy, run_bridge, server_entry
from tests.support.waiting import eventually, eventually_async

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("compiled_bridge")]

EVERY_TOOL = {"lookup", "wipe", "wiped", "search_docs", "ping", "change", "change_quietly"}

__all__ = [
    "managed_url",
    "test_an_overridden_tool_shows_our_text_and_keeps_its_fixed_argument",
]


async def _names(client: Client) -> set[str]:
    return {t.name for t in (await client.list_tools()).tools}


def _text(result: types.CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, types.TextContent), first
    return first.text


def _audited(bridge: Any, outcome: str) -> list[dict[str, Any]]:
    return [line for line in bridge.audit_lines() if line.get("outcome") == outcome]


async def test_a_rug_pull_is_hidden_refused_and_never_sent(program: str) -> None:
    with peers.rug_pull_server() as url, CountingProxy(url) as proxy:
        pins = await _pins(url)
        assert set(pins) == EVERY_TOOL
        entry = server_entry("rug", proxy.url, pinning="pin", toolDigests=pins)
        with run_bridge([entry], extra_config={"identity": IDENTITY}) as bridge:
            async with Client(bridge.url) as client:
                # The bridge's digest of every live definition is the probe's pin.
                assert await _names(client) == {f"rug_{name}" for name in EVERY_TOOL}
                ok = await client.call_tool("rug_lookup", {"word": "pin"})
                assert not ok.is_error and "meaning of pin" in _text(ok)
                await client.call_tool("rug_change", {})

                async def hidden() -> bool:
                    names = await _names(client)
                    return "rug_lookup" not in names and "rug_wipe" in names

                await eventually_async("the changed tool out of tools/list", hidden, 15)
                sent = proxy.calls
                assert sent >= 2  # the proxy sees the calls the bridge sends
                refused = _structured(await client.call_tool("rug_lookup", {"word": "pin"}))
                assert proxy.calls == sent  # refused in the bridge: never sent
                assert refused["code"] == "definition_changed"
                assert refused["server"] == "default/rug" and refused["pinning"] == "pin"
                assert refused["pinnedSha256"] == pins["lookup"]
                assert "next probe" in refused["hint"]
                assert refused["hint"].startswith(
                    "The definition of rug_lookup (its description, schema or annotations) on "
                    "server default/rug is not the one the operator pinned"
                )
                repinned = await _pins(url)
                assert refused["liveSha256"] == repinned["lookup"] != pins["lookup"]
                # Tools whose definitions did not change keep working.
                pong = await client.call_tool("rug_ping", {})
                assert not pong.is_error and _text(pong) == "pong"
            [line] = eventually(
                "the refusal's audit line",
                lambda: _audited(bridge, "definition_changed"),
                10,
                until=len,
            )
            assert (line["tool"], line["originalTool"]) == ("rug_lookup", "lookup")
            assert line["attempts"] == 0


async def test_a_change_the_server_never_announced_is_listed_by_a_bridge_with_the_new_pins(
    program: str,
) -> None:
    """Without a reload: a bridge started after a quiet change, with the pins of before,
    hides and refuses the tool; one started with the operator's new pins lists its new
    definition and calls it."""
    with peers.rug_pull_server() as url:
        pins = await _pins(url)
        async with Client(url) as upstream:
            changed = await upstream.call_tool("change_quietly", {"note": "Reviewed on Tuesday."})
            assert not changed.is_error
        repinned = await _pins(url)
        assert repinned["lookup"] != pins["lookup"]
        stale = server_entry("rug", url, pinning="pin", toolDigests=pins)
        with run_bridge([stale], extra_config={"identity": IDENTITY}) as bridge:
            async with Client(bridge.url) as client:
                assert await _names(client) == {f"rug_{n}" for n in EVERY_TOOL - {"lookup"}}
                refused = _structured(await client.call_tool("rug_lookup", {"word": "pin"}))
                assert refused["code"] == "definition_changed"
                assert refused["liveSha256"] == repinned["lookup"]
        fresh = server_entry("rug", url, pinning="pin", toolDigests=repinned)
        with run_bridge([fresh], extra_config={"identity": IDENTITY}) as bridge:
            async with Client(bridge.url) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                assert "Tuesday" in (tools["rug_lookup"].description or "")
                again = await client.call_tool("rug_lookup", {"word": "pin"})
                assert not again.is_error and "meaning of pin" in _text(again)


async def test_strict_pinning_refuses_a_tool_without_a_pin_and_off_checks_nothing(
    program: str,
) -> None:
    with peers.rug_pull_server() as url:
        pins = await _pins(url)
        unpinned = {name: sha for name, sha in pins.items() if name != "ping"}
        strict = server_entry("rug", url, pinning="strict", toolDigests=unpinned)
        with run_bridge([strict]) as bridge:
            async with Client(bridge.url) as client:
                assert await _names(client) == {f"rug_{n}" for n in EVERY_TOOL - {"ping"}}
                refused = _structured(await client.call_tool("rug_ping", {}))
                looked = await client.call_tool("rug_lookup", {"word": "x"})
        assert refused["code"] == "definition_changed" and refused["pinning"] == "strict"
        assert refused["pinnedSha256"] is None and refused["liveSha256"] == pins["ping"]
        assert "has no approved definition yet" in refused["hint"]
        assert "approves" in refused["hint"]
        assert not looked.is_error
        wrong = {name: "0" * 64 for name in pins}
        off = server_entry("rug", url, pinning="off", toolDigests=wrong)
        with run_bridge([off]) as bridge:
            async with Client(bridge.url) as client:
                assert await _names(client) == {f"rug_{n}" for n in EVERY_TOOL}
                pong = await client.call_tool("rug_ping", {})
        assert not pong.is_error and _text(pong) == "pong"
