"""A session's credentials on the wire: the token of a file the kubelet rotates goes with
every request (POST, GET stream, DELETE), a refusal re-reads it and resends that one request
once only when the token changed, and a missing token fails before anything is sent —
against a scripted legacy MCP server on a real loopback socket (tests/support/http_peer.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mcp_operator.api.bridge import BridgeConfig
from mcp_operator.bridge.egress import BRIDGE_EGRESS
from mcp_operator.bridge.upstreams import UpstreamPool
from mcp_operator.mcp.credentials import CHECK_SECONDS, TokenFileCredentials
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.session import McpSession
from mcp_operator.net.pool import Http1Pool
from tests.support.http_peer import Answer, Behaviour, Request, http_peer

CLIENT = {"name": "test", "version": "1"}


def _json(message: dict[str, Any], status: int = 200, **headers: str) -> Answer:
    return status, {"content-type": "application/json", **headers}, json.dumps(message).encode()


def guarded(accepted: Callable[[], str]) -> Callable[[Request], Answer | None]:
    """A 2025-11-25 server that answers only ``Authorization: Bearer <accepted()>``."""

    def respond(request: Request) -> Answer | None:
        if request.headers.get("authorization") != f"Bearer {accepted()}":
            challenge = 'Bearer error="invalid_token"'
            return 401, {"www-authenticate": challenge}, b""
        if request.method == "DELETE":
            return 200, {}, b""
        if request.method == "GET":
            return 405, {}, b""
        message = json.loads(request.body or b"null")
        method, ident = message.get("method"), message.get("id")
        if method == "server/discover":
            error = {"code": -32601, "message": "Method not found"}
            return _json({"jsonrpc": "2.0", "id": ident, "error": error}, status=400)
        if method == "initialize":
            info = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "guarded", "version": "1"},
            }
            return _json({"jsonrpc": "2.0", "id": ident, "result": info}, **{"mcp-session-id": "s"})
        if method == "notifications/initialized":
            return 202, {}, b""
        return _json({"jsonrpc": "2.0", "id": ident, "result": {"tools": []}})

    return respond


def rotate(path: Path, token: str) -> None:
    """Write ``token`` the way the kubelet does: a new file renamed over the old one."""
    fresh = path.with_suffix(".new")
    fresh.write_text(token)
    os.replace(fresh, path)


def token_session(
    url: str, token_file: Path, check_seconds: float = CHECK_SECONDS
) -> tuple[Http1Pool, McpSession]:
    """A session to ``url`` sending the token in ``token_file``, and its connection pool."""
    pool = Http1Pool(egress=BRIDGE_EGRESS)
    credentials = TokenFileCredentials(token_file, check_seconds=check_seconds)
    return pool, McpSession(url, pool, client_info=CLIENT, credentials=credentials)


async def test_every_request_carries_the_token_and_a_rotated_one_is_picked_up(
    tmp_path: Path,
) -> None:
    token_file = tmp_path / "token"
    rotate(token_file, "first")
    current = {"token": "first"}
    behaviour = Behaviour(respond=guarded(lambda: current["token"]))
    async with http_peer(behaviour) as peer:
        pool, session = token_session(peer.url, token_file, check_seconds=0)
        await session.request("tools/list", {}, 5)
        rotate(token_file, "second")
        current["token"] = "second"
        await session.request("tools/list", {}, 5)
        with pytest.raises(McpFailure):  # the server does not stream: 405, but it was sent
            async for _ in session.changes():
                break
        await session.close()
        await pool.aclose()
    verbs = {request.method for request in peer.requests}
    assert verbs == {"POST", "GET", "DELETE"}
    assert all(r.headers.get("authorization", "").startswith("Bearer ") for r in peer.requests)
    last = [r.headers["authorization"] for r in peer.requests[-3:]]
    assert last == ["Bearer second"] * 3


async def test_a_refusal_reads_the_file_again_and_resends_that_request_once(
    tmp_path: Path,
) -> None:
    token_file = tmp_path / "token"
    rotate(token_file, "old")
    accepted = {"token": "old"}
    behaviour = Behaviour(respond=guarded(lambda: accepted["token"]))
    async with http_peer(behaviour) as peer:
        # Metadata looked at only every hour: only the refusal makes it read the file again.
        pool, session = token_session(peer.url, token_file, check_seconds=3600)
        await session.request("tools/list", {}, 5)
        rotate(token_file, "new")
        accepted["token"] = "new"
        before = len(peer.requests)
        await session.request("tools/list", {}, 5)
        sent = [r.headers["authorization"] for r in peer.requests[before:]]
        await pool.aclose()
    assert sent == ["Bearer old", "Bearer new"]


async def test_a_refusal_with_the_same_token_is_not_resent(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    rotate(token_file, "wrong")
    behaviour = Behaviour(respond=guarded(lambda: "right"))
    async with http_peer(behaviour) as peer:
        pool, session = token_session(peer.url, token_file)
        with pytest.raises(McpFailure) as caught:
            await session.request("tools/list", {}, 5)
        await pool.aclose()
    assert caught.value.status == 401
    assert len(peer.requests) == 1  # server/discover, refused once, never sent again


async def test_a_missing_token_file_fails_naming_the_path_and_sends_nothing(
    tmp_path: Path,
) -> None:
    token_file = tmp_path / "absent"
    async with http_peer(Behaviour(respond=guarded(lambda: "x"))) as peer:
        pool, session = token_session(peer.url, token_file)
        with pytest.raises(McpFailure) as caught:
            await session.request("tools/list", {}, 5)
        await pool.aclose()
    assert caught.value.fault == "credentials"
    assert str(token_file) in str(caught.value)
    assert peer.requests == []


async def test_credentials_replace_a_configured_authorization_header_of_any_case(
    tmp_path: Path,
) -> None:
    token_file = tmp_path / "token"
    rotate(token_file, "projected")
    async with http_peer(Behaviour(respond=guarded(lambda: "projected"))) as peer:
        pool = Http1Pool(egress=BRIDGE_EGRESS)
        session = McpSession(
            peer.url,
            pool,
            client_info=CLIENT,
            headers={"Authorization": "Bearer static", "X-Team": "a"},
            credentials=TokenFileCredentials(token_file),
        )
        await session.request("tools/list", {}, 5)
        await pool.aclose()
    assert all(r.headers["authorization"] == "Bearer projected" for r in peer.requests)
    assert all(r.headers["x-team"] == "a" for r in peer.requests)


async def test_the_bridge_sends_each_servers_token_file_to_that_server_only(
    tmp_path: Path,
) -> None:
    token_file = tmp_path / "token"
    rotate(token_file, "for-guarded")
    async with (
        http_peer(Behaviour(respond=guarded(lambda: "for-guarded"))) as peer,
        http_peer(Behaviour(respond=guarded(lambda: "never"))) as other,
    ):
        config = BridgeConfig.model_validate(
            {
                "run": {"name": "triage", "namespace": "agents"},
                "servers": [
                    {
                        "name": "guarded",
                        "namespace": "tools",
                        "url": peer.url,
                        "prefix": "g",
                        "tokenFile": str(token_file),
                    },
                    {"name": "open", "namespace": "tools", "url": other.url, "prefix": "o"},
                ],
            }
        )
        pool = UpstreamPool(on_change=lambda _catalog: None)
        await pool.configure(config)
        await pool.stop()
    assert peer.requests and all(
        r.headers.get("authorization") == "Bearer for-guarded" for r in peer.requests
    )
    assert other.requests and all("authorization" not in r.headers for r in other.requests)
