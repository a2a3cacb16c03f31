"""The bridge's answer to one relayed call (``bridge.front_relay._Reply``) and the pure rules
around it: a resumable legacy SSE answer that outlives its connection, a log message's way
to the agent of the call (``bridge.aggregate.call_log``), and ``requiredCapabilities``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcp_operator.bridge.aggregate import call_log
from mcp_operator.bridge.front_relay import ModernChannel, _Reply
from mcp_operator.bridge.relay import required_object
from mcp_operator.mcp.scrub import Scrubber
from mcp_operator.serve.asgi import ClientGoneError
from mcp_operator.serve.events import EventStore
from mcp_operator.serve.jsonrpc import dumps

PROGRESS = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
ANSWER = {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}


class Wire:
    """An ASGI ``send`` whose connection breaks after ``breaks_after`` body sends."""

    def __init__(self, breaks_after: int | None = None) -> None:
        self.breaks_after = breaks_after
        self.sent: list[dict[str, Any]] = []

    async def __call__(self, message: dict[str, Any]) -> None:
        bodies = [m for m in self.sent if m["type"] == "http.response.body"]
        body = message["type"] == "http.response.body"
        if body and self.breaks_after is not None and len(bodies) >= self.breaks_after:
            raise OSError("connection reset")
        self.sent.append(message)

    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")


async def test_a_resumable_answer_goes_on_in_the_store_after_its_connection_breaks() -> None:
    store = EventStore()
    wire = Wire(breaks_after=2)  # the priming event and the first progress get through
    reply = _Reply(wire, store, "session-a")
    await reply.event(PROGRESS)
    await reply.event({**PROGRESS, "params": {"progress": 2}})  # the connection breaks here
    assert reply.gone
    await reply.keepalive()
    await reply.final(200, dumps(ANSWER), ANSWER)
    assert reply.log is not None and reply.log.ended
    first_id = f"{reply.log.id}-2"  # what the agent saw last: the first progress
    log, missed = store.resume(first_id, "session-a", 0.0)
    assert log is reply.log
    assert [seq for seq, _data in missed] == [3, 4]  # the second progress, then the answer
    assert b'"result"' in missed[-1][1]
    assert b'"progress":2' in missed[0][1]
    with pytest.raises(LookupError):
        store.resume(first_id, "session-b", 0.0)  # another session's call stream


async def test_an_answer_without_a_store_still_raises_when_its_agent_goes() -> None:
    reply = _Reply(Wire(breaks_after=0))
    with pytest.raises(ClientGoneError):
        await reply.event(PROGRESS)


async def test_a_resumable_answer_opens_with_a_priming_event_and_numbers_every_event() -> None:
    store = EventStore()
    wire = Wire()
    reply = _Reply(wire, store, "s")
    await reply.event(PROGRESS)
    await reply.final(200, dumps(ANSWER), ANSWER)
    body = wire.body()
    assert body.startswith(b"id: ")
    assert body.count(b"id: ") == 3  # priming, progress, answer
    assert not wire.sent[-1].get("more_body")


async def test_a_json_answer_is_not_stored() -> None:
    store = EventStore()
    wire = Wire()
    await _Reply(wire, store, "s").final(200, dumps(ANSWER), ANSWER)
    assert len(store) == 0
    assert wire.sent[0]["status"] == 200 and wire.body() == dumps(ANSWER)


def _log(level: str, text: str = "hello") -> dict[str, Any]:
    params = {"level": level, "data": text}
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": params}


def test_a_call_log_reaches_its_agent_only_at_or_above_its_level_and_scrubbed() -> None:
    plain = Scrubber(())
    assert call_log("info", _log("warning"), plain) == _log("warning")
    assert call_log("info", _log("info"), plain) == _log("info")
    assert call_log("warning", _log("info"), plain) is None
    assert call_log(None, _log("emergency"), plain) is None  # it asked for no logs
    assert call_log("info", _log("loud"), plain) is None  # not a level
    assert call_log("bogus", _log("info"), plain) is None
    other = {"jsonrpc": "2.0", "method": "notifications/other", "params": {"level": "info"}}
    assert call_log("debug", other, plain) is None
    secret = Scrubber(["s3cret-token-value"])
    shown = call_log("debug", _log("info", "token s3cret-token-value"), secret)
    assert shown is not None and "s3cret" not in str(shown) and "***" in str(shown)


def test_a_missing_capability_is_shown_as_a_client_capabilities_object() -> None:
    assert required_object("sampling") == {"sampling": {}}
    assert required_object("elicitation.url") == {"elicitation": {"url": {}}}


async def test_an_answer_sent_along_with_a_2026_call_answers_its_question_at_once() -> None:
    channel = ModernChannel()
    channel.early = {"user_name": {"action": "accept", "content": {"name": "Alice"}}}
    sampling = {"method": "sampling/createMessage", "params": {}}
    elicit = {"method": "elicitation/create", "params": {}}
    asked = asyncio.ensure_future(channel.ask({"user_name": elicit, "llm": sampling}))
    await asyncio.sleep(0)
    assert list(channel.pending) == ["llm"]  # only the question nobody answered is a round
    channel.answer({"llm": {"role": "assistant"}})
    answers = await asked
    assert answers["user_name"]["content"] == {"name": "Alice"}
    assert channel.early == {}  # each early answer serves one question
