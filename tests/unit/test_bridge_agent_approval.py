"""Approval asked of the agent through elicitation (bridge.approval.AgentApprover): the
paths the SDK client of tests/protocol cannot take in a short test (no answer in time, an
agent that cannot be asked, one that did not declare elicitation, answers that are not an
approval), and the 2026-07-28 channel's refusal of an answer sent before the question."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from mcp_operator.api.agentrun import ElicitationApprovalSpec
from mcp_operator.api.bridge import ElicitationApproval
from mcp_operator.bridge.approval import AgentApprover
from mcp_operator.bridge.front_relay import PARKED_SECONDS, ModernChannel
from mcp_operator.bridge.hooks import Call
from mcp_operator.bridge.relay import CURRENT, AgentRefusal, CallRelay
from mcp_operator.bridge.rules import Decision


class Channel:
    def __init__(self, answer: dict[str, Any] | None = None, refuse: bool = False) -> None:
        self.answer, self.refuse = answer, refuse
        self.asked: list[dict[str, Any]] = []

    def progress(self, message: dict[str, Any]) -> None:
        pass

    async def ask(
        self, requests: Mapping[str, dict[str, Any]], *, fresh: bool = False
    ) -> dict[str, dict[str, Any]]:
        assert fresh  # the bridge's own question takes no answer given before it was asked
        self.asked.extend(requests.values())
        if self.refuse:
            raise AgentRefusal(-32603, "no open stream")
        if self.answer is None:
            await asyncio.sleep(3600)
        return {key: dict(self.answer or {}) for key in requests}


YES = {"action": "accept", "content": {"approve": True}}


def call() -> Call:
    entry: Any = SimpleNamespace(exposed_name="docs_wipe", server="team/docs")
    return Call(run="team/r1", exposed_name="docs_wipe", arguments={"path": "/x"}, entry=entry)


async def ask(channel: Channel, declared: frozenset[str], seconds: float = 5.0) -> Any:
    relay = CallRelay(channel, progress_token=None, capabilities=declared)
    CURRENT.set(relay)
    held = call()
    approver = AgentApprover(None, monotonic=time.monotonic, seconds=seconds)
    refusal = await approver.ask(held, Decision(action="approve", source="requireApproval"))
    return refusal, held.authorization.get("approval")


async def test_an_accept_approves_and_a_cancel_refuses_recording_the_agent() -> None:
    channel = Channel(YES)
    refusal, record = await ask(channel, frozenset({"elicitation"}))
    assert refusal is None and record["decision"] == "approved" and record["by"] == "agent"
    assert channel.asked[0]["method"] == "elicitation/create"
    assert '"path":"/x"' in channel.asked[0]["params"]["message"]
    refusal, record = await ask(Channel({"action": "cancel"}), frozenset({"elicitation"}))
    assert refusal.code == "approval_denied" and record["decision"] == "denied"


async def test_no_answer_in_time_is_approval_timeout() -> None:
    refusal, record = await ask(Channel(None), frozenset({"elicitation"}), seconds=0.2)
    assert refusal.code == "approval_timeout" and record["decision"] == "timeout"
    assert record["waitedMs"] >= 200


async def test_an_agent_that_cannot_be_asked_or_did_not_declare_elicitation_is_refused() -> None:
    refusal, record = await ask(Channel(refuse=True), frozenset({"elicitation"}))
    assert refusal.code == "approval_denied" and record["decision"] == "unavailable"
    channel = Channel(YES)
    refusal, record = await ask(channel, frozenset({"sampling"}))
    assert refusal.code == "approval_denied" and record == {"decision": "unavailable"}
    assert channel.asked == []  # never asked what it did not declare


async def test_only_an_accept_with_approve_true_approves() -> None:
    for answer in (
        {"action": "accept"},
        {"action": "accept", "content": {}},
        {"action": "accept", "content": {"approve": False}},
        {"action": "accept", "content": {"approve": "true"}},
        {"action": "accept", "content": {"approve": 1}},
        {"action": "decline", "content": {"approve": True}},
    ):
        refusal, record = await ask(Channel(answer), frozenset({"elicitation"}))
        assert refusal.code == "approval_denied", answer
        assert record["decision"] == "denied" and record["by"] == "agent"


async def test_the_question_asks_for_the_one_boolean_in_form_mode() -> None:
    channel = Channel(YES)
    await ask(channel, frozenset({"elicitation"}))
    params = channel.asked[0]["params"]
    assert params["mode"] == "form"
    schema = params["requestedSchema"]
    assert schema["required"] == ["approve"]
    assert schema["properties"]["approve"]["type"] == "boolean"
    assert schema["properties"]["approve"]["default"] is False


async def test_an_answer_sent_along_before_the_question_does_not_answer_the_bridges_own() -> None:
    """A 2026-07-28 agent may send inputResponses with its call; a server's question of that
    key takes it, the bridge's approval never does: it waits for the answer to its round."""
    early = {"approval": dict(YES), "q": {"action": "accept"}}
    channel = ModernChannel()
    channel.early = dict(early)
    server_question = await channel.ask({"q": {"method": "elicitation/create"}})
    assert server_question == {"q": {"action": "accept"}}  # the adapter's rule, kept
    waiting = asyncio.ensure_future(
        channel.ask({"approval": {"method": "elicitation/create"}}, fresh=True)
    )
    await asyncio.sleep(0)
    assert not waiting.done() and "approval" in channel.pending  # asked, in the next round
    channel.answer({"approval": {"action": "decline"}})
    assert await waiting == {"approval": {"action": "decline"}}


def test_the_longest_wait_for_the_agent_is_as_long_as_a_parked_2026_call_lasts() -> None:
    """A 2026-07-28 agent answers by retrying its call, which the bridge keeps parked for at
    most PARKED_SECONDS: a longer wait would end as ``cancelled``, not ``approval_timeout``."""
    longest = int(PARKED_SECONDS)
    for model in (ElicitationApproval, ElicitationApprovalSpec):
        assert model(timeout_seconds=longest).timeout_seconds == longest
        assert model().timeout_seconds == longest
        with pytest.raises(ValidationError):
            model(timeout_seconds=longest + 1)
