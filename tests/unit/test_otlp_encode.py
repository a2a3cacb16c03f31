"""mcp_operator.otlp.encode: the bytes it writes for the SDK's spans parse, with the official
OTLP messages, into exactly what the SDK's own encoder makes of the same spans."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
    set_span_in_context,
)

from mcp_operator.otlp import encode

REMOTE = SpanContext(
    0x0AF7651916CD43DD8448EB211C80319C,
    0xB7AD6B7169203331,
    is_remote=True,
    trace_flags=TraceFlags(TraceFlags.SAMPLED),
    trace_state=TraceState([("vendor", "v1"), ("other", "x")]),
)
LINKED = SpanContext(0x1 << 100 | 7, 0xFFFFFFFFFFFFFFFF, is_remote=True)


def _ours(spans: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
    body = encode.request([(s.resource, s.instrumentation_scope, encode.span(s)) for s in spans])
    return ExportTraceServiceRequest.FromString(body)


def _spans(limits: SpanLimits | None = None, service: str = "svc") -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    resource = Resource.create(
        {"service.name": service, "k8s.namespace.name": "ns", "replicas": 3}, "https://schema/1"
    )
    provider = TracerProvider(resource=resource, span_limits=limits)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    ours = provider.get_tracer("mcp_operator", "1.2.3", schema_url="https://schema/s")
    other = provider.get_tracer("another", attributes={"scope.attr": True})
    parent = set_span_in_context(NonRecordingSpan(REMOTE))
    server = ours.start_span(
        "tools/call echo",
        context=parent,
        kind=SpanKind.SERVER,
        attributes={
            "mcp.method.name": "tools/call",
            "jsonrpc.request.id": "5",
            "count": -3,
            "big": 2**62,
            "ratio": 0.25,
            "ok": False,
            "yes": True,
            "empty": "",
            "long": "é" * 200,
            "names": ["a", "b"],
            "numbers": (1, -2, 3),
            "flags": [True, False],
            "doubles": [1.5],
        },
        links=[Link(LINKED, {"link.kind": "header"}), Link(REMOTE)],
    )
    with ours.start_as_current_span("tools/call x", context=set_span_in_context(server)) as child:
        child.add_event("retry", {"attempt": 2})
        child.add_event("nothing")
        child.set_status(Status(StatusCode.ERROR, "upstream failed"))
    server.set_status(StatusCode.OK)
    server.end()
    with other.start_as_current_span("", kind=SpanKind.CONSUMER) as span:
        span.set_attribute("error.type", "tool_error")
    for kind in (SpanKind.INTERNAL, SpanKind.CLIENT, SpanKind.PRODUCER):
        ours.start_span(f"kind {kind.name}", kind=kind).end()
    return list(exporter.get_finished_spans())


def test_our_bytes_decode_to_what_the_sdk_encoder_makes_of_the_same_spans() -> None:
    spans = _spans()
    assert len(spans) == 6
    ours, theirs = _ours(spans), encode_spans(spans)
    assert ours == theirs
    # The same bytes, too, once both are serialized in one canonical order.
    assert ours.SerializeToString(deterministic=True) == theirs.SerializeToString(
        deterministic=True
    )
    # Two scopes under one resource, as the SDK groups them.
    (resource_spans,) = ours.resource_spans
    assert [s.scope.name for s in resource_spans.scope_spans] == ["mcp_operator", "another"]


def test_dropped_attributes_events_and_links_are_counted_as_the_sdk_counts_them() -> None:
    limits = SpanLimits(max_span_attributes=2, max_events=1, max_links=1, max_event_attributes=0)
    spans = _spans(limits)
    ours = _ours(spans)
    assert ours == encode_spans(spans)
    server = next(s for s in ours.resource_spans[0].scope_spans[0].spans if s.kind == 2)
    assert server.dropped_attributes_count == 11 and server.dropped_links_count == 1


def test_spans_of_two_resources_in_one_batch_go_under_each_their_own() -> None:
    first, second = _spans(), _spans(service="svc2")
    mixed = [span for pair in zip(first, second, strict=True) for span in pair]
    assert _ours(mixed) == encode_spans(mixed)
    assert _ours(second) == encode_spans(second)  # the first's cached resource is not reused


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (-1, b"\xff" * 9 + b"\x01"),
        (2**63 - 1, b"\xff" * 8 + b"\x7f"),
    ],
)
def test_varints_are_protobufs(value: int, wire: bytes) -> None:
    assert encode.varint(value) == wire


def test_an_attribute_value_otlp_cannot_carry_is_refused() -> None:
    with pytest.raises(TypeError):
        encode.key_value("x", object())
