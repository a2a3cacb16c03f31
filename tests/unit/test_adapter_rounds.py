"""Input-required rounds: keys, bounded parked state, one-use tokens; Mcp-Param header schemas."""

from __future__ import annotations

from typing import Any

from mcp_operator.adapter.param_headers import ToolHeaderSchemas
from mcp_operator.adapter.records import PendingCall
from mcp_operator.adapter.rounds import ParkedCall, RoundStore, ask_from_child


class Sink:
    def respond(self, message: dict[str, Any]) -> None: ...
    def related(self, message: dict[str, Any]) -> bool:
        return False

    def ask(self, message: dict[str, Any]) -> bool:
        return False


def parked(number: int) -> ParkedCall:
    call = PendingCall(number, number, "tools/call", None, Sink(), None)
    return ParkedCall(call, "tools/call", "tool", {}, 0.0)


def test_the_childs_key_names_the_question_and_adapter_only_meta_is_removed() -> None:
    meta = {"progressToken": 4, "mcp-operator.dev/inputKey": "user_name", "trace": "t"}
    ask = ask_from_child(
        {"jsonrpc": "2.0", "id": 9, "method": "elicitation/create", "params": {"_meta": meta}}
    )
    assert (ask.key, ask.child_id) == ("user_name", 9)
    assert ask.as_input_request() == {
        "method": "elicitation/create",
        "params": {"_meta": {"trace": "t"}},
    }
    unnamed = ask_from_child({"jsonrpc": "2.0", "id": "a", "method": "roots/list"})
    assert unnamed.key == "request-a" and unnamed.params == {}


def test_a_token_is_used_once_and_only_for_the_request_it_was_issued_for() -> None:
    store = RoundStore(max_parked=10, ttl=60)
    token, _ = store.park(parked(1), now=0)
    assert store.take(token, "tools/call", "other", now=1)[0] is None
    assert store.take(token + "x", "tools/call", "tool", now=1)[0] is None
    found, _ = store.take(token, "tools/call", "tool", now=1)
    assert found is not None and found.call.child_id == 1
    assert store.take(token, "tools/call", "tool", now=1)[0] is None


def test_parked_calls_are_bounded_in_count_and_time() -> None:
    store = RoundStore(max_parked=2, ttl=10)
    first, _ = store.park(parked(1), now=0)
    store.park(parked(2), now=5)
    _, evicted = store.park(parked(3), now=6)
    assert [p.call.child_id for p in evicted] == [1]
    assert store.take(first, "tools/call", "tool", now=6)[0] is None
    assert [p.call.child_id for p in store.expire(now=15)] == [2]
    assert len(store) == 1


def test_param_headers_are_checked_against_the_learnt_schema_only() -> None:
    schemas = ToolHeaderSchemas()
    region = {"type": "string", "x-mcp-header": "Region"}
    schemas.learn(
        {
            "tools": [
                {
                    "name": "geo",
                    "inputSchema": {"type": "object", "properties": {"region": region}},
                },
                {"name": "plain", "inputSchema": {"type": "object"}},
            ]
        }
    )
    assert len(schemas) == 1
    call = {"name": "geo", "arguments": {"region": "eu"}}
    assert schemas.check(call, [(b"mcp-param-region", b" eu ")]) is None
    missing = schemas.check(call, [])
    assert missing is not None and missing.code == -32020
    wrong = schemas.check(call, [(b"Mcp-Param-Region", b"us")])
    assert wrong is not None and wrong.code == -32020
    assert schemas.check({"name": "plain", "arguments": {}}, [(b"mcp-param-x", b"1")]) is None
    schemas.forget()
    assert schemas.check(call, []) is None
