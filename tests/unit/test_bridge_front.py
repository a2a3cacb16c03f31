"""The bridge's agent-facing front in process: the wire rules of both eras, with no upstream.

A :class:`BridgeCore` with no servers behind the real ASGI app (httpx's ASGI transport): what
the front answers by itself (sessions, refusals, 2026-07-28 admission, -32601), and the pure
helpers it uses (version negotiation, result shaping, the session table).
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
import pytest

from mcp_operator.api.bridge import BridgeConfig
from mcp_operator.bridge.core import BridgeCore
from mcp_operator.bridge.front import BridgeFront
from mcp_operator.serve import era
from mcp_operator.serve.sessions import LegacySession, SessionLimitError, SessionTable
from mcp_operator.serve.sse import SseStream
from tests.support import wire

URL = "http://127.0.0.1:7800/mcp"
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
MODERN = {**ACCEPT, "mcp-protocol-version": "2026-07-28"}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


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
    answer = await http.post(URL, json=wire.initialize(), headers=ACCEPT)
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
    note = wire.initialized()
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
        ({**ACCEPT, "host": "evil.example"}, wire.initialize(), 421),
        ({**ACCEPT, "origin": "http://evil.example"}, wire.initialize(), 403),
        ({**ACCEPT, "content-type": "text/plain"}, wire.initialize(), 415),
        ({"accept": "image/png", "content-type": "application/json"}, wire.initialize(), 406),
        (ACCEPT, [wire.initialize()], 400),
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
    assert era.negotiate_version("2025-03-26") == "2025-03-26"
    assert era.negotiate_version("2099-01-01") == "2025-11-25"
    assert era.negotiate_version(None) == "2025-11-25"
    shaped = era.modern_result("tools/list", "2026-07-28", {"tools": [], "_meta": {"k": 1}}, None)
    assert shaped["ttlMs"] == 0 and shaped["cacheScope"] == "private"
    assert shaped["resultType"] == "complete" and shaped["_meta"]["k"] == 1
    called = era.modern_result("tools/call", "2026-07-28", {"content": []}, None)
    assert "ttlMs" not in called and called["resultType"] == "complete"


def test_the_session_table_is_bounded_expires_idle_sessions_and_closes_streams() -> None:
    table: SessionTable[LegacySession] = SessionTable(
        max_sessions=2, idle_seconds=10, replace_own_idle=False
    )

    def create(now: float) -> LegacySession:
        def build(session_id: str) -> LegacySession:
            return LegacySession(id=session_id, protocol_version="2025-06-18", last_active=now)

        return table.create(build, caller="agent", now=now)[0]

    first = create(0)
    second = create(0)
    second.stream = SseStream(4)
    with pytest.raises(SessionLimitError):
        create(5)
    third = create(11)  # the first expired, the streaming one stays
    assert table.get(first.id, now=11) is None and table.get(second.id, now=11) is second
    stream = second.stream
    assert table.remove(second.id) is second and stream.closed
    assert table.get(third.id, now=12) is third


# -- malformed requests: a JSON-RPC error, an audit line, never a 500 (issue 17) ---------------

INVENTED = "ssn 123-45-6789 of john.doe@example.com"


def _call(name: Any, arguments: Any = None, request_id: int = 7) -> bytes:
    params = {"name": name} if arguments is None else {"name": name, "arguments": arguments}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                       "params": params}).encode()  # fmt: skip


@pytest.fixture
async def audited() -> AsyncIterator[tuple[httpx.AsyncClient, io.BytesIO]]:
    """The front over a core whose audit goes to a strict UTF-8 stream, as stdout is."""
    config = BridgeConfig.model_validate({"run": {"name": "r", "namespace": "default"}})
    raw = io.BytesIO()
    sink = io.TextIOWrapper(raw, encoding="utf-8", errors="strict", write_through=True)
    bridge = BridgeCore(config, hooks=[], audit_stdout=sink)
    await bridge.start()
    transport = httpx.ASGITransport(app=BridgeFront(bridge), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7800") as c:
        yield c, raw
    await bridge.stop()


def _lines(raw: io.BytesIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in raw.getvalue().decode().splitlines()]


@pytest.mark.parametrize(
    ("body", "content_type", "error_code"),
    [
        (_call("x\ud800y"), "application/json", None),  # a lone surrogate in the name
        (
            b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a\\udc00"}}',
            "application/json",
            None,
        ),
        (
            b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {',
            "application/json",
            -32700,
        ),
        (_call(5), "application/json", -32602),
        (_call(["ssn", "123-45-6789"]), "application/json", -32602),
        (
            b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":"x"}',
            "application/json",
            -32602,
        ),
        (b'{"jsonrpc":"2.0","id":[7],"method":"tools/call"}', "application/json", -32600),
        (b'{"jsonrpc":"2.0","id":7,"method":5}', "application/json", -32600),
        (b"\xff\xfe not even UTF-8", "application/json", -32700),
        (_call("x"), "text/plain", None),
    ],
)
@pytest.mark.parametrize("modern", [False, True])
async def test_a_malformed_request_gets_an_error_and_an_audit_line_and_never_a_500(
    audited: tuple[httpx.AsyncClient, io.BytesIO],
    body: bytes,
    content_type: str,
    error_code: int | None,
    modern: bool,
) -> None:
    http, raw = audited
    if modern:
        headers = {**MODERN, "content-type": content_type, "mcp-method": "tools/call"}
        decoded: Any = None
        with contextlib.suppress(ValueError):
            decoded = json.loads(body)
        if isinstance(decoded, dict):  # the 2026 envelope, so that the request reaches us
            decoded.setdefault("params", {})
            if isinstance(decoded["params"], dict):
                decoded["params"]["_meta"] = META
                if isinstance(decoded["params"].get("name"), str):
                    headers["mcp-name"] = "x"
            body = json.dumps(decoded).encode()
    else:
        session = await _session(http)
        headers = {**session, "content-type": content_type}
    before = len(_lines(raw))
    answer = await http.post(URL, content=body, headers=headers)
    assert answer.status_code < 500, answer.text
    lines = _lines(raw)[before:]
    assert len(lines) == 1, lines
    assert lines[0]["tool"] == "(unknown)" and len(lines[0]["toolSha256"]) == 16
    if content_type == "application/json" and answer.status_code != 415:
        message = answer.json()
        if error_code is None and "result" in message:
            assert message["result"]["structuredContent"]["code"] == "not_allowlisted"
        elif error_code is not None and not modern:
            assert message["error"]["code"] == error_code


async def test_a_tool_name_the_agent_made_up_never_reaches_the_audit_line(
    audited: tuple[httpx.AsyncClient, io.BytesIO],
) -> None:
    http, raw = audited
    session = await _session(http)
    answer = await http.post(URL, content=_call(INVENTED, {}), headers=session)
    assert answer.json()["result"]["structuredContent"]["code"] == "not_allowlisted"
    text = raw.getvalue().decode()
    (line,) = _lines(raw)
    assert line["tool"] == "(unknown)" and line["outcome"] == "not_allowlisted"
    assert "123-45-6789" not in text and "john.doe" not in text and "ssn" not in text


async def test_the_front_counts_the_agents_sessions_by_the_caller_key_it_is_given(
    core: BridgeCore,
) -> None:
    def caller_key(scope: Mapping[str, Any], _headers: dict[bytes, str]) -> str:
        return dict(scope["headers"]).get(b"x-caller", b"").decode()  # an identity, say

    front = BridgeFront(core, caller_key=caller_key)
    transport = httpx.ASGITransport(app=front)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7800") as http:

        async def opened(caller: str) -> int:
            headers = {**ACCEPT, "x-caller": caller}
            return (await http.post(URL, json=wire.initialize(), headers=headers)).status_code

        flood = [await opened("alice") for _ in range(core.sessions.max_sessions)]
        own, other = await opened("alice"), await opened("bob")
    assert set(flood) == {200}
    assert own == 503 and other == 200  # one client address, two callers: bob is not kept out
    assert core.sessions.count("alice") == core.sessions.max_sessions - 1
    assert core.sessions.count("bob") == 1
