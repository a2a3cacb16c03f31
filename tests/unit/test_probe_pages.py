"""Tool lists counted and cut on their raw JSON, and the byte budget shared by all probes."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from mcp_operator.mcp.budget import ByteBudget
from mcp_operator.mcp.errors import ProbeError
from mcp_operator.mcp.pages import Keep, SseSlimmer, ToolCount, slim_body

STATUS = Keep(description_chars=8, title_chars=4, input_schema=False)


def page(*tools: dict[str, Any], request_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": {"tools": list(tools)}}


RICH = {
    "name": "search",
    "title": "Search everything",
    "description": "Searches every document there is",
    "inputSchema": {
        "type": "object",
        "properties": {f"p{i}": {"type": "string"} for i in range(90)},
    },
    "outputSchema": {"type": "object"},
    "annotations": {"title": "Searcher", "readOnlyHint": True, "audience": ["x"] * 100},
    "_meta": {"big": "x" * 1000},
}


def test_a_tool_is_cut_to_what_status_shows() -> None:
    body = json.dumps(page(RICH)).encode()
    slim = json.loads(slim_body(body, STATUS, ToolCount(10)))
    assert slim["result"]["tools"] == [
        {
            "name": "search",
            "inputSchema": {"type": "object"},
            "description": "Searche…",
            "title": "Sea…",
            "annotations": {"title": "Sea…", "readOnlyHint": True},
        }
    ]
    assert slim["id"] == 1


def test_a_whole_keep_passes_the_bytes_through_but_still_counts() -> None:
    body = json.dumps(page(RICH, RICH)).encode()
    count = ToolCount(10)
    assert slim_body(body, Keep(), count) is body
    assert count.seen == 2


def test_tools_past_the_bound_fail_across_pages() -> None:
    count = ToolCount(3)
    slim_body(json.dumps(page({"name": "a"}, {"name": "b"})).encode(), STATUS, count)
    with pytest.raises(ProbeError) as caught:
        slim_body(json.dumps(page({"name": "c"}, {"name": "d"})).encode(), STATUS, count)
    assert caught.value.reason == "TooManyTools"


def test_bodies_that_are_not_tool_lists_pass_through_unchanged() -> None:
    for body in (b"not json", b'{"jsonrpc":"2.0","id":1,"result":{}}', b"[1, 2]", b'"x"'):
        assert slim_body(body, STATUS, ToolCount(1)) is body


def test_a_batch_is_cut_message_by_message() -> None:
    body = json.dumps([page(RICH), {"jsonrpc": "2.0", "method": "x"}]).encode()
    slim = json.loads(slim_body(body, STATUS, ToolCount(5)))
    assert slim[1] == {"jsonrpc": "2.0", "method": "x"}
    assert slim[0]["result"]["tools"][0]["inputSchema"] == {"type": "object"}


def test_a_name_is_cut_one_past_the_valid_length() -> None:
    slim = json.loads(
        slim_body(json.dumps(page({"name": "x" * 500})).encode(), STATUS, ToolCount(1))
    )
    assert slim["result"]["tools"][0]["name"] == "x" * 129


@pytest.mark.parametrize("separator", [b"\n", b"\r\n", b"\r"])
def test_sse_events_are_cut_one_by_one_whatever_the_line_breaks(separator: bytes) -> None:
    data = json.dumps(page(RICH)).encode()
    stream = (
        b": keep-alive"
        + separator * 2
        + b"event: message"
        + separator
        + b"id: 7"
        + separator
        + b"data: "
        + data
        + separator * 2
    )
    events = SseSlimmer(STATUS, ToolCount(5))
    out = b"".join(events.feed(stream[i : i + 13]) for i in range(0, len(stream), 13))
    out += events.flush()
    assert events.pending == 0
    assert out.startswith(b": keep-alive" + separator * 2)
    rewritten = out[len(b": keep-alive" + separator * 2) :]
    assert rewritten.startswith(b"event: message\nid: 7\ndata: ")
    assert rewritten.endswith(b"\n\n")
    message = json.loads(rewritten.split(b"data: ", 1)[1])
    assert message["result"]["tools"][0]["description"] == "Searche…"


def test_an_unfinished_sse_event_is_held_and_counted_as_pending() -> None:
    events = SseSlimmer(STATUS, ToolCount(5))
    assert events.feed(b'data: {"jsonrpc"') == b""
    assert events.pending == len(b'data: {"jsonrpc"')
    assert events.flush() == b'data: {"jsonrpc"'


async def test_the_budget_makes_a_reservation_wait_until_bytes_are_given_back() -> None:
    budget = ByteBudget(10)
    await budget.reserve(6)
    waiting = asyncio.create_task(budget.reserve(6))
    await asyncio.sleep(0)
    assert not waiting.done()
    budget.release(6)
    await asyncio.wait_for(waiting, 1)
    assert budget.held == 6
    assert budget.peak == 6


async def test_a_cancelled_wait_takes_nothing_and_lets_the_next_one_in() -> None:
    budget = ByteBudget(10)
    await budget.reserve(10)
    first = asyncio.create_task(budget.reserve(8))
    second = asyncio.create_task(budget.reserve(2))
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.sleep(0)
    budget.release(10)
    await asyncio.wait_for(second, 1)
    assert budget.held == 2
