"""The bridge's agent-facing front in process: the wire rules of both eras, with no upstream.

A :class:`BridgeCore` with no servers behind the real ASGI app (httpx's ASGI transport): what
the front answers by itself (sessions, refusals, 2026-07-28 admission, -32601), and the pure
helpers it uses (version negotiation, result shaping, the session table).
"""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from mcp_operator.api.bridge import BridgeConfig
from mcp_operator.bridge import answers
from mcp_operator.bridge.core import BridgeCore
from mcp_operator.bridge.front import BridgeFront
from mcp_operator.bridge.sessions import SessionLimitError, SessionTable
from mcp_operator.serve.sse import SseStream

URL = "http://127.0.0.1:7800/mcp"
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
MODERN = {**ACCEPT, "mcp-protocol-version": "2026-07-28"}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _init(version: str = "2025-06-18") -> dict[str, Any]:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t"}}
    return {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}


@pytest.fixture
async def core() -> AsyncIterator[BridgeCore]:
    config = BridgeConfig.model_validate({"run": {"name": "r", "namespace": "default"}})
    bridge = BridgeCore(config, hooks=[], audit_stdout=io.StringIO())
    await bridge.start()
    yield bridge
    await bridge.stop()


@pytest.fixture
async def http(core: BridgeCore) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=BridgeFront(core))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7800") as c:
        yield c


async def _session(http: httpx.AsyncClient) -> dict[str, str]:
    answer = await http.post(URL, json=_init(), headers=ACCEPT)
    assert answer.status_code == 200
    return {**ACCEPT, "mcp-session-id": answer.headers["mcp-session-id"]}


async def test_initialize_opens_a_session_that_later_requests_must_name(
    http: httpx.AsyncClient, core: BridgeCore
) -> None:
    session = await _session(http)
    assert len(core.sessions) == 1
    listed = await http.post(URL, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                             headers=session)  # fmt: skip
    assert listed.json() == {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}
    missing = await http.post(URL, json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
                              headers=ACCEPT)  # fmt: skip
    assert missing.status_code == 400
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(URL, json=note, headers=session)).status_code == 202


async def test_a_call_to_an_unknown_tool_is_a_structured_error_not_a_jsonrpc_error(
    http: httpx.AsyncClient,
) -> None:
    session = await _session(http)
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "x_y", "arguments": {}}}  # fmt: skip
    result = (await http.post(URL, json=call, headers=session)).json()["result"]
    assert result["isError"] is True
    assert result["structuredContent"]["code"] == "not_allowlisted"


@pytest.mark.parametrize(
    ("headers", "body", "status"),
    [
        ({**ACCEPT, "host": "evil.example"}, _init(), 421),
        ({**ACCEPT, "origin": "http://evil.example"}, _init(), 403),
        ({**ACCEPT, "content-type": "text/plain"}, _init(), 415),
        ({"accept": "image/png", "content-type": "application/json"}, _init(), 406),
        (ACCEPT, [_init()], 400),
    ],
)
async def test_requests_the_front_refuses(
    http: httpx.AsyncClient, headers: dict[str, str], body: Any, status: int
) -> None:
    answer = await http.post(URL, content=json.dumps(body), headers=headers)
    assert answer.status_code == status


async def test_unknown_methods_get_method_not_found_in_both_eras(http: httpx.AsyncClient) -> None:
    session = await _session(http)
    other = {"jsonrpc": "2.0", "id": 4, "method": "prompts/list"}
    assert (await http.post(URL, json=other, headers=session)).json()["error"]["code"] == -32601
    modern = {**other, "params": {"_meta": META}}
    answer = await http.post(URL, json=modern, headers={**MODERN, "mcp-method": "prompts/list"})
    assert answer.status_code == 404 and answer.json()["error"]["code"] == -32601


async def test_the_2026_era_discovers_and_shapes_results(http: httpx.AsyncClient) -> None:
    body = {"jsonrpc": "2.0", "id": 5, "method": "server/discover", "params": {"_meta": META}}
    answer = await http.post(URL, json=body, headers={**MODERN, "mcp-method": "server/discover"})
    result = answer.json()["result"]
    assert result["supportedVersions"] == ["2026-07-28"]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-operator-bridge"
    unsupported = await http.post(
        URL, json=body, headers={**MODERN, "mcp-protocol-version": "2030-01-01"}
    )
    assert unsupported.status_code == 400
    assert (await http.get(URL, headers=MODERN)).status_code == 405


async def test_delete_ends_a_session_and_its_stream(
    http: httpx.AsyncClient, core: BridgeCore
) -> None:
    session = await _session(http)
    assert (await http.delete(URL, headers=session)).status_code == 200
    assert (await http.delete(URL, headers=session)).status_code == 404
    assert len(core.sessions) == 0


def test_versions_are_negotiated_and_results_shaped() -> None:
    assert answers.negotiate_version("2025-03-26") == "2025-03-26"
    assert answers.negotiate_version("2099-01-01") == "2025-11-25"
    assert answers.negotiate_version(None) == "2025-11-25"
    shaped = answers.modern_result("tools/list", {"tools": [], "_meta": {"k": 1}})
    assert shaped["ttlMs"] == 0 and shaped["cacheScope"] == "private"
    assert shaped["resultType"] == "complete" and shaped["_meta"]["k"] == 1
    called = answers.modern_result("tools/call", {"content": []})
    assert "ttlMs" not in called and called["resultType"] == "complete"


def test_the_session_table_is_bounded_expires_idle_sessions_and_closes_streams() -> None:
    table = SessionTable(max_sessions=2, idle_seconds=10)
    first = table.create("2025-06-18", now=0)
    second = table.create("2025-06-18", now=0)
    second.stream = SseStream(4)
    with pytest.raises(SessionLimitError):
        table.create("2025-06-18", now=5)
    third = table.create("2025-06-18", now=11)  # the first expired, the streaming one stays
    assert table.get(first.id, now=11) is None and table.get(second.id, now=11) is second
    stream = second.stream
    assert table.remove(second.id) is second and stream.closed
    assert table.get(third.id, now=12) is third
