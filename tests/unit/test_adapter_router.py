"""The adapter's protocol core: ids, tokens, notifications, cancellation, server requests."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcp_operator.adapter.records import Session
from mcp_operator.adapter.router import REQUEST_CANCELLED, Router, RouterFullError
from mcp_operator.adapter.sessions import AdapterSessions, declared_capabilities, open_session


class Sink:
    def __init__(self, *, can_stream: bool = True) -> None:
        self.final: dict[str, Any] | None = None
        self.events: list[dict[str, Any]] = []
        self.can_stream = can_stream

    def respond(self, message: dict[str, Any]) -> None:
        assert self.final is None, "a call is answered once"
        self.final = message

    def related(self, message: dict[str, Any]) -> bool:
        if self.can_stream:
            self.events.append(message)
        return self.can_stream

    def ask(self, message: dict[str, Any]) -> bool:
        return False


class Stream:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.closed = False

    def push(self, message: dict[str, Any]) -> bool:
        self.messages.append(message)
        return True

    def close(self) -> None:
        self.closed = True


def line(data: bytes) -> dict[str, Any]:
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    decoded: dict[str, Any] = json.loads(data)
    return decoded


def request(request_id: Any, method: str = "tools/call", **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


@pytest.fixture
def table() -> AdapterSessions:
    return AdapterSessions(max_sessions=10, idle_seconds=60)


@pytest.fixture
def router(table: AdapterSessions) -> Router:
    return Router(table, max_inflight=100)


def session(table: AdapterSessions, **caps: Any) -> Session:
    new, _evicted = open_session(
        table,
        caller="a",
        protocol_version="2025-11-25",
        declared=declared_capabilities(caps),
        now=0,
    )
    new.stream = Stream()
    return new


def test_two_sessions_with_the_same_request_id_get_their_own_answers(
    router: Router, table: AdapterSessions
) -> None:
    a, b = session(table), session(table)
    sink_a, sink_b = Sink(), Sink()
    _, line_a = router.forward_request(request(1, name="echo"), a, sink_a)
    _, line_b = router.forward_request(request(1, name="echo"), b, sink_b)
    id_a, id_b = line(line_a)["id"], line(line_b)["id"]
    assert id_a != id_b

    router.from_child({"jsonrpc": "2.0", "id": id_b, "result": {"who": "b"}})
    router.from_child({"jsonrpc": "2.0", "id": id_a, "result": {"who": "a"}})

    assert sink_a.final == {"jsonrpc": "2.0", "id": 1, "result": {"who": "a"}}
    assert sink_b.final == {"jsonrpc": "2.0", "id": 1, "result": {"who": "b"}}
    assert not router.pending and not a.calls and not b.calls


def test_string_ids_survive_the_round_trip(router: Router, table: AdapterSessions) -> None:
    sink = Sink()
    _, data = router.forward_request(request("abc-1"), session(table), sink)
    router.from_child(
        {"jsonrpc": "2.0", "id": line(data)["id"], "error": {"code": 1, "message": "x"}}
    )
    assert sink.final is not None and sink.final["id"] == "abc-1"


def test_progress_reaches_the_call_that_carried_the_token_with_its_own_token(
    router: Router, table: AdapterSessions
) -> None:
    a, b = session(table), session(table)
    sink_a, sink_b = Sink(), Sink()
    _, line_a = router.forward_request(request(7, _meta={"progressToken": 1}), a, sink_a)
    _, line_b = router.forward_request(request(7, _meta={"progressToken": 1}), b, sink_b)
    token_a = line(line_a)["params"]["_meta"]["progressToken"]
    token_b = line(line_b)["params"]["_meta"]["progressToken"]
    assert token_a != token_b

    progress = {"progressToken": token_b, "progress": 1, "total": 2}
    router.from_child({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})

    assert sink_a.events == []
    assert sink_b.events == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": 1, "progress": 1, "total": 2},
        }
    ]


def test_progress_falls_back_to_the_session_stream_when_the_call_cannot_stream(
    router: Router, table: AdapterSessions
) -> None:
    a = session(table)
    _, data = router.forward_request(
        request(1, _meta={"progressToken": "t"}), a, Sink(can_stream=False)
    )
    token = line(data)["params"]["_meta"]["progressToken"]
    router.from_child(
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": token, "progress": 1},
        }
    )
    assert isinstance(a.stream, Stream)
    assert a.stream.messages[0]["params"]["progressToken"] == "t"


def test_list_changed_goes_to_every_session(router: Router, table: AdapterSessions) -> None:
    sessions = [session(table) for _ in range(3)]
    router.from_child({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    for each in sessions:
        assert isinstance(each.stream, Stream)
        assert [m["method"] for m in each.stream.messages] == ["notifications/tools/list_changed"]


def test_resource_updates_go_to_subscribers_only(router: Router, table: AdapterSessions) -> None:
    a, b = session(table), session(table)
    _, data = router.forward_request(request(1, "resources/subscribe", uri="test://1"), a, Sink())
    router.from_child({"jsonrpc": "2.0", "id": line(data)["id"], "result": {}})
    update = {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "test://1"},
    }
    router.from_child(update)
    assert isinstance(a.stream, Stream) and isinstance(b.stream, Stream)
    assert len(a.stream.messages) == 1 and b.stream.messages == []


def test_a_client_cancel_is_forwarded_with_the_child_id_and_ends_the_call(
    router: Router, table: AdapterSessions
) -> None:
    a = session(table)
    sink = Sink()
    _, data = router.forward_request(request(5), a, sink)
    child_id = line(data)["id"]
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}
    out = router.forward_notification(cancel, a)
    assert out is not None
    assert line(out) == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": child_id, "reason": "Cancelled by the client"},
    }
    assert sink.final is not None and sink.final["error"]["code"] == REQUEST_CANCELLED
    # a late answer from the child is dropped, not delivered twice
    router.from_child({"jsonrpc": "2.0", "id": child_id, "result": {}})
    assert not router.pending


def test_a_session_cannot_cancel_another_sessions_call(
    router: Router, table: AdapterSessions
) -> None:
    a, b = session(table), session(table)
    sink = Sink()
    router.forward_request(request(5), a, sink)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}
    assert router.forward_notification(cancel, b) is None
    assert sink.final is None


def test_initialized_from_clients_is_not_forwarded(router: Router, table: AdapterSessions) -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert router.forward_notification(note, session(table)) is None


def child_token(data: bytes) -> int:
    """The progress token the adapter gave the child for a forwarded call."""
    token: int = line(data)["params"]["_meta"]["progressToken"]
    return token


def sampling(request_id: Any, token: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = {"messages": []}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "sampling/createMessage",
        "params": params,
    }


def test_every_call_that_may_ask_carries_a_token_the_child_can_name_it_by(
    router: Router, table: AdapterSessions
) -> None:
    a = session(table)
    _, data = router.forward_request(request(1, name="x"), a, Sink())
    _, listing = router.forward_request(request(2, "tools/list"), a, Sink())
    assert child_token(data) == line(data)["id"]
    assert "_meta" not in line(listing)["params"]


def test_progress_for_a_token_the_caller_did_not_ask_for_is_dropped(
    router: Router, table: AdapterSessions
) -> None:
    a = session(table)
    sink = Sink()
    _, data = router.forward_request(request(1), a, sink)
    progress = {"progressToken": child_token(data), "progress": 1}
    router.from_child({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
    assert sink.events == []
    assert isinstance(a.stream, Stream) and a.stream.messages == []


def test_a_request_carrying_a_calls_token_goes_to_that_call_among_many(
    router: Router, table: AdapterSessions
) -> None:
    a, b = session(table, sampling={}), session(table, sampling={})
    sink_a, sink_b = Sink(), Sink()
    _, data_a = router.forward_request(request(1), a, sink_a)
    router.forward_request(request(1), b, sink_b)
    out = router.from_child(sampling(99, child_token(data_a)))
    assert out == []
    assert sink_b.events == [] and len(sink_a.events) == 1
    visible_id = sink_a.events[0]["id"]
    answer = router.forward_response({"jsonrpc": "2.0", "id": visible_id, "result": {"x": 1}}, a)
    assert answer is not None and line(answer) == {"jsonrpc": "2.0", "id": 99, "result": {"x": 1}}
    assert router.forward_response({"jsonrpc": "2.0", "id": visible_id, "result": {}}, b) is None


def test_a_request_without_a_token_goes_to_the_only_session_when_it_has_a_call_open(
    router: Router, table: AdapterSessions
) -> None:
    a = session(table, sampling={})
    sink = Sink()
    router.forward_request(request(1, "tools/list"), a, Sink())  # cannot cause a request
    router.forward_request(request(2), a, sink)
    assert router.from_child(sampling(7)) == []
    assert len(sink.events) == 1 and router.unattributed["request"] == 0


def test_a_request_without_a_token_reaches_nobody_while_another_session_exists(
    router: Router, table: AdapterSessions
) -> None:
    """The review's repro: B had the only call open and got A's late sampling prompt."""
    a, b = session(table, sampling={}), session(table, sampling={})
    sink_b = Sink()
    router.forward_request(request(1, "tools/list"), a, Sink())  # cannot cause a request
    router.forward_request(request(1), b, sink_b)
    out = router.from_child(sampling(7))
    assert len(out) == 1 and line(out[0])["error"]["code"] == -32603
    assert sink_b.events == [] and router.unattributed["request"] == 1
    assert isinstance(a.stream, Stream) and isinstance(b.stream, Stream)
    assert a.stream.messages == [] and b.stream.messages == []


def test_a_request_without_a_token_reaches_nobody_while_a_2026_caller_has_a_call_open(
    router: Router, table: AdapterSessions
) -> None:
    a = session(table, sampling={})
    sink_a, modern = Sink(), AskingSink()
    router.forward_request(request(1), a, sink_a)
    router.forward_request(request(2), None, modern, capabilities=frozenset({"sampling"}))
    out = router.from_child(sampling(7))
    assert len(out) == 1 and line(out[0])["error"]["code"] == -32603
    assert sink_a.events == [] and modern.asked == []


def test_a_request_without_a_token_among_two_open_calls_is_refused_not_guessed(
    router: Router, table: AdapterSessions
) -> None:
    a, b = session(table, sampling={}), session(table, sampling={})
    sink_a, sink_b = Sink(), Sink()
    router.forward_request(request(1), a, sink_a)
    router.forward_request(request(1), b, sink_b)
    out = router.from_child(sampling(99))
    assert len(out) == 1 and line(out[0])["error"]["code"] == -32603
    assert sink_a.events == [] and sink_b.events == []
    assert isinstance(a.stream, Stream) and isinstance(b.stream, Stream)
    assert a.stream.messages == [] and b.stream.messages == []


def test_a_request_for_a_finished_call_or_with_no_call_open_reaches_nobody(
    router: Router, table: AdapterSessions
) -> None:
    a = session(table, sampling={}, roots={})
    _, data = router.forward_request(request(1), a, Sink())
    token = child_token(data)
    router.from_child({"jsonrpc": "2.0", "id": line(data)["id"], "result": {}})
    late = router.from_child(sampling(5, token))
    idle = router.from_child({"jsonrpc": "2.0", "id": 6, "method": "roots/list"})
    assert [line(o)["id"] for o in late + idle] == [5, 6]
    assert all("error" in line(o) for o in late + idle)
    assert isinstance(a.stream, Stream) and a.stream.messages == []


def test_a_log_without_a_token_reaches_a_session_only_when_it_is_the_only_one_with_a_call(
    router: Router, table: AdapterSessions
) -> None:
    """B, with the only call open, no longer gets A's late log; nor does the session that set
    a level get logs that are not attributable to it."""
    a, b = session(table), session(table)
    log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}}
    sink_b = Sink()
    _, data_b = router.forward_request(request(1), b, sink_b)
    router.from_child(dict(log))
    assert sink_b.events == [] and router.unattributed["log"] == 1  # A exists: could be A's
    set_level = router.forward_request(request(2, "logging/setLevel", level="info"), a, Sink())
    router.from_child({"jsonrpc": "2.0", "id": line(set_level[1])["id"], "result": {}})
    router.from_child(dict(log))
    assert isinstance(a.stream, Stream) and isinstance(b.stream, Stream)
    assert a.stream.messages == [] and b.stream.messages == [] and sink_b.events == []
    assert router.unattributed["log"] == 2
    tagged = {**log, "params": {"level": "info", "_meta": {"progressToken": child_token(data_b)}}}
    router.from_child(tagged)
    assert len(sink_b.events) == 1 and a.stream.messages == []  # B's token: B's log
    router.end_session(a, "gone")
    table.remove(a.id)
    router.from_child(dict(log))
    assert len(sink_b.events) == 2  # B is the only session and has a call open


class AskingSink(Sink):
    def __init__(self) -> None:
        super().__init__()
        self.asked: list[dict[str, Any]] = []

    def ask(self, message: dict[str, Any]) -> bool:
        self.asked.append(message)
        return True


def test_a_modern_callers_request_becomes_an_ask_and_its_answer_goes_back(
    router: Router,
) -> None:
    sink = AskingSink()
    _, data = router.forward_request(request(1), None, sink, capabilities=frozenset({"sampling"}))
    assert router.from_child(sampling(42, child_token(data))) == []
    assert [m["id"] for m in sink.asked] == [42]
    out = router.answer_asked(42, {"role": "assistant"})
    assert out is not None and line(out) == {
        "jsonrpc": "2.0",
        "id": 42,
        "result": {"role": "assistant"},
    }
    assert router.answer_asked(42, {}) is None  # answered once


def test_a_modern_caller_without_the_capability_gets_the_child_refused_with_32021(
    router: Router,
) -> None:
    sink = AskingSink()
    _, data = router.forward_request(
        request(1), None, sink, capabilities=frozenset({"elicitation"})
    )
    out = router.from_child(sampling(42, child_token(data)))
    error = line(out[0])["error"]
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"sampling": {}}}
    assert sink.asked == []


def test_a_modern_call_that_may_not_ask_gets_the_child_refused(router: Router) -> None:
    sink = AskingSink()
    _, data = router.forward_request(
        request(1, "completion/complete"), None, sink, capabilities=frozenset({"sampling"})
    )
    out = router.from_child(sampling(42, child_token(data)))
    assert line(out[0])["error"]["code"] == -32601 and sink.asked == []


def test_a_server_request_the_client_cannot_answer_is_refused_to_the_child(
    router: Router, table: AdapterSessions
) -> None:
    a = session(table)  # no capabilities
    router.forward_request(request(1), a, Sink())
    out = router.from_child(
        {"jsonrpc": "2.0", "id": "r1", "method": "elicitation/create", "params": {}}
    )
    assert len(out) == 1 and line(out[0])["id"] == "r1" and line(out[0])["error"]["code"] == -32601


def test_ping_from_the_child_is_answered_by_the_adapter(router: Router) -> None:
    out = router.from_child({"jsonrpc": "2.0", "id": 3, "method": "ping"})
    assert [line(o) for o in out] == [{"jsonrpc": "2.0", "id": 3, "result": {}}]


def test_a_dead_child_fails_every_call_with_its_callers_id(
    router: Router, table: AdapterSessions
) -> None:
    sinks = [Sink() for _ in range(5)]
    for number, sink in enumerate(sinks):
        router.forward_request(request(number), session(table), sink)
    assert router.fail_all(-32603, "gone") == 5
    for number, sink in enumerate(sinks):
        assert sink.final == {
            "jsonrpc": "2.0",
            "id": number,
            "error": {"code": -32603, "message": "gone"},
        }
    assert not router.pending


def test_ending_a_session_cancels_its_calls_and_refuses_its_server_requests(
    router: Router, table: AdapterSessions
) -> None:
    a = session(table, roots={})
    sink = Sink()
    _, data = router.forward_request(request(1), a, sink)
    router.from_child({"jsonrpc": "2.0", "id": 50, "method": "roots/list"})
    lines = [line(each) for each in router.end_session(a, "bye")]
    assert {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": line(data)["id"], "reason": "bye"},
    } in lines
    assert any(each.get("id") == 50 and "error" in each for each in lines)
    assert sink.final is not None


def test_too_many_calls_in_flight_are_refused(table: AdapterSessions) -> None:
    router = Router(table, max_inflight=2)
    router.forward_request(request(1), None, Sink())
    router.forward_request(request(2), None, Sink())
    with pytest.raises(RouterFullError):
        router.forward_request(request(3), None, Sink())
