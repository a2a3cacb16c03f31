"""The legacy HTTP+SSE session's pure parts: where its endpoint is, whose answer is whose.

The wire itself (a real server-everything, hostile servers) is tests/protocol/test_bridge_sse.py's.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from mcp_operator.mcp import sse
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.legacy_routing import answered_id, endpoint_url
from mcp_operator.mcp.legacy_sse import LegacySseSession, _Stream
from mcp_operator.net.egress import EgressPolicy
from mcp_operator.net.pool import Http1Pool

SSE = "http://mcp.example:8080/sse"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("/message?sessionId=abc", "http://mcp.example:8080/message?sessionId=abc"),
        ("message?sessionId=abc", "http://mcp.example:8080/message?sessionId=abc"),
        ("  /m\n", "http://mcp.example:8080/m"),
        ("http://mcp.example:8080/m", "http://mcp.example:8080/m"),
        ("HTTP://MCP.Example:8080/m", "http://MCP.Example:8080/m"),  # the same origin
        ("//mcp.example:8080/m", "http://mcp.example:8080/m"),
        ("/m#part", "http://mcp.example:8080/m"),
        ("http://who@mcp.example:8080/m", "http://mcp.example:8080/m"),  # no userinfo
        ("?sessionId=1", "http://mcp.example:8080/sse?sessionId=1"),
    ],
)
def test_an_endpoint_on_the_streams_origin_is_resolved_against_it(data: str, expected: str) -> None:
    assert endpoint_url(SSE, data) == expected


def test_a_default_port_is_the_same_origin_written_or_not() -> None:
    assert endpoint_url("https://h.example/sse", "https://h.example:443/m") == (
        "https://h.example:443/m"
    )
    assert endpoint_url("http://h.example:80/sse", "http://h.example/m") == "http://h.example/m"


@pytest.mark.parametrize(
    "data",
    [
        "http://evil.example:8080/message",  # another host
        "http://mcp.example:9090/message",  # another port
        "https://mcp.example:8080/message",  # another scheme
        "http://mcp.example/message",  # port 80, not 8080
        "//evil.example/message",  # scheme-relative elsewhere
        "file:///etc/passwd",
        "http://mcp.example:8080@evil.example/m",  # userinfo that looks like the host
        "http://mcp.example:99999/m",  # no port at all
    ],
)
def test_an_endpoint_on_another_origin_is_refused(data: str) -> None:
    with pytest.raises(McpFailure) as refused:
        endpoint_url(SSE, data)
    assert refused.value.fault == "mcp"


@pytest.mark.parametrize(
    "data",
    ["", "   ", "/m\r\nx-forged: 1", "/a b", "/m\x00", "/\u00e9", "/" + "a" * 2048],
)
def test_an_endpoint_that_could_not_go_on_a_request_line_as_it_is_is_refused(data: str) -> None:
    with pytest.raises(McpFailure):
        endpoint_url(SSE, data)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"jsonrpc": "2.0", "id": 3, "result": {}}, 3),
        ({"jsonrpc": "2.0", "id": 3, "error": {"code": 1, "message": "x"}}, 3),
        ({"jsonrpc": "2.0", "id": "3", "result": {}}, None),  # "3" is not 3
        ({"jsonrpc": "2.0", "id": True, "result": {}}, None),  # true is not 1
        ({"jsonrpc": "2.0", "id": 3.0, "result": {}}, None),
        ({"jsonrpc": "2.0", "id": 3, "method": "ping"}, None),  # a request, not an answer
        ({"jsonrpc": "2.0", "id": 3}, None),  # neither result nor error
        ({"jsonrpc": "2.0", "result": {}}, None),
    ],
)
def test_an_answer_is_matched_strictly_by_its_id(message: dict[str, Any], expected: Any) -> None:
    assert answered_id(message) == expected


def _session() -> LegacySseSession:
    pool = Http1Pool(egress=EgressPolicy())
    return LegacySseSession(SSE, pool, name="s", client_info={"name": "t", "version": "1"})


async def test_each_answer_on_the_stream_reaches_its_own_request_only() -> None:
    session, stream = _session(), _Stream()
    stream.endpoint = "http://mcp.example:8080/m"
    loop = asyncio.get_running_loop()
    one, two = loop.create_future(), loop.create_future()
    stream.waiting.update({1: one, 2: two})

    def said(message: dict[str, Any]) -> None:
        session._dispatch(stream, json.dumps(message).encode())

    said({"jsonrpc": "2.0", "id": "2", "result": {"wrong": "type"}})
    said({"jsonrpc": "2.0", "id": True, "result": {"wrong": "bool"}})
    said({"jsonrpc": "2.0", "id": 9, "result": {"nobody": "waits"}})
    assert not one.done() and not two.done()
    said({"jsonrpc": "2.0", "id": 2, "result": {"n": 2}})
    said({"jsonrpc": "2.0", "id": 1, "result": {"n": 1}})
    assert (await one)["result"] == {"n": 1}
    assert (await two)["result"] == {"n": 2}


async def test_progress_goes_to_the_request_that_sent_its_token_only() -> None:
    session, stream = _session(), _Stream()
    heard: dict[str, list[Any]] = {"a": [], "b": []}

    class Heard:
        def __init__(self, name: str) -> None:
            self.name = name

        def heard(self, message: dict[str, Any]) -> None:
            heard[self.name].append(message["params"]["progress"])

    stream.progress.update({(str, "tok-a"): Heard("a"), (int, 7): Heard("b")})
    for token, progress in [("tok-a", 1), ("7", 2), (7, 3), (True, 4), ("tok-b", 5)]:
        message = {"method": "notifications/progress", "params": {"progressToken": token}}
        message["params"]["progress"] = progress
        session._dispatch(stream, json.dumps(message).encode())
    assert heard == {"a": [1], "b": [3]}


async def test_a_stream_that_ends_fails_every_waiting_request() -> None:
    stream = _Stream()
    loop = asyncio.get_running_loop()
    waiting = [loop.create_future() for _ in range(3)]
    stream.waiting.update(enumerate(waiting))
    stream.end(McpFailure("connection", "gone"))
    for waiter in waiting:
        with pytest.raises(McpFailure) as failed:
            await waiter
        assert failed.value.kind == "unavailable"
    assert stream.opened.is_set()


async def test_events_give_each_events_type_with_its_data() -> None:
    async def chunks() -> Any:
        yield b"event: endpoint\ndata: /m?x=1\n\n: comment\n\nid: 4\n\n"
        yield b'data: {"a":1}\n\nevent: message\r\ndata: {"b"\r\ndata: :2}\r\n\r\n'
        yield b"event: endpoint\ndata: /unfinished"

    found = [event async for event in sse.events(chunks())]
    assert found == [("endpoint", b"/m?x=1"), (None, b'{"a":1}'), ("message", b'{"b"\n:2}')]
    messages = [data async for data in sse.messages(chunks())]
    assert messages == [b'{"a":1}', b'{"b"\n:2}']
