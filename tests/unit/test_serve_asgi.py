"""The ASGI plumbing an MCP endpoint stands on: bounded bodies, JSON bodies, SSE streams."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from mcp_operator.serve import asgi, jsonrpc, sse

Message = dict[str, Any]


def _receiver(*messages: Message) -> Callable[[], Awaitable[Message]]:
    queue = list(messages)

    async def receive() -> Message:
        if queue:
            return queue.pop(0)
        await asyncio.Event().wait()  # a client that says nothing more
        raise AssertionError("unreachable")

    return receive


class _Sent:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def __call__(self, message: Any) -> None:
        self.messages.append(message)

    @property
    def status(self) -> int:
        status: int = self.messages[0]["status"]
        return status

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages[1:])


async def test_a_body_in_chunks_is_joined() -> None:
    receive = _receiver(
        {"type": "http.request", "body": b"ab", "more_body": True},
        {"type": "http.request", "body": b"cd", "more_body": False},
    )
    assert await asgi.read_body({}, receive, 10) == b"abcd"


async def test_a_declared_length_over_the_limit_is_refused_before_reading() -> None:
    with pytest.raises(asgi.BodyTooLargeError):
        await asgi.read_body({b"content-length": "11"}, _receiver(), 10)


async def test_chunks_that_add_up_over_the_limit_are_refused() -> None:
    receive = _receiver(
        {"type": "http.request", "body": b"123456", "more_body": True},
        {"type": "http.request", "body": b"123456", "more_body": False},
    )
    with pytest.raises(asgi.BodyTooLargeError):
        await asgi.read_body({}, receive, 10)


async def test_a_disconnect_while_reading_is_reported() -> None:
    with pytest.raises(asgi.ClientGoneError):
        await asgi.read_body({}, _receiver({"type": "http.disconnect"}), 10)


def test_only_the_mcp_request_headers_are_decoded() -> None:
    scope = {"headers": [(b"host", b"a"), (b"cookie", b"secret"), (b"mcp-session-id", b"s")]}
    assert asgi.request_headers(scope) == {b"host": "a", b"mcp-session-id": "s"}


@pytest.mark.parametrize(
    ("content_type", "body", "status"),
    [
        ("text/plain", b"{}", 415),
        ("application/json", b"x" * 20, 413),
        ("application/json", b"{not json", 400),
    ],
)
async def test_a_json_body_that_cannot_be_read_is_answered_by_the_reader(
    content_type: str, body: bytes, status: int
) -> None:
    send = _Sent()
    receive = _receiver({"type": "http.request", "body": body})
    ok, decoded = await jsonrpc.read_json({b"content-type": content_type}, receive, send, 10)
    assert not ok and decoded is None
    assert send.status == status


async def test_a_parse_error_is_a_json_rpc_error_object() -> None:
    send = _Sent()
    receive = _receiver({"type": "http.request", "body": b"{"})
    await jsonrpc.read_json({b"content-type": "application/json"}, receive, send, 10)
    assert json.loads(send.body)["error"]["code"] == -32700


def test_an_sse_stream_that_falls_behind_is_closed_not_grown() -> None:
    stream = sse.SseStream(limit=2)
    assert stream.push({"n": 1}) and stream.push({"n": 2})
    assert not stream.push({"n": 3})
    assert stream.closed and len(stream.queue) == 2
    assert not stream.push({"n": 4})


def test_an_sse_event_carries_the_compact_json() -> None:
    assert sse.sse_event({"a": 1}) == b'event: message\ndata: {"a":1}\n\n'


async def test_the_pump_writes_queued_frames_and_ends_when_the_stream_closes() -> None:
    stream = sse.SseStream(limit=10)
    stream.push({"n": 1})
    send = _Sent()
    pumping = asyncio.create_task(sse.pump(stream, _receiver(), send))
    await asyncio.sleep(0)
    stream.push({"n": 2})
    stream.close()
    await asyncio.wait_for(pumping, 1)
    assert send.messages[0]["body"] == sse.sse_event({"n": 1})
    assert send.messages[1]["body"] == sse.sse_event({"n": 2})
    assert send.messages[-1] == {"type": "http.response.body", "body": b""}


async def test_the_pump_stops_when_the_client_disconnects() -> None:
    stream = sse.SseStream(limit=10)
    send = _Sent()
    receive = _receiver({"type": "http.disconnect"})
    await asyncio.wait_for(sse.pump(stream, receive, send), 1)
    assert not stream.closed  # the owner closes the session's stream, not the pump
