"""The OpenTelemetry SDK's finished spans as OTLP protobuf bytes, written directly.

Owns the wire form of ``opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest``
for what the SDK's ``ReadableSpan`` holds: resource, instrumentation scope, and per span the
ids, trace state, parent, name, kind, times, attributes (str, bool, int, float, bytes, and
sequences and mappings of them), events, links, status and the dropped counts. The content is
the SDK's own OTLP encoder's (tests/unit/test_otlp_encode.py parses both with the official
messages and compares), without building a message object per span and attribute: a span is
a few byte strings joined, and the parts that repeat (an attribute's key and value, a
resource, a scope) are encoded once.

Protobuf in brief: a field is a tag (``field number << 3 | wire type``, a varint) and its
value: a varint (wire type 0), 8 little-endian bytes (1), a varint length and that many bytes
(2: strings, bytes, nested messages), or 4 little-endian bytes (5).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from opentelemetry.trace import SpanKind, StatusCode

_DOUBLE: Final = struct.Struct("<d").pack
_FIXED64: Final = struct.Struct("<Q").pack
_FIXED32: Final = struct.Struct("<I").pack
_ONE_BYTE: Final = [bytes((value,)) for value in range(0x80)]
_UINT64: Final = 1 << 64

# Tags, by message (field number, wire type).
_KV_KEY, _KV_VALUE = b"\x0a", b"\x12"  # KeyValue: key 1, value 2
_ANY_STRING, _ANY_INT, _ANY_DOUBLE = b"\x0a", b"\x18", b"\x21"  # AnyValue: 1, 3, 4
_ANY_TRUE, _ANY_FALSE = b"\x10\x01", b"\x10\x00"  # AnyValue: bool 2
_ANY_ARRAY, _ANY_KVLIST, _ANY_BYTES = b"\x2a", b"\x32", b"\x3a"  # AnyValue: 5, 6, 7
_VALUES = b"\x0a"  # ArrayValue.values 1, KeyValueList.values 1
_SPAN_IDS = b"\x0a\x10"  # Span.trace_id 1 (16 bytes); Span.span_id 2 (8 bytes) follows
_SPAN_ID = b"\x12\x08"
_SPAN_TRACE_STATE, _SPAN_PARENT, _SPAN_NAME = b"\x1a", b"\x22\x08", b"\x2a"  # 3, 4, 5
_SPAN_KIND, _SPAN_START, _SPAN_END = b"\x30", b"\x39", b"\x41"  # 6, 7, 8
_SPAN_ATTRIBUTE, _SPAN_DROPPED_ATTRIBUTES = b"\x4a", b"\x50"  # 9, 10
_SPAN_EVENT, _SPAN_DROPPED_EVENTS = b"\x5a", b"\x60"  # 11, 12
_SPAN_LINK, _SPAN_DROPPED_LINKS = b"\x6a", b"\x70"  # 13, 14
_SPAN_STATUS, _SPAN_FLAGS = b"\x7a", b"\x85\x01"  # 15, 16 (fixed32)
_EVENT_TIME, _EVENT_NAME, _EVENT_ATTRIBUTE, _EVENT_DROPPED = b"\x09", b"\x12", b"\x1a", b"\x20"
_LINK_ATTRIBUTE, _LINK_DROPPED, _LINK_FLAGS = b"\x22", b"\x28", b"\x35"  # Link: 4, 5, 6
_STATUS_MESSAGE, _STATUS_CODE = b"\x12", b"\x18"  # Status: message 2, code 3
_REQUEST_RESOURCE_SPANS = b"\x0a"  # ExportTraceServiceRequest.resource_spans 1
_RESOURCE, _SCOPE_SPANS, _SCHEMA_URL = b"\x0a", b"\x12", b"\x1a"  # ResourceSpans: 1, 2, 3
_RESOURCE_ATTRIBUTE = b"\x0a"  # Resource.attributes 1
_SCOPE, _SCOPE_SPAN = b"\x0a", b"\x12"  # ScopeSpans: scope 1, spans 2 (schema_url 3)
_SCOPE_NAME, _SCOPE_VERSION, _SCOPE_ATTRIBUTE = b"\x0a", b"\x12", b"\x1a"  # Scope: 1, 2, 3

_HAS_IS_REMOTE: Final = 0x100  # SpanFlags: the is-remote bit below is known
_IS_REMOTE: Final = 0x200

_FLAGS_LOCAL: Final = _SPAN_FLAGS + _FIXED32(_HAS_IS_REMOTE)
_FLAGS_REMOTE: Final = _SPAN_FLAGS + _FIXED32(_HAS_IS_REMOTE | _IS_REMOTE)
"""A span's ``flags`` field as the SDK writes it: whether its parent is remote."""

_KINDS: Final = {kind: _SPAN_KIND + _ONE_BYTE[kind.value + 1] for kind in SpanKind}
"""A span's ``kind`` field (the API's kinds count from 0, OTLP's from 1: 0 is unspecified)."""
_STATUSES: Final = {
    code: _SPAN_STATUS
    + (_ONE_BYTE[2] + _STATUS_CODE + _ONE_BYTE[code.value] if code.value else b"\x00")
    for code in StatusCode
}
"""A span's ``status`` field when it has no description."""

_FIELDS: dict[bytes, dict[tuple[str, str], bytes]] = {}
_FIELDS_MAX: Final = 4096
"""Encoded string attributes by field tag, then (key, value): the attributes that repeat (the
method name, the tool, the server) are encoded once. Emptied when full, so that values that
never repeat (request ids) cost an insert each and no growth."""

_RESOURCES: dict[int, tuple[Any, bytes]] = {}
"""Encoded resources by ``id`` (the resource kept with it, so that the id stays its own): a
tracer provider has one."""


def varint(value: int) -> bytes:
    """``value`` as a protobuf varint (a negative int64 as its 64-bit two's complement)."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    if value < 0:
        value += _UINT64
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _delimited(tag: bytes, payload: bytes) -> bytes:
    size = len(payload)
    return tag + (_ONE_BYTE[size] if size < 0x80 else varint(size)) + payload


def _any_value(value: Any) -> bytes:
    """An ``AnyValue`` message (its body)."""
    if isinstance(value, str):
        return _delimited(_ANY_STRING, value.encode())
    if isinstance(value, bool):
        return _ANY_TRUE if value else _ANY_FALSE
    if isinstance(value, int):
        return _ANY_INT + varint(value)
    if isinstance(value, float):
        return _ANY_DOUBLE + _DOUBLE(value)
    if isinstance(value, bytes):
        return _delimited(_ANY_BYTES, value)
    if value is None:
        return b""
    if isinstance(value, Mapping):
        pairs = b"".join(_delimited(_VALUES, key_value(str(k), v)) for k, v in value.items())
        return _delimited(_ANY_KVLIST, pairs)
    if isinstance(value, Sequence):
        values = b"".join(_delimited(_VALUES, _any_value(item)) for item in value)
        return _delimited(_ANY_ARRAY, values)
    raise TypeError(f"an attribute value cannot be a {type(value).__name__}")


def key_value(key: str, value: Any) -> bytes:
    """A ``KeyValue`` message (its body)."""
    return _delimited(_KV_KEY, key.encode()) + _delimited(_KV_VALUE, _any_value(value))


def _attribute(tag: bytes, key: str, value: Any) -> bytes:
    """An attribute as the field ``tag`` of its message; a string one from the cache when it
    repeats."""
    if type(value) is not str:
        return _delimited(tag, key_value(key, value))
    cache = _FIELDS.get(tag)
    if cache is None:
        _FIELDS[tag] = cache = {}
    found = cache.get((key, value))
    if found is None:
        if len(cache) >= _FIELDS_MAX:
            cache.clear()
        cache[key, value] = found = _delimited(tag, key_value(key, value))
    return found


def _attributes(tag: bytes, attributes: Mapping[str, Any] | None) -> list[bytes]:
    if not attributes:
        return []
    return [_attribute(tag, key, value) for key, value in attributes.items()]


def _trace_state(context: Any) -> bytes:
    state = context.trace_state
    if not state:
        return b""
    return _delimited(
        _SPAN_TRACE_STATE, ",".join(f"{key}={value}" for key, value in state.items()).encode()
    )


def _ids(context: Any) -> list[bytes]:
    """The trace and span id fields of a span or a link (the same field numbers in both)."""
    return [
        _SPAN_IDS,
        context.trace_id.to_bytes(16, "big"),
        _SPAN_ID,
        context.span_id.to_bytes(8, "big"),
    ]


def span(readable: Any) -> bytes:
    """The OTLP ``Span`` message (its body) of one finished SDK span (``ReadableSpan``)."""
    context = readable.context
    parent = readable.parent
    parts = _ids(context)
    if context.trace_state:
        parts.append(_trace_state(context))
    if parent is not None:
        parts += (_SPAN_PARENT, parent.span_id.to_bytes(8, "big"))
    name = readable.name
    if name:
        parts.append(_delimited(_SPAN_NAME, name.encode()))
    parts.append(_KINDS[readable.kind])
    start, end = readable.start_time, readable.end_time
    if start:
        parts += (_SPAN_START, _FIXED64(start))
    if end:
        parts += (_SPAN_END, _FIXED64(end))
    attributes = readable.attributes
    if attributes:
        parts += [_attribute(_SPAN_ATTRIBUTE, key, value) for key, value in attributes.items()]
    if readable.dropped_attributes:
        parts += (_SPAN_DROPPED_ATTRIBUTES, varint(readable.dropped_attributes))
    events = readable.events
    if events:
        parts += [_delimited(_SPAN_EVENT, _event(event)) for event in events]
        if readable.dropped_events:
            parts += (_SPAN_DROPPED_EVENTS, varint(readable.dropped_events))
    links = readable.links
    if links:
        parts += [_delimited(_SPAN_LINK, _link(link)) for link in links]
    if readable.dropped_links:
        parts += (_SPAN_DROPPED_LINKS, varint(readable.dropped_links))
    status = readable.status
    if status is not None:
        plain = None if status.description else _STATUSES.get(status.status_code)
        parts.append(plain or _delimited(_SPAN_STATUS, _status(status)))
    parts.append(_FLAGS_REMOTE if parent is not None and parent.is_remote else _FLAGS_LOCAL)
    return b"".join(parts)


def _event(event: Any) -> bytes:
    parts = [_EVENT_TIME, _FIXED64(event.timestamp)] if event.timestamp else []
    if event.name:
        parts.append(_delimited(_EVENT_NAME, event.name.encode()))
    parts += _attributes(_EVENT_ATTRIBUTE, event.attributes)
    if event.dropped_attributes:
        parts += (_EVENT_DROPPED, varint(event.dropped_attributes))
    return b"".join(parts)


def _link(link: Any) -> bytes:
    context = link.context
    parts = [*_ids(context), *_attributes(_LINK_ATTRIBUTE, link.attributes)]
    if link.dropped_attributes:
        parts += (_LINK_DROPPED, varint(link.dropped_attributes))
    parts += (
        _LINK_FLAGS,
        _FIXED32(_HAS_IS_REMOTE | _IS_REMOTE if context.is_remote else _HAS_IS_REMOTE),
    )
    return b"".join(parts)


def _status(status: Any) -> bytes:
    parts = []
    if status.description:
        parts.append(_delimited(_STATUS_MESSAGE, status.description.encode()))
    code = status.status_code.value
    if code:
        parts += (_STATUS_CODE, _ONE_BYTE[code])
    return b"".join(parts)


def _resource(resource: Any) -> bytes:
    """The ``resource`` field of a ``ResourceSpans``, encoded once per resource."""
    found = _RESOURCES.get(id(resource))
    if found is not None and found[0] is resource:
        return found[1]
    encoded = _delimited(_RESOURCE, b"".join(_attributes(_RESOURCE_ATTRIBUTE, resource.attributes)))
    if len(_RESOURCES) >= 64:
        _RESOURCES.clear()
    _RESOURCES[id(resource)] = (resource, encoded)
    return encoded


def _scope(scope: Any) -> bytes:
    if scope is None:
        return _delimited(_SCOPE, b"")
    parts = []
    if scope.name:
        parts.append(_delimited(_SCOPE_NAME, scope.name.encode()))
    if scope.version:
        parts.append(_delimited(_SCOPE_VERSION, scope.version.encode()))
    parts += _attributes(_SCOPE_ATTRIBUTE, scope.attributes)
    return _delimited(_SCOPE, b"".join(parts))


def request(spans: Iterable[tuple[Any, Any, bytes]]) -> bytes:
    """An ``ExportTraceServiceRequest`` of encoded spans, each with its resource and
    instrumentation scope: one ``ResourceSpans`` per resource, one ``ScopeSpans`` per scope in
    it, in the order they came (the SDK's encoder groups them the same way)."""
    resources: dict[int, tuple[Any, dict[int, tuple[Any, list[bytes]]]]] = {}
    for resource, scope, encoded in spans:
        entry = resources.get(id(resource))
        if entry is None:
            resources[id(resource)] = entry = (resource, {})
        group = entry[1].get(id(scope))
        if group is None:
            entry[1][id(scope)] = group = (scope, [])
        group[1].append(_delimited(_SCOPE_SPAN, encoded))
    out = []
    for resource, scopes in resources.values():
        parts = [_resource(resource)]
        for scope, encoded_spans in scopes.values():
            scope_spans = [_scope(scope), *encoded_spans]
            schema = getattr(scope, "schema_url", None)
            if schema:
                scope_spans.append(_delimited(_SCHEMA_URL, schema.encode()))
            parts.append(_delimited(_SCOPE_SPANS, b"".join(scope_spans)))
        if resource.schema_url:
            parts.append(_delimited(_SCHEMA_URL, resource.schema_url.encode()))
        out.append(_delimited(_REQUEST_RESOURCE_SPANS, b"".join(parts)))
    return b"".join(out)
