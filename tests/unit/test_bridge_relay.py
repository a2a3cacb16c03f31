"""The relay's rules on fakes: what reaches the agent, what the server is told, the bounds.

The upstream session and the agent's channel are stand-ins that record what they are given;
the protocol tests (tests/protocol/test_bridge_relay.py) run the same rules on real peers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, cast

import pytest
from mcp_types import MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types.jsonrpc import METHOD_NOT_FOUND

from mcp_operator.bridge import relay
from mcp_operator.bridge.errors import CallCancelled
from mcp_operator.bridge.relay import (
    MAX_OPEN_ASKS,
    MAX_REFUSALS,
    AgentRefusal,
    BridgeSession,
    CallRelay,
    agent_message,
    end_session,
)
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.session import McpSession
from mcp_operator.serve.capabilities import (
    capabilities_object,
    declared_capabilities,
    required_capability,
)


class Channel:
    """An agent that answers every question with ``answer`` (or never, when it is None)."""

    def __init__(self, answer: dict[str, Any] | None = None) -> None:
        self.answer = answer
        self.progressed: list[dict[str, Any]] = []
        self.asked: list[dict[str, Any]] = []

    def progress(self, message: dict[str, Any]) -> None:
        self.progressed.append(message)

    async def ask(self, requests: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        self.asked.extend(requests.values())
        if self.answer is None:
            await asyncio.Event().wait()
        if "error" in (self.answer or {}):
            raise AgentRefusal(-1, "no")
        return {key: dict(self.answer or {}) for key in requests}


class Session:
    """An upstream session: scripted results for ``tools/call``, every answer it was sent."""

    def __init__(self, results: list[Any], *, modern: bool = False) -> None:
        self.results = results
        self.modern = modern
        self.connected = True
        self.name = "default/up"
        self.sent: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.cancelled = 0

    async def connect(self) -> None:
        pass

    async def request(
        self,
        method: str,
        params: Mapping[str, Any],
        seconds: float | None = None,
        *,
        related: Any = None,
    ) -> dict[str, Any]:
        self.requests.append(dict(params))
        step = self.results.pop(0)
        if step == "hang":
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        assert isinstance(step, dict)
        return step

    async def respond(self, message: Mapping[str, Any]) -> None:
        self.sent.append(dict(message))


def relay_for(
    channel: Channel, session: Session, *, token: Any = None, declared: Any = None
) -> CallRelay:
    names = declared_capabilities(declared if declared is not None else {"sampling": {}})
    relayed = CallRelay(channel, progress_token=token, capabilities=names)
    relayed._session = cast(McpSession, session)
    return relayed


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


SAMPLE = {"messages": [], "maxTokens": 1}


# -- capabilities ------------------------------------------------------------------------------


def test_capability_names_round_trip_into_the_object_a_2026_server_is_shown() -> None:
    declared = {
        "sampling": {"tools": {}},
        "elicitation": {"url": {}},
        "roots": {"listChanged": True},
    }
    names = declared_capabilities(declared)
    assert capabilities_object(names) == {
        "elicitation": {"url": {}},
        "roots": {"listChanged": True},
        "sampling": {"tools": {}},
    }
    assert declared_capabilities(capabilities_object(names)) == names


def test_an_elicitation_mode_the_agent_did_not_declare_is_missing() -> None:
    bare = declared_capabilities({"elicitation": {}})
    url_only = declared_capabilities({"elicitation": {"url": {}}})
    assert required_capability("elicitation/create", {"message": "m"}, bare) is None
    assert required_capability("elicitation/create", {"mode": "url"}, bare) == "elicitation.url"
    assert required_capability("elicitation/create", {"mode": "url"}, url_only) is None
    assert required_capability("elicitation/create", {}, url_only) == "elicitation.form"
    assert required_capability("roots/list", {}, bare) == "roots"
    assert required_capability("ping", {}, frozenset()) is None


# -- what the server says on the call's stream -------------------------------------------------


async def test_progress_reaches_the_agent_under_its_own_token_only() -> None:
    channel, session = Channel(), Session([])
    relayed = relay_for(channel, session, token="agent-7")
    other = relay_for(Channel(), session, token="agent-7")
    assert relayed.token != other.token != "agent-7"
    relayed.heard(
        {
            "method": "notifications/progress",
            "params": {"progressToken": relayed.token, "progress": 1},
        }
    )
    relayed.heard(
        {
            "method": "notifications/progress",
            "params": {"progressToken": other.token, "progress": 2},
        }
    )
    assert channel.progressed == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "agent-7", "progress": 1},
        }
    ]
    silent = relay_for(channel, session)  # the agent asked for no progress
    silent.heard({"method": "notifications/progress", "params": {"progressToken": silent.token}})
    assert len(channel.progressed) == 1


async def test_a_request_the_agent_cannot_take_is_refused_to_the_server_and_never_asked() -> None:
    channel, session = Channel({"role": "assistant"}), Session([])
    relayed = relay_for(channel, session, declared={"roots": {}})
    told: list[tuple[str, str]] = []
    relayed.observe = lambda method, outcome: told.append((method, outcome))
    relayed.heard({"id": 1, "method": "sampling/createMessage", "params": SAMPLE})
    relayed.heard({"id": 2, "method": "tasks/get", "params": {}})
    relayed.heard({"id": 3, "method": "ping"})
    relayed.heard({"id": 4, "method": "roots/list"})
    await settle()
    by_id = {message["id"]: message for message in session.sent}
    assert by_id[1]["error"]["code"] == METHOD_NOT_FOUND
    assert "did not declare sampling" in by_id[1]["error"]["message"]
    assert by_id[2]["error"]["code"] == METHOD_NOT_FOUND
    assert by_id[3]["result"] == {}
    assert by_id[4]["result"] == {"role": "assistant"}
    assert channel.asked == [{"method": "roots/list", "params": {}}]
    assert sorted(told) == [
        ("ping", "relayed"),
        ("roots/list", "relayed"),
        ("sampling/createMessage", "undeclared"),
        ("tasks/get", "unsupported"),
    ]


async def test_an_agents_error_goes_back_to_the_server_as_an_error() -> None:
    channel, session = Channel({"error": True}), Session([])
    relayed = relay_for(channel, session)
    relayed.heard({"id": "s1", "method": "sampling/createMessage", "params": SAMPLE})
    await settle()
    assert session.sent == [{"jsonrpc": "2.0", "id": "s1", "error": {"code": -1, "message": "no"}}]


async def test_a_flood_is_bounded_in_asks_and_refusals_and_the_rest_is_dropped() -> None:
    channel, session = Channel(None), Session([])  # the agent never answers
    relayed = relay_for(channel, session)
    told: list[str] = []
    relayed.observe = lambda method, outcome: told.append(outcome)
    for index in range(500):
        relayed.heard({"id": index, "method": "sampling/createMessage", "params": SAMPLE})
    await settle()
    assert len(channel.asked) == MAX_OPEN_ASKS
    assert len(session.sent) == MAX_REFUSALS
    assert told.count("bounded") == MAX_REFUSALS
    assert told.count("dropped") == 500 - MAX_OPEN_ASKS - MAX_REFUSALS
    relayed.end()  # the call is over: nothing is left waiting for the agent
    await settle()
    assert not relayed._tasks


# -- the call, with 2026-07-28 rounds ----------------------------------------------------------


def rounds(*requests: dict[str, Any], state: str = "s1") -> dict[str, Any]:
    return {
        "resultType": "input_required",
        "inputRequests": {f"k{i}": request for i, request in enumerate(requests)},
        "requestState": state,
    }


async def test_a_2026_servers_rounds_are_answered_by_the_agent_and_sent_back_with_its_state() -> (
    None
):
    channel = Channel({"role": "assistant", "content": {"type": "text", "text": "hi"}})
    session = Session(
        [rounds({"method": "sampling/createMessage", "params": SAMPLE}), {"content": []}],
        modern=True,
    )
    relayed = CallRelay(
        channel, progress_token=5, capabilities=declared_capabilities({"sampling": {}})
    )
    result = await relayed.call(cast(McpSession, session), "t", {"a": 1})
    assert result == {"content": []}
    first, second = session.requests
    assert first["_meta"]["progressToken"] == relayed.token
    assert first["_meta"]["io.modelcontextprotocol/clientCapabilities"] == {"sampling": {}}
    assert second["requestState"] == "s1"
    assert second["inputResponses"] == {"k0": channel.answer}


@pytest.mark.parametrize(
    ("requests", "code"),
    [
        ([{"method": "elicitation/create", "params": {}}], MISSING_REQUIRED_CLIENT_CAPABILITY),
        ([{"method": "tasks/get"}], METHOD_NOT_FOUND),
        ([{"params": {}}], None),
        ([{"method": "roots/list"}] * 17, None),
    ],
)
async def test_a_round_the_agent_cannot_answer_fails_the_call_without_asking(
    requests: list[dict[str, Any]], code: int | None
) -> None:
    channel = Channel({})
    session = Session([rounds(*requests)], modern=True)
    relayed = CallRelay(
        channel, progress_token=None, capabilities=declared_capabilities({"sampling": {}})
    )
    with pytest.raises(McpFailure) as failed:
        await relayed.call(cast(McpSession, session), "t", {})
    assert failed.value.code == code
    assert channel.asked == []


async def test_a_cancelled_call_cancels_its_upstream_request_and_raises_call_cancelled() -> None:
    session = Session(["hang"])
    relayed = relay_for(Channel(), session)
    call = asyncio.ensure_future(relayed.call(cast(McpSession, session), "t", {}))
    await settle()
    relayed.cancel("The agent cancelled the call")
    with pytest.raises(CallCancelled):
        await call
    assert session.cancelled == 1
    assert relayed.cancelled == "The agent cancelled the call"


# -- the agent's legacy session ----------------------------------------------------------------


async def test_an_answer_or_a_cancellation_names_only_this_sessions_own() -> None:
    loop = asyncio.get_running_loop()
    mine = BridgeSession(id="a", protocol_version="2025-11-25", last_active=0.0)
    theirs = BridgeSession(id="b", protocol_version="2025-11-25", last_active=0.0)
    waiter: asyncio.Future[dict[str, Any]] = loop.create_future()
    theirs.asked[1] = waiter
    theirs_relay = relay_for(Channel(), Session([]))
    theirs.calls[1] = theirs_relay
    agent_message(mine, {"jsonrpc": "2.0", "id": 1, "result": {}})
    agent_message(mine, {"method": "notifications/cancelled", "params": {"requestId": 1}})
    assert not waiter.done() and theirs_relay.cancelled is None
    agent_message(theirs, {"jsonrpc": "2.0", "id": 1, "result": {"x": 1}})
    assert waiter.result()["result"] == {"x": 1}
    agent_message(theirs, {"method": "notifications/cancelled", "params": {"requestId": 1}})
    assert theirs_relay.cancelled == "The agent cancelled the call"


async def test_an_ended_session_cancels_its_calls_and_refuses_its_open_questions() -> None:
    session = BridgeSession(id="a", protocol_version="2025-11-25", last_active=0.0)
    waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    session.asked[3] = waiter
    session.calls["c"] = relay_for(Channel(), Session([]))
    end_session(session, "The client ended the session")
    assert isinstance(waiter.exception(), AgentRefusal)
    assert session.calls["c"].cancelled == "The client ended the session"
    assert relay.current() is None


async def test_a_call_tried_again_after_a_failure_still_relays_its_requests() -> None:
    channel = Channel({"role": "assistant"})
    relayed = relay_for(channel, Session([]))

    class Asking(Session):
        async def request(
            self,
            method: str,
            params: Mapping[str, Any],
            seconds: float | None = None,
            *,
            related: Any = None,
        ) -> dict[str, Any]:
            related.heard({"id": 9, "method": "sampling/createMessage", "params": SAMPLE})
            await settle()
            return {"content": []}

    failing = Session([])
    with pytest.raises(IndexError):  # the first attempt fails (the pipeline would retry)
        await relayed.call(cast(McpSession, failing), "t", {})
    asking = Asking([])
    await relayed.call(cast(McpSession, asking), "t", {})
    assert channel.asked == [{"method": "sampling/createMessage", "params": SAMPLE}]
    assert asking.sent == [{"jsonrpc": "2.0", "id": 9, "result": {"role": "assistant"}}]


def test_a_servers_made_up_methods_do_not_grow_the_metrics_labels() -> None:
    from mcp_operator.bridge.metrics import BridgeMetrics

    metrics = BridgeMetrics()
    for method in ("sampling/createMessage", "x/1", "x/2"):
        metrics.observe_server_request(method, "unsupported")
    samples = metrics.server_requests.collect()[0].samples
    labels = {sample.labels["method"] for sample in samples if sample.name.endswith("_total")}
    assert labels == {"sampling/createMessage", "other"}


async def test_a_cancellation_that_is_not_the_relays_stays_a_cancellation() -> None:
    session = Session(["hang"])
    relayed = relay_for(Channel(), session)
    call = asyncio.ensure_future(relayed.call(cast(McpSession, session), "t", {}))
    await settle()
    call.cancel()  # the call's deadline, say: not the agent's doing
    with pytest.raises(asyncio.CancelledError):
        await call
    assert session.cancelled == 1 and relayed.cancelled is None


async def test_the_agents_cancellation_inside_a_deadline_is_the_agents() -> None:
    session = Session(["hang"])
    relayed = relay_for(Channel(), session)

    async def under_deadline() -> dict[str, Any]:
        async with asyncio.timeout(30):
            return await relayed.call(cast(McpSession, session), "t", {})

    call = asyncio.ensure_future(under_deadline())
    await settle()
    relayed.cancel("The agent cancelled the call")
    with pytest.raises(CallCancelled):
        await call
    assert not call.cancelled() and session.cancelled == 1


def test_other_notifications_go_to_whoever_asked_for_them_else_nowhere() -> None:
    channel = Channel()
    relayed = relay_for(channel, Session([]))
    log = {"method": "notifications/message", "params": {"level": "info", "data": "x"}}
    relayed.heard(log)  # nobody asked: dropped
    heard: list[dict[str, Any]] = []
    relayed.on_notification = heard.append
    relayed.heard(log)
    assert heard == [log] and channel.progressed == []


async def test_a_header_value_the_server_echoes_into_a_question_never_reaches_the_agent() -> None:
    from mcp_operator.mcp.scrub import Scrubber

    secret = "Bearer s3cr3t-token-value"
    channel, session = Channel({"role": "assistant"}), Session([])
    relayed = relay_for(channel, session, token=1)
    relayed.scrubber = Scrubber([secret])
    echoed = {"messages": [{"role": "user", "content": {"type": "text", "text": secret}}]}
    relayed.heard({"id": 1, "method": "sampling/createMessage", "params": echoed})
    params = {"progressToken": relayed.token, "progress": 1, "message": secret}
    relayed.heard({"method": "notifications/progress", "params": params})
    await settle()
    assert "s3cr3t" not in repr(channel.asked) and "s3cr3t" not in repr(channel.progressed)
    assert channel.asked and channel.progressed
