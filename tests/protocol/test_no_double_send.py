"""A call the upstream may have read is never sent twice underneath its caller, and interim
answers never shift answers onto the wrong call: through the bridge's upstream client and
the probe, both on the lean pool (net/pool.py), against a scripted legacy MCP server on a
real loopback socket (tests/support/http_peer.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from mcp_operator.bridge.egress import BRIDGE_EGRESS
from mcp_operator.bridge.upstreams import list_tools, upstream_session
from mcp_operator.mcp.discovery import discover
from mcp_operator.mcp.errors import ProbeError
from mcp_operator.mcp.failures import McpFailure as UpstreamError
from mcp_operator.mcp.session import McpSession
from mcp_operator.mcp.target import ProbeTarget
from mcp_operator.net.egress import EgressPolicy
from mcp_operator.net.pool import Http1Pool
from tests.support.http_peer import Answer, Behaviour, Request, http_peer

TRANSFER = {
    "name": "transfer",
    "inputSchema": {"type": "object"},
    "annotations": {"destructiveHint": True, "idempotentHint": False},
}
EARLY_HINTS = b"HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n"


def _message(request: Request) -> dict[str, Any]:
    message = json.loads(request.body or b"null")
    return message if isinstance(message, dict) else {}


def _json(message: dict[str, Any], status: int = 200, **headers: str) -> Answer:
    return status, {"content-type": "application/json", **headers}, json.dumps(message).encode()


def legacy_bank(*, drop: str | None = None) -> Callable[[Request], Answer | None]:
    """A 2025-11-25 server with one destructive tool; ``drop``: the method whose request it
    reads to the end and then hangs up on (a Pod killed mid-call)."""

    def respond(request: Request) -> Answer | None:
        if request.method == "DELETE":
            return 200, {}, b""
        message = _message(request)
        method, ident = message.get("method"), message.get("id")
        if method == drop:
            return None
        if method == "server/discover":
            error = {"code": -32601, "message": "Method not found"}
            return _json({"jsonrpc": "2.0", "id": ident, "error": error}, status=400)
        if method == "initialize":
            info = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "bank", "version": "1"},
            }
            return _json({"jsonrpc": "2.0", "id": ident, "result": info}, **{"mcp-session-id": "s"})
        if method == "notifications/initialized":
            return 202, {}, b""
        if method == "tools/list":
            return _json({"jsonrpc": "2.0", "id": ident, "result": {"tools": [TRANSFER]}})
        if method == "tools/call":
            params = message.get("params") or {}
            text = f"{params.get('name')}({json.dumps(params.get('arguments'))})"
            result = {"content": [{"type": "text", "text": text}]}
            return _json({"jsonrpc": "2.0", "id": ident, "result": result})
        return _json({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "?"}})

    return respond


class Upstream:
    """One upstream as the bridge's pool makes it (bridge/upstreams.py): listed and called."""

    def __init__(self, name: str, url: str, *, http1: Http1Pool) -> None:
        self.session: McpSession = upstream_session(name, url, http1)

    async def list_tools(self, seconds: float) -> list[dict[str, Any]]:
        return await list_tools(self.session, seconds)

    async def call_tool(self, name: str, arguments: dict[str, Any], seconds: float) -> Any:
        return await self.session.request(
            "tools/call", {"name": name, "arguments": arguments}, seconds
        )


def _calls(requests: list[Request], method: str) -> list[Request]:
    return [request for request in requests if _message(request).get("method") == method]


async def test_a_tools_call_the_upstream_read_and_dropped_reaches_it_exactly_once() -> None:
    async with http_peer(Behaviour(respond=legacy_bank(drop="tools/call"))) as peer:
        pool = Http1Pool(egress=BRIDGE_EGRESS)
        upstream = Upstream("bank", peer.url, http1=pool)
        assert [tool["name"] for tool in await upstream.list_tools(seconds=5)] == ["transfer"]
        with pytest.raises(UpstreamError) as caught:
            await upstream.call_tool("transfer", {"to": "bob", "amount": 100}, seconds=5)
        assert caught.value.kind == "unavailable"
        calls = _calls(peer.requests, "tools/call")
        assert len(calls) == 1
        assert calls[0].connection == 1  # it went on the kept-alive connection
        await pool.aclose()


async def test_every_call_gets_its_own_answer_when_the_upstream_sends_early_hints() -> None:
    behaviour = Behaviour(respond=legacy_bank(), interim=[EARLY_HINTS], interim_pause=0.05)
    async with http_peer(behaviour) as peer:
        pool = Http1Pool(egress=BRIDGE_EGRESS)
        upstream = Upstream("bank", peer.url, http1=pool)
        await upstream.list_tools(seconds=5)
        for person in ("alice", "bob", "carol"):
            result = await upstream.call_tool("transfer", {"to": person}, seconds=5)
            assert result["content"][0]["text"] == f'transfer({{"to": "{person}"}})'
        assert peer.connections == 1
        await pool.aclose()


async def test_the_probes_listing_the_server_read_and_dropped_is_sent_once() -> None:
    async with http_peer(Behaviour(respond=legacy_bank(drop="tools/list"))) as peer:
        target = ProbeTarget(peer.url, egress=EgressPolicy(allow_loopback=True))
        with pytest.raises(ProbeError):
            await discover(target)
        listings = _calls(peer.requests, "tools/list")
        assert len(listings) == 1
        assert listings[0].connection == 1
