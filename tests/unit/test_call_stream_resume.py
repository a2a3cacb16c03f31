"""A request's answer stream cut before its response is resumed, never sent again.

The one MCP client (mcp/session.py) against a scripted legacy server on a real loopback
socket (tests/support/http_peer.py): a ``tools/call`` answered with an SSE stream that ends
after an event id and before the response is read on ``GET`` + ``Last-Event-ID``; each way
of giving up (a refused ``GET``, a resume that replays nothing, no event id at all, the
call's own deadline) fails the call with a clear message, and the ``POST`` reached the
server exactly once every time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from mcp_operator.bridge.egress import BRIDGE_EGRESS
from mcp_operator.mcp import resume
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.session import McpSession
from mcp_operator.net.pool import Http1Pool
from tests.support.http_peer import Answer, Behaviour, HttpPeer, Request, http_peer

SESSION = "s-1"
PROGRESS = {"method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}

Replay = Callable[[Request, int], Answer | None]
"""The answer to the ``n``-th ``GET`` (from 1) of the call's stream."""


def _sse(*events: tuple[str | None, dict[str, Any] | None]) -> Answer:
    body = b""
    for event_id, message in events:
        if event_id is not None:
            body += b"id: " + event_id.encode() + b"\n"
        data = b"" if message is None else json.dumps({"jsonrpc": "2.0", **message}).encode()
        body += b"data: " + data + b"\n\n"
    return 200, {"content-type": "text/event-stream"}, body


def _json(message: dict[str, Any], **headers: str) -> Answer:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    return 200, {"content-type": "application/json", **headers}, body


def _answer(ident: Any) -> dict[str, Any]:
    return {"id": ident, "result": {"content": [{"type": "text", "text": "done"}]}}


class Server:
    """A 2025-11-25 server whose ``tools/call`` stream ends after ``first`` events (no
    response), and whose ``GET`` with ``Last-Event-ID`` is answered by ``replay``."""

    def __init__(self, first: list[tuple[str | None, dict[str, Any] | None]], replay: Replay):
        self.first = first
        self.replay = replay
        self.call_id: Any = None
        self.gets: list[Request] = []
        self.first_answer: Answer | None = None
        """Instead of ``first``, these bytes answer the call."""

    def __call__(self, request: Request) -> Answer | None:
        if request.method == "DELETE":
            return 200, {}, b""
        if request.method == "GET":
            self.gets.append(request)
            return self.replay(request, len(self.gets))
        message = json.loads(request.body)
        method, ident = message.get("method"), message.get("id")
        if method == "initialize":
            info = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "cut", "version": "1"},
            }
            return _json({"id": ident, "result": info}, **{"mcp-session-id": SESSION})
        if method == "tools/call":
            self.call_id = ident
            return self.first_answer or _sse(*self.first)
        return 202, {}, b""


class Heard:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def heard(self, message: dict[str, Any]) -> None:
        self.messages.append(message)


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resume, "RESUME_PAUSES", (0.0,))


@pytest.fixture
async def pool() -> AsyncIterator[Http1Pool]:
    connections = Http1Pool(egress=BRIDGE_EGRESS)
    yield connections
    await connections.aclose()


def legacy_session(peer: HttpPeer, pool: Http1Pool) -> McpSession:
    info = {"name": "t", "version": "1"}
    return McpSession(peer.url, pool, name="cut", client_info=info, protocol_hint="2025-11-25")


async def call(peer: HttpPeer, pool: Http1Pool, heard: Heard | None = None) -> dict[str, Any]:
    session = legacy_session(peer, pool)
    return await session.request("tools/call", {"name": "slow"}, 10, related=heard)


def posts_of(peer: HttpPeer, method: str) -> int:
    bodies = [json.loads(r.body) for r in peer.requests if r.method == "POST" and r.body]
    return sum(body.get("method") == method for body in bodies)


async def test_a_cut_stream_is_resumed_from_its_last_event_id_and_the_call_is_sent_once(
    pool: Http1Pool,
) -> None:
    def replay(request: Request, n: int) -> Answer:
        if n == 1:
            return _sse(("e-3", PROGRESS))  # more progress, then cut again
        return _sse(("e-4", _answer(server.call_id)))

    server = Server([("e-1", None), ("e-2", PROGRESS)], replay)
    heard = Heard()
    async with http_peer(Behaviour(respond=server)) as peer:
        result = await call(peer, pool, heard)
    assert result["content"][0]["text"] == "done"
    assert [get.headers.get("last-event-id") for get in server.gets] == ["e-2", "e-3"]
    assert all(get.headers["mcp-session-id"] == SESSION for get in server.gets)
    assert all(get.headers["accept"] == "text/event-stream" for get in server.gets)
    assert posts_of(peer, "tools/call") == 1
    assert [m["method"] for m in heard.messages] == ["notifications/progress"] * 2


@pytest.mark.parametrize("status", [405, 404, 400])
async def test_an_upstream_that_refuses_the_resume_fails_the_call_once(
    pool: Http1Pool, status: int
) -> None:
    server = Server([("e-1", None)], lambda _r, _n: (status, {}, b"no"))
    async with http_peer(Behaviour(respond=server)) as peer:
        with pytest.raises(McpFailure) as caught:
            await call(peer, pool)
        assert posts_of(peer, "tools/call") == 1
    assert f"HTTP {status} to GET with Last-Event-ID" in str(caught.value)
    assert "refused to resume" in str(caught.value)
    assert caught.value.kind == "unavailable"
    assert len(server.gets) == 1  # a refusal is final: not asked again


async def test_a_resume_that_replays_nothing_is_given_up_after_a_few_attempts(
    pool: Http1Pool,
) -> None:
    server = Server([("e-1", None), ("e-2", PROGRESS)], lambda _r, _n: _sse())
    async with http_peer(Behaviour(respond=server)) as peer:
        with pytest.raises(McpFailure) as caught:
            await call(peer, pool)
        assert posts_of(peer, "tools/call") == 1
    assert "replayed nothing" in str(caught.value)
    assert len(server.gets) == resume.RESUME_ATTEMPTS
    assert {get.headers.get("last-event-id") for get in server.gets} == {"e-2"}


async def test_a_stream_without_event_ids_is_not_resumed(pool: Http1Pool) -> None:
    server = Server([(None, PROGRESS)], lambda _r, _n: _sse(("x", _answer(server.call_id))))
    async with http_peer(Behaviour(respond=server)) as peer:
        with pytest.raises(McpFailure) as caught:
            await call(peer, pool)
        assert posts_of(peer, "tools/call") == 1
    assert "ended the stream before answering" in str(caught.value)
    assert server.gets == []


async def test_an_event_id_past_its_bound_makes_the_stream_not_resumable(pool: Http1Pool) -> None:
    long_id = "x" * (resume.MAX_EVENT_ID_CHARS + 1)
    server = Server([("e-1", None), (long_id, PROGRESS)], lambda _r, _n: _sse())
    async with http_peer(Behaviour(respond=server)) as peer:
        with pytest.raises(McpFailure):
            await call(peer, pool)
    assert server.gets == []


async def test_a_resume_that_never_answers_is_bounded_by_the_calls_own_deadline(
    pool: Http1Pool,
) -> None:
    behaviour = Behaviour()

    def replay(_request: Request, _n: int) -> Answer:
        behaviour.hold = asyncio.Event()  # never set: the GET is never answered
        return _sse()

    server = Server([("e-1", None)], replay)
    behaviour.respond = server
    async with http_peer(behaviour) as peer:
        session = legacy_session(peer, pool)
        with pytest.raises(McpFailure) as caught:
            await session.request("tools/call", {"name": "slow"}, 0.5)
        assert posts_of(peer, "tools/call") == 1
    assert caught.value.kind == "timeout"
    assert len(server.gets) == 1


def _retry_priming(event_id: str, milliseconds: int) -> Answer:
    status, headers, body = _sse((event_id, None))
    return status, headers, f"retry: {milliseconds}\n".encode() + body


async def test_a_polling_servers_empty_reopenings_are_polls_not_failed_attempts(
    pool: Http1Pool,
) -> None:
    """A 2025-11-25 server that sent ``retry`` closes streams on purpose: five empty polls
    in a row (more than RESUME_ATTEMPTS) are waited out, then the answer comes."""

    def replay(_request: Request, n: int) -> Answer:
        return _sse(("e-2", _answer(server.call_id))) if n > 5 else _sse()

    server = Server([], replay)
    server.first_answer = _retry_priming("e-1", 0)
    async with http_peer(Behaviour(respond=server)) as peer:
        result = await call(peer, pool)
        assert posts_of(peer, "tools/call") == 1
    assert result["content"][0]["text"] == "done"
    assert len(server.gets) == 6


def test_the_pause_before_a_reopening_is_the_servers_retry_else_the_back_off() -> None:
    cursor = resume.StreamCursor()
    assert [cursor.pause(idle) for idle in range(4)] == [0.0, 0.0, 0.0, 0.0]  # no_pauses
    cursor.asked_to_wait(2500)
    assert cursor.pause(0) == cursor.pause(5) == 2.5
    cursor.asked_to_wait(10**9)
    assert cursor.pause(0) == resume.MAX_RETRY_SECONDS
