"""The compiled bridge's progressive discovery (``discovery: search``), held to the Python
bridge's assertions.

The home test of ``test_bridge_policies.py`` runs here again against
``tests.support.dataplane``'s binary (the autouse fixture swaps the program
``tests.support.bridge_run.run_bridge`` starts, as ``test_dataplane_bridge.py`` does): the
agent's ``tools/list`` holds two tools, ``search_tools`` finds the catalog's tools and
``call_tool`` calls one. The test written here runs against both bridges (``program``): a
call by name is the very call the agent could have made directly, refused by a rule or a
filter in the same words and audited under the real tool's name; and a 2026-07-28 agent
lists, searches and calls by name statelessly.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from mcp import Client

from tests.protocol.test_bridge_policies import (
    IDENTITY,
    managed_url,
    test_search_discovery_lists_two_tools_and_saves_most_schema_bytes_for_five_servers,
)
from tests.support import needs
from tests.support.bridge_choice import started
from tests.support.bridge_run import run_bridge, server_entry
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.timeout(180),
    needs.mark(needs.node_missing()),
    pytest.mark.usefixtures("compiled_bridge"),
]

# The fixture and the test of the home module that run here again (pytest collects them).
__all__ = [
    "managed_url",
    "test_search_discovery_lists_two_tools_and_saves_most_schema_bytes_for_five_servers",
]

# What an audit line says of a call whatever the moment it was made.
VOLATILE = {"time", "durationMs"}


def _seen(result: Any) -> tuple[bool, str, Any]:
    """What the agent sees of a call's result."""
    return (bool(result.is_error), result.content[0].text, result.structured_content)


async def test_a_call_by_name_is_refused_and_audited_exactly_as_the_direct_call(
    managed_url: str, program: str
) -> None:
    rules = [
        # Denies whatever the arguments: get-sum is left out of the search too.
        {"match": "tool.name == 'get-sum'", "action": "deny", "reason": "no sums"},
        # Reads the arguments: echo stays listed and searchable, each call decided.
        {"match": "tool.name == 'echo' && arguments.message == 'stop'", "action": "deny",
         "reason": "no stopping"},
    ]  # fmt: skip
    entry = server_entry(
        "ev", managed_url, filters=[{"deny": ["get-env"]}], policy={"rules": rules}
    )
    calls: list[tuple[str, dict[str, Any]]] = [
        ("ev_echo", {"message": "stop"}),  # denied by a rule on its arguments
        ("ev_get-sum", {"a": 1, "b": 2}),  # denied whatever the arguments
        ("ev_get-env", {}),  # filtered out: not in the catalog
        ("nobody_tool", {}),  # in no catalog
        ("ev_echo", {"message": "hi"}),  # allowed
    ]
    extra = {"identity": IDENTITY, "discovery": "search"}
    with run_bridge([entry], extra_config=extra) as bridge:
        started(bridge, program)
        async with Client(bridge.url) as client:
            listed = [t.name for t in (await client.list_tools()).tools]
            query = {"query": "echo sum env", "limit": 20}
            searched = await client.call_tool("search_tools", query)
            direct, by_name = [], []
            for name, arguments in calls:
                direct.append(_seen(await client.call_tool(name, arguments)))
                sent = {"name": name, "arguments": arguments}
                by_name.append(_seen(await client.call_tool("call_tool", sent)))
            odd = _seen(await client.call_tool("call_tool", {"name": 7}))
        lines = eventually("the audit lines", bridge.audit_lines, 10, until=lambda ls: len(ls) > 10)
    assert listed == ["search_tools", "call_tool"]
    found = [hit["name"] for hit in searched.structured_content["tools"]]
    assert "ev_echo" in found and "ev_get-sum" not in found and "ev_get-env" not in found
    assert by_name == direct
    codes = [seen[2]["code"] if seen[0] else "ok" for seen in by_name]
    assert codes == ["policy_denied", "policy_denied", "not_allowlisted", "not_allowlisted", "ok"]
    assert by_name[0][2]["hint"].startswith("no stopping")
    assert by_name[4][1] == "Echo: hi"
    assert odd[0] and odd[2]["code"] == "not_allowlisted"  # a name not a string names no tool
    # One line per call, the same for the direct call and the call by name: the real tool's
    # name ("(unknown)" for a tool outside the catalog), never search_tools or call_tool.
    assert len(lines) == 11, lines
    same = [{k: v for k, v in line.items() if k not in VOLATILE} for line in lines[:10]]
    assert same[0::2] == same[1::2]
    assert [(line.get("tool"), line["outcome"]) for line in lines[1:10:2]] == [
        ("ev_echo", "policy_denied"),
        ("ev_get-sum", "policy_denied"),
        ("(unknown)", "not_allowlisted"),
        ("(unknown)", "not_allowlisted"),
        ("ev_echo", "ok"),
    ]
    assert not {"search_tools", "call_tool"} & {line.get("tool") for line in lines}


def test_a_2026_agent_lists_searches_and_calls_by_name_statelessly(
    managed_url: str, program: str
) -> None:
    """The two tools in the 2026-07-28 era: each request stands alone, its result typed."""
    rules = [{"match": "tool.name == 'echo' && arguments.message == 'stop'", "action": "deny"}]
    entry = server_entry("ev", managed_url, policy={"rules": rules})
    with run_bridge([entry], extra_config={"discovery": "search"}) as bridge:
        started(bridge, program)
        with httpx.Client(timeout=10) as http:
            listed = _modern(http, bridge.url, "tools/list", {})
            query = {"query": "echo", "limit": 2}
            found = _modern(http, bridge.url, "tools/call", _named("search_tools", query))
            echo = {"name": "ev_echo", "arguments": {"message": "hi"}}
            called = _modern(http, bridge.url, "tools/call", _named("call_tool", echo))
            stop = {"name": "ev_echo", "arguments": {"message": "stop"}}
            denied = _modern(http, bridge.url, "tools/call", _named("call_tool", stop))
    assert [t["name"] for t in listed["tools"]] == ["search_tools", "call_tool"]
    assert listed["resultType"] == "complete"
    assert found["structuredContent"]["tools"][0]["name"] == "ev_echo"
    assert found["content"][0]["text"].startswith("Found: ev_echo")
    assert called["content"][0]["text"] == "Echo: hi" and called["resultType"] == "complete"
    assert denied["isError"] and denied["structuredContent"]["code"] == "policy_denied"


def _named(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _modern(http: httpx.Client, url: str, method: str, params: dict[str, Any]) -> Any:
    """One stateless 2026-07-28 request's result."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
        **({"mcp-name": params["name"]} if "name" in params else {}),
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    return http.post(url, json=body, headers=headers).json()["result"]
