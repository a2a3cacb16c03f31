"""The probe's lean Streamable HTTP client on the wire (mcp/probe_client.py).

Real peers (server-everything, mcp-server-time) prove the probe in tests/protocol/test_probe.py;
here a scripted HTTP/1.1 server on a real socket records what the client sends, so the era
policy, the headers of each era and the use of one keep-alive connection are checked exactly.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from mcp_operator.mcp import probe_client
from mcp_operator.mcp.discovery import discover
from mcp_operator.mcp.errors import ProbeError
from mcp_operator.mcp.target import ProbeTarget
from mcp_operator.net.egress import EgressPolicy

LOOPBACK = EgressPolicy(allow_loopback=True)
TOOL = {"name": "echo", "inputSchema": {"type": "object"}}
INITIALIZED = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "scripted", "version": "1"},
}


@dataclass
class Seen:
    """One request as the scripted server read it."""

    connection: int
    verb: str
    headers: dict[str, str]
    message: dict[str, Any] | None

    @property
    def method(self) -> str:
        return self.verb if self.message is None else str(self.message.get("method"))


Answer = tuple[int, dict[str, str], bytes]
Script = Callable[[Seen], Answer | Awaitable[Answer]]


@dataclass
class Scripted:
    url: str
    seen: list[Seen] = field(default_factory=list)


def json_answer(message: dict[str, Any], status: int = 200, **headers: str) -> Answer:
    return status, {"content-type": "application/json", **headers}, json.dumps(message).encode()


def sse_answer(message: dict[str, Any], **headers: str) -> Answer:
    body = b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"
    return 200, {"content-type": "text/event-stream", **headers}, body


def result(seen: Seen, value: dict[str, Any]) -> dict[str, Any]:
    assert seen.message is not None
    return {"jsonrpc": "2.0", "id": seen.message["id"], "result": value}


def error(seen: Seen, code: int, message: str, data: Any = None) -> dict[str, Any]:
    assert seen.message is not None
    return {
        "jsonrpc": "2.0",
        "id": seen.message["id"],
        "error": {"code": code, "message": message, "data": data},
    }


Start = Callable[[Script], Awaitable[Scripted]]


@pytest.fixture
async def scripted() -> AsyncIterator[Start]:
    """Starts a scripted server on loopback: every request is recorded, then answered by the
    script, on keep-alive connections (numbered in the order they were opened)."""
    servers: list[asyncio.Server] = []

    async def start(script: Script) -> Scripted:
        record = Scripted("")
        opened = 0

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal opened
            opened += 1
            number = opened
            try:
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    lines = head.decode("latin-1").split("\r\n")
                    headers = {}
                    for line in lines[1:]:
                        if line:
                            name, _, value = line.partition(":")
                            headers[name.strip().lower()] = value.strip()
                    body = await reader.readexactly(int(headers.get("content-length", "0")))
                    seen = Seen(number, lines[0].split(" ")[0], headers, json.loads(body or "null"))
                    record.seen.append(seen)
                    try:
                        answer = script(seen)
                        if inspect.isawaitable(answer):  # a script that answers when told
                            answer = await answer
                    except _Hang:
                        await asyncio.Event().wait()  # until the client gives up
                        return
                    status, answer_headers, content = answer
                    out = [f"HTTP/1.1 {status} Scripted", f"content-length: {len(content)}"]
                    out += [f"{name}: {value}" for name, value in answer_headers.items()]
                    writer.write(("\r\n".join(out) + "\r\n\r\n").encode() + content)
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        servers.append(server)
        record.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"
        return record

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


def legacy_server(seen: Seen) -> Answer:
    """A 2025-11-25 server: discover is unknown to it; SSE answers; a session; DELETE."""
    if seen.verb == "DELETE":
        return 200, {}, b""
    method = seen.method
    if method == "server/discover":
        return json_answer(error(seen, -32601, "Method not found"), status=400)
    if method == "initialize":
        return sse_answer(result(seen, INITIALIZED), **{"mcp-session-id": "s-1"})
    if method == "notifications/initialized":
        return 202, {}, b""
    if method == "tools/list":
        return sse_answer(result(seen, {"tools": [TOOL]}))
    return json_answer(error(seen, -32601, "Method not found"))


async def test_a_legacy_probe_is_one_connection_with_the_session_on_every_request(
    scripted: Start,
) -> None:
    server = await scripted(legacy_server)
    found = await discover(ProbeTarget(server.url, egress=LOOPBACK, headers={"x-key": "k"}))
    assert [tool.name for tool in found.tools] == ["echo"]
    assert found.protocol_version == "2025-11-25"
    assert found.server_name == "scripted"
    methods = [seen.method for seen in server.seen]
    assert methods == [
        "server/discover",
        "initialize",
        "notifications/initialized",
        "tools/list",
        "DELETE",
    ]
    assert {seen.connection for seen in server.seen} == {1}  # keep-alive throughout
    discover_request = server.seen[0]
    assert discover_request.headers["mcp-protocol-version"] == "2026-07-28"
    assert discover_request.headers["mcp-method"] == "server/discover"
    for seen in server.seen[2:]:
        assert seen.headers["mcp-session-id"] == "s-1"
        assert seen.headers["mcp-protocol-version"] == "2025-11-25"
    assert all(seen.headers["x-key"] == "k" for seen in server.seen)


async def test_a_modern_probe_stamps_each_request_and_keeps_no_session(
    scripted: Start,
) -> None:
    def modern(seen: Seen) -> Answer:
        if seen.method == "server/discover":
            info = {"io.modelcontextprotocol/serverInfo": {"name": "m", "version": "2"}}
            return json_answer(
                result(
                    seen,
                    {
                        "supportedVersions": ["2026-07-28"],
                        "capabilities": {"tools": {"listChanged": True}},
                        "_meta": info,
                    },
                )
            )
        return json_answer(result(seen, {"tools": [TOOL], "ttlMs": 1000}))

    server = await scripted(modern)
    found = await discover(ProbeTarget(server.url, egress=LOOPBACK))
    assert found.protocol_version == "2026-07-28"
    assert (found.server_name, found.list_changed) == ("m", True)
    assert [seen.method for seen in server.seen] == ["server/discover", "tools/list"]
    listing = server.seen[1]
    assert listing.headers["mcp-method"] == "tools/list"
    assert listing.headers["mcp-protocol-version"] == "2026-07-28"
    assert "mcp-session-id" not in listing.headers
    assert listing.message is not None
    assert listing.message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == (
        "2026-07-28"
    )


async def test_a_discover_answer_with_only_legacy_versions_falls_back_to_the_handshake(
    scripted: Start,
) -> None:
    def advertises_legacy(seen: Seen) -> Answer:
        if seen.method == "server/discover":
            return json_answer(
                result(seen, {"supportedVersions": ["2025-11-25"], "capabilities": {}})
            )
        return legacy_server(seen)

    server = await scripted(advertises_legacy)
    found = await discover(ProbeTarget(server.url, egress=LOOPBACK))
    assert found.protocol_version == "2025-11-25"
    assert [seen.method for seen in server.seen][:2] == ["server/discover", "initialize"]


async def test_a_modern_only_server_sharing_no_version_fails_without_a_handshake(
    scripted: Start,
) -> None:
    def future_only(seen: Seen) -> Answer:
        data = {"supported": ["2099-01-01"], "requested": "2026-07-28"}
        return json_answer(error(seen, -32022, "Unsupported protocol version", data), 400)

    server = await scripted(future_only)
    with pytest.raises(ProbeError) as caught:
        await discover(ProbeTarget(server.url, egress=LOOPBACK, timeout_seconds=5))
    assert caught.value.reason == "HTTPError"
    assert "HTTP 400" in caught.value.message
    assert [seen.method for seen in server.seen] == ["server/discover"]


async def test_an_unsupported_version_naming_ours_is_retried_once_at_it(
    scripted: Start,
) -> None:
    def picky(seen: Seen) -> Answer:
        if seen.method == "server/discover" and len(seen_discovers(server)) == 1:
            data = {"supported": ["2026-07-28"], "requested": "2026-07-28"}
            return json_answer(error(seen, -32022, "Unsupported protocol version", data))
        if seen.method == "server/discover":
            return json_answer(
                result(seen, {"supportedVersions": ["2026-07-28"], "capabilities": {}})
            )
        return json_answer(result(seen, {"tools": [TOOL]}))

    server = await scripted(picky)
    found = await discover(ProbeTarget(server.url, egress=LOOPBACK))
    assert found.protocol_version == "2026-07-28"
    assert [seen.method for seen in server.seen] == [
        "server/discover",
        "server/discover",
        "tools/list",
    ]


def seen_discovers(server: Scripted) -> list[Seen]:
    return [seen for seen in server.seen if seen.method == "server/discover"]


async def test_a_header_that_would_break_the_request_is_refused_before_connecting(
    scripted: Start,
) -> None:
    server = await scripted(legacy_server)
    target = ProbeTarget(server.url, egress=LOOPBACK, headers={"x-key": "k\r\nx-forged: 1"})
    with pytest.raises(ProbeError) as caught:
        await discover(target)
    assert caught.value.reason == "InvalidTarget"
    assert "x-forged" not in caught.value.message
    assert server.seen == []


async def test_an_answer_for_another_request_is_a_protocol_error(
    scripted: Start,
) -> None:
    def confused(seen: Seen) -> Answer:
        if seen.method == "server/discover":
            return json_answer(error(seen, -32601, "Method not found"), status=400)
        return json_answer({"jsonrpc": "2.0", "id": 999, "result": INITIALIZED})

    server = await scripted(confused)
    with pytest.raises(ProbeError) as caught:
        await discover(ProbeTarget(server.url, egress=LOOPBACK))
    assert caught.value.reason == "ProtocolError"


def events_server(framing: bytes) -> Script:
    """A legacy server whose SSE answers end their lines with ``framing`` (CR, LF or CRLF)."""

    def script(seen: Seen) -> Answer:
        status, headers, body = legacy_server(seen)
        if headers.get("content-type") == "text/event-stream":
            body = body.replace(b"\n", framing)
        return status, headers, body

    return script


@pytest.mark.parametrize("framing", [b"\r", b"\n", b"\r\n"], ids=["cr", "lf", "crlf"])
async def test_sse_answers_are_read_whatever_their_line_breaks(
    scripted: Start, framing: bytes
) -> None:
    server = await scripted(events_server(framing))
    found = await discover(ProbeTarget(server.url, egress=LOOPBACK))
    assert [tool.name for tool in found.tools] == ["echo"]


async def test_a_legacy_session_ignores_2026_fields_and_a_negative_ttl_is_floored(
    scripted: Start,
) -> None:
    def with_ttl(seen: Seen) -> Answer:
        if seen.method == "tools/list":
            return json_answer(result(seen, {"tools": [TOOL], "ttlMs": -1, "cacheScope": "?"}))
        return legacy_server(seen)

    server = await scripted(with_ttl)
    found = await discover(ProbeTarget(server.url, egress=LOOPBACK))
    assert [tool.name for tool in found.tools] == ["echo"]


async def test_an_error_status_for_the_initialized_notification_is_no_failure(
    scripted: Start,
) -> None:
    def grumpy(seen: Seen) -> Answer:
        if seen.method == "notifications/initialized":
            return 400, {"content-type": "text/plain"}, b"no"
        return legacy_server(seen)

    server = await scripted(grumpy)
    found = await discover(ProbeTarget(server.url, egress=LOOPBACK))
    assert [tool.name for tool in found.tools] == ["echo"]


async def test_a_discover_left_unanswered_falls_back_to_the_handshake(
    scripted: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(probe_client, "DISCOVER_SECONDS", 0.5)  # the SDK's bound is 10 s

    def silent_on_discover(seen: Seen) -> Answer:
        if seen.method == "server/discover":
            raise _Hang
        return legacy_server(seen)

    server = await scripted(silent_on_discover)
    found = await discover(ProbeTarget(server.url, egress=LOOPBACK, timeout_seconds=5))
    assert found.protocol_version == "2025-11-25"
    assert [seen.method for seen in server.seen][:2] == ["server/discover", "initialize"]
    assert len({seen.connection for seen in server.seen}) == 2, "the stuck one was dropped"


async def test_a_redirect_says_where_to_instead_of_following_it(scripted: Start) -> None:
    def moved(seen: Seen) -> Answer:
        return 307, {"location": "https://other.example/mcp?token=secret"}, b""

    server = await scripted(moved)
    with pytest.raises(ProbeError) as caught:
        await discover(ProbeTarget(server.url, egress=LOOPBACK))
    assert caught.value.reason == "ProtocolError"
    assert "https://other.example/mcp" in caught.value.message
    assert "secret" not in caught.value.message
    assert len(server.seen) == 2, "discover, then initialize: neither followed"


async def test_an_endless_head_is_refused_within_its_bound(scripted: Start) -> None:
    def endless(seen: Seen) -> Answer:
        return 200, {"x-big": "a" * (1024 * 1024)}, b""

    server = await scripted(endless)
    with pytest.raises(ProbeError) as caught:
        await discover(ProbeTarget(server.url, egress=LOOPBACK))
    assert caught.value.reason == "ProtocolError"
    assert "broke the HTTP protocol" in caught.value.message


@pytest.mark.parametrize("name", ["Content-Length", "transfer-encoding", "Connection"])
async def test_a_header_that_would_reframe_the_request_is_refused(
    scripted: Start, name: str
) -> None:
    server = await scripted(legacy_server)
    with pytest.raises(ProbeError) as caught:
        await discover(ProbeTarget(server.url, egress=LOOPBACK, headers={name: "0"}))
    assert caught.value.reason == "InvalidTarget"
    assert server.seen == []


async def test_configured_headers_cannot_replace_the_protocols_own(scripted: Start) -> None:
    server = await scripted(legacy_server)
    headers = {"Accept": "text/html", "MCP-Session-Id": "forged", "Host": "virtual.example"}
    await discover(ProbeTarget(server.url, egress=LOOPBACK, headers=headers))
    for seen in server.seen:
        assert seen.headers["accept"] == "application/json, text/event-stream"
        assert seen.headers["host"] == "virtual.example", "Host may name a virtual host"
    assert server.seen[3].headers["mcp-session-id"] == "s-1"


class _Hang(Exception):
    """Raised by a script: the server reads the request and never answers."""


async def test_credentials_in_the_url_are_sent_as_basic_auth_unless_a_header_is_configured(
    scripted: Start,
) -> None:
    server = await scripted(legacy_server)
    with_userinfo = server.url.replace("http://", "http://probe:s%3Acret@")
    await discover(ProbeTarget(with_userinfo, egress=LOOPBACK))
    assert {seen.headers["authorization"] for seen in server.seen} == {"Basic cHJvYmU6czpjcmV0"}
    server.seen.clear()
    headers = {"Authorization": "Bearer configured"}
    await discover(ProbeTarget(with_userinfo, egress=LOOPBACK, headers=headers))
    assert {seen.headers["authorization"] for seen in server.seen} == {"Bearer configured"}
