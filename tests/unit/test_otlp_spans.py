"""Light spans (otlp/spans.py): the same spans on the wire as the SDK's, sampled alike.

Each span is compared with the SDK's for the same input, byte for byte once encoded (the
OTLP ``Span`` message the collector receives).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry import context as context_api
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider, sampling
from opentelemetry.sdk.trace.id_generator import IdGenerator

from mcp_operator.otlp import encode
from mcp_operator.otlp.spans import LightSpan, LightTracerProvider

RESOURCE = Resource.create({"service.name": "test"})
TRACE_ID, SPAN_ID = 0x0AF7651916CD43DD8448EB211C80319C, 0x00F067AA0BA902B7
REMOTE = trace.SpanContext(
    TRACE_ID,
    SPAN_ID,
    is_remote=True,
    trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
    trace_state=trace.TraceState([("vendor", "value")]),
)


class Keep(SpanProcessor):
    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.shut = False

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)

    def shutdown(self) -> None:
        self.shut = True


class Fixed(IdGenerator):
    """The SDK's ids made the ones a light span drew."""

    def __init__(self, trace_id: int, span_id: int) -> None:
        self.trace_id, self.span_id = trace_id, span_id

    def generate_trace_id(self) -> int:
        return self.trace_id

    def generate_span_id(self) -> int:
        return self.span_id


def light(sampler: sampling.Sampler | None = None) -> tuple[Any, Keep]:
    keep = Keep()
    provider = LightTracerProvider(
        RESOURCE, keep, sampler or sampling.ParentBased(sampling.ALWAYS_ON)
    )
    return provider.get_tracer("mcp_operator", "1.0"), keep


def both_ways(
    parent: context_api.Context | None, links: Sequence[trace.Link], fail: bool
) -> tuple[bytes, bytes]:
    """One span made by the light tracer and by the SDK's, encoded."""
    attributes = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "ev_echo", "n": 3}
    tracer, keep = light()
    span = tracer.start_span(
        "tools/call ev_echo", parent, trace.SpanKind.SERVER, attributes, links, start_time=1000
    )
    span.set_attribute("jsonrpc.request.id", "7")
    if fail:
        span.set_attribute("error.type", "tool_error")
        span.set_status(trace.Status(trace.StatusCode.ERROR))
    span.end(2000)
    (ours,) = keep.spans
    context = ours.context
    sdk_keep = Keep()
    provider = TracerProvider(
        resource=RESOURCE, id_generator=Fixed(context.trace_id, context.span_id)
    )
    provider.add_span_processor(sdk_keep)
    sdk_span = provider.get_tracer("mcp_operator", "1.0").start_span(
        "tools/call ev_echo", parent, trace.SpanKind.SERVER, attributes, links, start_time=1000
    )
    sdk_span.set_attribute("jsonrpc.request.id", "7")
    if fail:
        sdk_span.set_attribute("error.type", "tool_error")
        sdk_span.set_status(trace.Status(trace.StatusCode.ERROR))
    sdk_span.end(2000)
    (theirs,) = sdk_keep.spans
    assert ours.resource is theirs.resource
    assert ours.instrumentation_scope == theirs.instrumentation_scope
    return encode.span(ours), encode.span(theirs)


def test_a_root_span_is_on_the_wire_as_the_sdks() -> None:
    ours, theirs = both_ways(None, (), fail=False)
    assert ours == theirs


def test_a_failed_child_of_a_remote_parent_with_a_link_is_on_the_wire_as_the_sdks() -> None:
    parent = trace.set_span_in_context(trace.NonRecordingSpan(REMOTE))
    header = trace.SpanContext(0x1234, 0x5678, is_remote=True)
    link = trace.Link(header, {"why": "header"})
    ours, theirs = both_ways(parent, [link], fail=True)
    assert ours == theirs


def test_a_child_keeps_its_parents_trace_and_state_and_names_it() -> None:
    tracer, _ = light()
    span = tracer.start_span("child", trace.set_span_in_context(trace.NonRecordingSpan(REMOTE)))
    assert isinstance(span, LightSpan)
    assert span.context.trace_id == TRACE_ID and span.context.span_id != SPAN_ID
    assert span.parent == REMOTE and span.parent is not None and span.parent.is_remote
    assert span.context.trace_state == REMOTE.trace_state


def test_a_parent_not_sampled_makes_a_child_that_records_nothing_but_carries_the_trace() -> None:
    unsampled = trace.SpanContext(TRACE_ID, SPAN_ID, is_remote=True)  # flags: not sampled
    tracer, keep = light()
    span = tracer.start_span("child", trace.set_span_in_context(trace.NonRecordingSpan(unsampled)))
    span.end()
    assert not span.is_recording() and not keep.spans
    assert span.get_span_context().trace_id == TRACE_ID
    assert not span.get_span_context().trace_flags.sampled


def test_the_ratio_sampler_is_asked_and_obeyed() -> None:
    never, kept_never = light(sampling.ParentBased(sampling.TraceIdRatioBased(0.0)))
    always, kept_always = light(sampling.ParentBased(sampling.TraceIdRatioBased(1.0)))
    for _ in range(20):
        never.start_span("root").end()
        always.start_span("root").end()
    assert not kept_never.spans
    assert len(kept_always.spans) == 20
    assert len({span.context.trace_id for span in kept_always.spans}) == 20  # a trace each


@pytest.mark.parametrize("made", ["by hand", "from the environment"])
def test_the_inline_ratio_decides_each_root_as_the_sdks_sampler_does(
    made: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if made == "by hand":
        ratio = sampling.ParentBased(sampling.TraceIdRatioBased(0.3))
    else:  # what OTEL_TRACES_SAMPLER (and a run's samplePercent) gives: its own subclass
        monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
        monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.3")
        ratio = sampling._get_from_env_or_default()
        assert type(ratio) is sampling.ParentBasedTraceIdRatio
    tracer, keep = light(ratio)
    assert tracer._root_bound is not None  # decided inline, not by asking the sampler
    started = [tracer.start_span("root") for _ in range(2000)]
    for span in started:
        span.end()
        context = span.get_span_context()
        sdk = ratio.should_sample(None, context.trace_id, "root").decision.is_sampled()  # type: ignore[no-untyped-call]
        assert context.trace_flags.sampled == sdk
        assert isinstance(span, LightSpan) == sdk
    assert 400 < len(keep.spans) < 800  # about 30 % of 2,000


def test_a_sampler_of_its_own_is_asked() -> None:
    class Odd(sampling.Sampler):
        def should_sample(self, parent_context: Any, trace_id: int, *args: Any, **kw: Any) -> Any:
            decision = (
                sampling.Decision.RECORD_AND_SAMPLE if trace_id % 2 else sampling.Decision.DROP
            )
            return sampling.SamplingResult(decision, {"asked": True})

        def get_description(self) -> str:
            return "odd"

    tracer, keep = light(Odd())
    assert tracer._root_bound is None
    for _ in range(50):
        tracer.start_span("root").end()
    assert keep.spans and all(span.context.trace_id % 2 for span in keep.spans)
    assert all(span.attributes == {"asked": True} for span in keep.spans)


def test_a_span_current_in_start_as_current_span_is_the_parent_of_those_started_in_it() -> None:
    tracer, keep = light()
    with tracer.start_as_current_span("outer") as outer:
        tracer.start_span("inner").end()
    inner, finished_outer = keep.spans
    assert finished_outer is outer
    assert inner.parent == outer.get_span_context() and not inner.parent.is_remote
    assert trace.get_current_span() is trace.INVALID_SPAN  # detached again


def test_an_ended_span_is_handed_on_once_and_changes_no_more() -> None:
    tracer, keep = light()
    span = tracer.start_span("once", attributes={"kept": "yes", "dropped": None})
    span.set_status(trace.Status(trace.StatusCode.OK))
    span.set_status(trace.Status(trace.StatusCode.ERROR))  # OK is final
    span.end()
    span.end()
    span.set_attribute("late", 1)
    span.add_event("late")
    assert keep.spans == [span]
    assert span.attributes == {"kept": "yes"}
    assert span.status.status_code is trace.StatusCode.OK
    assert not span.events


def test_an_exception_is_recorded_as_the_conventions_event() -> None:
    tracer, keep = light()
    span = tracer.start_span("failing")
    try:
        raise ValueError("no such tool")
    except ValueError as error:
        span.record_exception(error)
    span.end()
    (event,) = keep.spans[0].events
    assert event.name == "exception"
    assert event.attributes["exception.type"] == "ValueError"
    assert event.attributes["exception.message"] == "no such tool"
    assert "raise ValueError" in event.attributes["exception.stacktrace"]
    assert encode.span(keep.spans[0])  # events encode too


def test_the_provider_shuts_its_processor_down() -> None:
    keep = Keep()
    LightTracerProvider(RESOURCE, keep).shutdown()
    assert keep.shut
