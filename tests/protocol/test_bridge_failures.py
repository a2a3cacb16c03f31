"""What reaches the agent when an upstream fails, through the real bridge process.

The upstreams are real servers on loopback: the hostile test server (a JSON-RPC error for
every ``tools/call``), and a scripted keep-alive server (tests/protocol/test_probe_wire.py's)
that reads a ``tools/call`` to its end and drops the connection, as a Pod killed mid-call
does. The agent is the SDK's client.
"""

from __future__ import annotations

import pytest
from mcp import Client

from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.pages import Keep
from mcp_operator.mcp.probe_bodies import probe_state
from mcp_operator.mcp.probe_client import probe_client
from mcp_operator.mcp.target import ProbeTarget
from tests.protocol.test_probe_wire import (
    INITIALIZED,
    LOOPBACK,
    Answer,
    Seen,
    Start,
    json_answer,
    result,
    scripted,
)
from tests.support import peers
from tests.support.bridge_run import bridge_of, server_entry
from tests.support.waiting import eventually

__all__ = ["scripted"]  # the fixture, used by name

pytestmark = [pytest.mark.timeout(120)]

TRANSFER = {
    "name": "transfer",
    "inputSchema": {"type": "object"},
    "annotations": {"destructiveHint": True, "idempotentHint": False},
}


def drops_calls(seen: Seen) -> Answer:
    """A legacy server on keep-alive connections that reads a ``tools/call`` and hangs up."""
    if seen.verb == "DELETE":
        return 200, {}, b""
    if seen.method == "initialize":
        return json_answer(result(seen, INITIALIZED), **{"mcp-session-id": "s-1"})
    if seen.method == "notifications/initialized":
        return 202, {}, b""
    if seen.method == "tools/list":
        return json_answer(result(seen, {"tools": [TRANSFER]}))
    if seen.method == "tools/call":
        raise ConnectionResetError("killed mid-call")  # the fixture closes the connection
    return json_answer({"jsonrpc": "2.0", "id": 0, "error": {"code": -32601, "message": "no"}})


async def test_a_json_rpc_error_reaches_the_agent_with_the_upstreams_code() -> None:
    # The pipeline's unit test passes -32602 through a fake; here the code comes off the wire.
    with peers.hostile_server("ok") as url:
        async with bridge_of([server_entry("hostile", url)]) as bridge:
            async with Client(bridge.url, mode="legacy") as agent:
                # It lists `add` but answers a call of it with -32601 (only `echo` is served).
                answer = await agent.call_tool("hostile_add", {})
            lines = eventually("the audit line", bridge.audit_lines, 10, until=len)
    assert answer.is_error
    structured = answer.structured_content
    assert structured is not None
    assert structured["code"] == "upstream_error"
    assert structured["rpcCode"] == -32601  # the hostile server's "Method not found"
    assert "JSON-RPC error -32601" in structured["hint"]
    assert lines[-1]["outcome"] == "upstream_error"


async def test_a_call_the_upstream_read_before_dropping_the_connection_is_sent_once(
    scripted: Start,
) -> None:
    upstream = await scripted(drops_calls)
    async with bridge_of([server_entry("bank", upstream.url)]) as bridge:
        async with Client(bridge.url, mode="legacy") as agent:
            answer = await agent.call_tool("bank_transfer", {"to": "bob"})
        lines = eventually("the audit line", bridge.audit_lines, 10, until=len)
    calls = [seen for seen in upstream.seen if seen.method == "tools/call"]
    assert len(calls) == 1, f"the call reached the upstream {len(calls)} times"
    listing = next(seen for seen in upstream.seen if seen.method == "tools/list")
    assert calls[0].connection == listing.connection  # on a reused connection (the old trap)
    assert answer.is_error
    structured = answer.structured_content
    assert structured is not None
    assert structured["code"] == "upstream_unavailable"
    assert structured["attempts"] == 1
    assert "did not retry it; it may or may not have run" in structured["hint"]
    assert lines[-1]["outcome"] == "upstream_unavailable"
    assert lines[-1]["attempts"] == 1


async def test_the_probes_client_sends_such_a_call_once_too(scripted: Start) -> None:
    upstream = await scripted(drops_calls)
    target = ProbeTarget(upstream.url, egress=LOOPBACK)
    async with probe_client(target, probe_state(target), Keep()) as client:
        await client.list_tools()
        with pytest.raises(McpFailure) as caught:
            await client.session.request("tools/call", {"name": "transfer", "arguments": {}})
    assert caught.value.fault == "connection" and caught.value.transient
    calls = [seen for seen in upstream.seen if seen.method == "tools/call"]
    assert len(calls) == 1, f"the call reached the upstream {len(calls)} times"
