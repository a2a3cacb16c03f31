"""JSON on the wire: the one encoder and decoder of the messages our processes send and read.

Owns how an MCP message (a JSON-RPC request, answer or notification, on HTTP or a child's
stdio) becomes bytes and back: compact, UTF-8, keys in their order. orjson does the work
(about 10x the standard library's speed on an MCP message: 0.25 against 3.4 µs to encode, 0.5
against 3.4 µs to decode); the standard library takes over wherever orjson would refuse a
message or read it differently, so that nothing a peer sends is changed on its way through:

- an integer of 19 digits or more (orjson reads one beyond 64 bits as a float, losing
  digits; a text that merely holds such a run of digits takes the slower path, nothing else);
- what orjson refuses to read: ``NaN`` and ``Infinity`` (not JSON, but the standard library
  has always read them), escaped lone surrogates, nesting deeper than 1,024, non-UTF-8 input;
- what orjson refuses to write: integers beyond 64 bits, texts holding a lone surrogate
  (written with ``\\u`` escapes: UTF-8 cannot carry them), keys that are not texts, nesting
  deeper than 255.

One difference stays, on purpose: a non-finite float (``NaN`` or an infinity, which only a
peer breaking JSON can have sent) is written as ``null``, which any JSON reader can parse, where
the standard library wrote ``NaN``, which most cannot.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

_LONG_INTEGER_BYTES = re.compile(rb"\d{19}")
_LONG_INTEGER_TEXT = re.compile(r"\d{19}")
"""A run of digits that may be an integer orjson cannot read exactly (beyond 18 digits)."""


class TooDeep(ValueError):
    """A JSON document nested too deeply to be read."""


def dumps(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError: one of the cases the standard library takes
        pass
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError:  # a lone surrogate: JSON can carry it, UTF-8 cannot
        return json.dumps(value, separators=(",", ":")).encode()


def ascii_line(value: Any) -> str:
    """``value`` as one newline-terminated line of compact JSON in ASCII only (non-ASCII text
    ``\\u``-escaped, as the standard library writes it), whatever the encoding of the sink
    it goes to: an audit line."""
    try:
        line = orjson.dumps(value, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        pass
    else:
        if line.isascii():
            return line.decode("ascii")
    return json.dumps(value, separators=(",", ":")) + "\n"


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """The value of one JSON document.

    Raises:
        ValueError: not JSON (``json.JSONDecodeError``; ``UnicodeDecodeError`` for bytes that
            are not text; :class:`TooDeep` for nesting beyond the standard library's reach,
            which would otherwise escape as a ``RecursionError`` past every ``except
            ValueError`` of a reader).
    """
    if isinstance(data, memoryview):
        data = bytes(data)
    pattern = _LONG_INTEGER_TEXT if isinstance(data, str) else _LONG_INTEGER_BYTES
    if pattern.search(data) is None:  # type: ignore[arg-type]
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    try:
        return json.loads(data)
    except RecursionError:
        raise TooDeep("the JSON is nested too deeply to be read") from None
