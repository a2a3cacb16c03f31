"""Property tests of the adapter's message handling: whatever a client or the child sends.

Hypothesis generates the input; the budget per test is bounded (``EXAMPLES``)
so that the unit suite stays fast. What must hold for any input:

- reading a JSON-RPC body (``serve.jsonrpc.read_json``) either decodes exactly
  what ``json.loads`` would, however the body is split into chunks, or answers
  400/413/415 itself, and never raises;
- the adapter's legacy endpoint answers every POST once, with a status from
  its vocabulary, never a crash, and gives the byte budget back every time;
- only routed capability names are kept from any ``capabilities`` value;
- the id of an oversized answer is found whichever end the serializer put it
  at, and a request from the child is never taken for an answer;
- the byte budget never goes over its limit or below zero.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_operator.adapter.budget import BodyBudget
from mcp_operator.adapter.config import AdapterConfig
from mcp_operator.adapter.core import AdapterCore
from mcp_operator.adapter.front import HttpFront
from mcp_operator.adapter.oversized import EDGE_BYTES, response_id
from mcp_operator.adapter.sessions import ROUTED_CAPABILITIES, declared_capabilities, open_session
from mcp_operator.serve.jsonrpc import read_json

EXAMPLES = settings(max_examples=150, deadline=None)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
request_ids = st.integers(min_value=0, max_value=2**53) | st.text(
    alphabet=st.characters(blacklist_characters='"\\', blacklist_categories=("Cs",)), max_size=20
)
methods = st.sampled_from(
    ["initialize", "tools/call", "tools/list", "ping", "notifications/cancelled"]
) | st.text(max_size=10)


def split(body: bytes, cuts: list[int]) -> list[dict[str, Any]]:
    points = sorted({min(cut, len(body)) for cut in cuts})
    pieces = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    return [
        {"type": "http.request", "body": piece, "more_body": index < len(pieces) - 1}
        for index, piece in enumerate(pieces)
    ]


class Exchange:
    """One ASGI request fed from a list of messages; what the app sent back."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self._incoming = list(messages)
        self.sent: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        if self._incoming:
            return self._incoming.pop(0)
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int:
        starts = [m for m in self.sent if m["type"] == "http.response.start"]
        assert len(starts) == 1, self.sent
        status: int = starts[0]["status"]
        return status


# ------------------------------------------------------------------ serve.jsonrpc


@EXAMPLES
@given(
    body=st.one_of(
        json_values.map(lambda v: json.dumps(v).encode()),
        st.binary(max_size=200),
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=4),
)
def test_a_body_decodes_as_json_loads_would_however_it_is_chunked(
    body: bytes, cuts: list[int]
) -> None:
    exchange = Exchange(split(body, cuts))
    headers = {b"content-type": "application/json"}
    # The limit is not this test's subject (the next one's): json.dumps of a few astral-plane
    # strings escapes each to 12 bytes and can pass any small limit, so none applies here.
    ok, decoded = asyncio.run(read_json(headers, exchange.receive, exchange.send, 1 << 20))
    try:
        expected = json.loads(body)
    except (ValueError, RecursionError):
        assert not ok and exchange.status == 400
        return
    assert ok and decoded == expected and exchange.sent == []


@EXAMPLES
@given(size=st.integers(min_value=0, max_value=400), declared=st.booleans())
def test_a_body_over_the_limit_is_413_whether_or_not_its_length_was_declared(
    size: int, declared: bool
) -> None:
    body = b'"' + b"x" * size + b'"'
    headers = {b"content-type": "application/json"}
    if declared:
        headers[b"content-length"] = str(len(body))
    exchange = Exchange(split(body, [len(body) // 3, len(body) // 2]))
    ok, _ = asyncio.run(read_json(headers, exchange.receive, exchange.send, 200))
    assert ok == (len(body) <= 200)
    assert ok or exchange.status == 413


# ------------------------------------------------------------------ the legacy endpoint

CORE = AdapterCore(AdapterConfig(command=("true",), max_body_bytes=2000, auth="none"))
FRONT = HttpFront(CORE)
SESSION, _ = open_session(
    CORE.sessions, caller="a", protocol_version="2025-06-18", declared=frozenset(), now=0
)


@EXAMPLES
@given(
    message=st.one_of(
        json_values,
        st.fixed_dictionaries(
            {"jsonrpc": st.just("2.0"), "method": methods},
            optional={"id": request_ids | json_values, "params": json_values},
        ),
        st.fixed_dictionaries(
            {"jsonrpc": st.just("2.0"), "id": request_ids},
            optional={"result": json_values, "error": json_values},
        ),
    ),
    with_session=st.booleans(),
    declare_length=st.booleans(),
)
def test_the_legacy_endpoint_answers_any_post_once_and_gives_the_budget_back(
    message: Any, with_session: bool, declare_length: bool
) -> None:
    body = json.dumps(message).encode()
    headers = [
        (b"host", b"localhost"),
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
    ]
    if declare_length:
        headers.append((b"content-length", str(len(body)).encode()))
    if with_session:
        headers.append((b"mcp-session-id", SESSION.id.encode()))
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
    exchange = Exchange(split(body, [len(body) // 2]))
    asyncio.run(FRONT(scope, exchange.receive, exchange.send))
    assert exchange.status in {200, 202, 400, 404, 413, 503}
    assert FRONT.budget.in_use == 0
    assert SESSION.calls == {} and SESSION.open_requests == 0


# ------------------------------------------------------------------ what is kept and found


@EXAMPLES
@given(capabilities=json_values)
def test_only_routed_capability_names_are_kept_from_any_value(capabilities: Any) -> None:
    names = declared_capabilities(capabilities)
    known = {*ROUTED_CAPABILITIES} | {
        f"{name}.{sub}" for name, subs in ROUTED_CAPABILITIES.items() for sub in subs
    }
    assert names <= known
    assert all(name.split(".")[0] in names for name in names)


@EXAMPLES
@given(
    request_id=st.integers(min_value=0, max_value=2**53),
    result=json_values,
    padding=st.integers(min_value=0, max_value=3 * EDGE_BYTES),
    id_first=st.booleans(),
    is_error=st.booleans(),
)
def test_the_id_of_an_oversized_answer_is_found_at_either_end(
    request_id: int, result: Any, padding: int, id_first: bool, is_error: bool
) -> None:
    key = "error" if is_error else "result"
    value = json.dumps({"payload": result, "filler": "x" * padding})
    if id_first:
        line = f'{{"jsonrpc":"2.0","id":{request_id},"{key}":{value}}}\n'.encode()
    else:
        line = f'{{"{key}":{value},"jsonrpc":"2.0","id":{request_id}}}\n'.encode()
    assert response_id(line[:EDGE_BYTES], line[-EDGE_BYTES:]) == request_id


@EXAMPLES
@given(
    request_id=st.integers(min_value=0, max_value=2**53),
    params=json_values,
    id_first=st.booleans(),
)
def test_a_request_from_the_child_is_never_taken_for_an_answer(
    request_id: int, params: Any, id_first: bool
) -> None:
    body = {"method": "sampling/createMessage", "params": params}
    message = (
        {"jsonrpc": "2.0", "id": request_id, **body}
        if id_first
        else {**body, "jsonrpc": "2.0", "id": request_id}
    )
    line = json.dumps(message, separators=(",", ":")).encode()
    assert response_id(line[:EDGE_BYTES], line[-EDGE_BYTES:]) is None


@EXAMPLES
@given(head=st.binary(max_size=300), tail=st.binary(max_size=300))
def test_finding_an_id_never_fails_on_any_bytes(head: bytes, tail: bytes) -> None:
    found = response_id(head, tail)
    assert found is None or isinstance(found, int | str)


@EXAMPLES
@given(
    operations=st.lists(
        st.tuples(st.booleans(), st.integers(min_value=0, max_value=500)), max_size=40
    )
)
def test_the_byte_budget_never_goes_over_its_limit_or_below_zero(
    operations: list[tuple[bool, int]],
) -> None:
    budget = BodyBudget(limit_bytes=1000, max_body_bytes=500)
    held: list[int] = []
    for take, size in operations:
        if take and budget.reserve(size):
            held.append(size)
        elif not take and held:
            budget.release(held.pop())
        assert 0 <= budget.in_use <= 1000 and budget.in_use == sum(held)
