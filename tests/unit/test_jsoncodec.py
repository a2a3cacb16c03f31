"""The wire's JSON codec: orjson's speed, and nothing a peer sends read or written otherwise
than the standard library would (net/jsoncodec.py)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_operator.net import jsoncodec

MESSAGE = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "tools/call",
    "params": {"name": "ev_echo", "arguments": {"message": "héllo ✓ \u2028 \n"}, "_meta": {}},
}


def test_a_message_is_compact_utf8_in_key_order() -> None:
    encoded = jsoncodec.dumps(MESSAGE)
    assert encoded == json.dumps(MESSAGE, separators=(",", ":"), ensure_ascii=False).encode()
    assert jsoncodec.loads(encoded) == MESSAGE
    assert jsoncodec.loads(encoded.decode()) == MESSAGE
    assert jsoncodec.loads(memoryview(encoded)) == MESSAGE


@pytest.mark.parametrize(
    "number", [2**63 - 1, 2**63, 2**64, 2**70, -(2**70), 10**30, 1234567890123456789]
)
def test_integers_of_any_size_keep_every_digit(number: int) -> None:
    text = f'{{"id":{number},"v":[{number}]}}'
    decoded = jsoncodec.loads(text.encode())
    assert decoded == {"id": number, "v": [number]}
    assert type(decoded["id"]) is int
    assert jsoncodec.dumps(decoded) == text.encode()


def test_a_long_run_of_digits_in_a_text_is_only_slower() -> None:
    assert jsoncodec.loads(b'{"t":"12345678901234567890","n":1.5}') == {
        "t": "12345678901234567890",
        "n": 1.5,
    }


def test_what_only_the_standard_library_reads_is_still_read() -> None:
    decoded = jsoncodec.loads(b'{"a":NaN,"b":Infinity,"c":"\\ud800x"}')
    assert math.isnan(decoded["a"]) and decoded["b"] == math.inf
    assert decoded["c"] == "\ud800x"


def test_a_lone_surrogate_is_written_escaped() -> None:
    encoded = jsoncodec.dumps({"c": "\ud800x", "d": "é"})
    assert encoded == b'{"c":"\\ud800x","d":"\\u00e9"}'
    assert json.loads(encoded) == {"c": "\ud800x", "d": "é"}


def test_keys_that_are_not_texts_are_written_as_the_standard_library_does() -> None:
    assert jsoncodec.dumps({1: "a", 2: "b"}) == b'{"1":"a","2":"b"}'


def test_deep_nesting_is_written_and_read_within_the_standard_librarys_reach() -> None:
    nested: list[object] = []
    for _ in range(300):  # beyond orjson's 255 levels, within the standard library's
        nested = [nested]
    encoded = jsoncodec.dumps(nested)
    assert encoded == b"[" * 301 + b"]" * 301
    assert jsoncodec.loads(encoded) == nested


def test_nesting_beyond_reach_is_a_value_error_not_a_recursion_error() -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        jsoncodec.loads(b"[" * 200_000 + b"]" * 200_000)


@pytest.mark.parametrize("garbage", [b"", b"{", b"\xff\xfe", b"[1,]", b'{"a":1}x', b"nul"])
def test_what_is_not_json_is_a_value_error(garbage: bytes) -> None:
    with pytest.raises(ValueError):
        jsoncodec.loads(garbage)


def test_a_non_finite_float_is_written_as_null() -> None:
    assert jsoncodec.dumps({"a": math.nan, "b": -math.inf}) == b'{"a":null,"b":null}'


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=30,
)


@given(json_values)
def test_anything_json_reads_back_as_the_standard_library_reads_it(value: object) -> None:
    encoded = jsoncodec.dumps(value)
    assert jsoncodec.loads(encoded) == json.loads(encoded)
    assert jsoncodec.loads(encoded) == json.loads(json.dumps(value))


@pytest.mark.parametrize(
    "record",
    [
        {"tool": "ev_echo", "durationMs": 0.123, "pii": {}, "run": "ns/run"},
        {"tool": "héllo ✓", "caller": {"sub": "\u2028"}},
        {"big": 2**70, "nested": [[[]]]},
        {"lone": "\ud800"},
    ],
)
def test_an_audit_line_is_the_standard_librarys_ascii_line(record: dict[str, object]) -> None:
    line = jsoncodec.ascii_line(record)
    assert line == json.dumps(record, separators=(",", ":")) + "\n"
    assert line.isascii() and line.count("\n") == 1
