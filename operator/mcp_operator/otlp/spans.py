"""Light spans: the spans our processes make when they export traces over OTLP.

Owns a tracer provider (:class:`LightTracerProvider`) whose spans are the OpenTelemetry
API's spans (:class:`opentelemetry.trace.Span`: the API's context holds them and its
propagation reads them like any other) without the SDK's per-span machinery, which costs
more than the request a bridge forwards (bench/span_cost.py): no lock per span, no
validation and bounding of each attribute (ours are few, typed and set by our code,
:mod:`mcp_operator.tracing`), no chain of processors, and the usual samplers decided
inline. A finished span goes straight to its one processor, the
:class:`~mcp_operator.otlp.export.OtlpSpanProcessor` (encoded as it ends); one not sampled
is the API's ``NonRecordingSpan``, which records and exports nothing but carries its
context on.

What is the same as the SDK's: the ids (random, 128 and 64 bits), the sampler
(``OTEL_TRACES_SAMPLER`` and its argument, the SDK's own samplers), the parent (the
context's span, remote or local), the resource and instrumentation scope of every span,
nanosecond times, the status rules (an ``OK`` status is final), events
(``add_event``, ``record_exception``) and the processor's shutdown at exit. What is not: span
limits (an attribute of ``None`` is dropped, others are kept as given), and
``start_as_current_span`` neither records the exception nor sets the status on its own
(:func:`mcp_operator.tracing.internal`, its only user, sets ``error.type`` and the status).
"""

from __future__ import annotations

import atexit
import contextlib
import random
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from opentelemetry import context as context_api
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, SpanProcessor, sampling
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

_SAMPLED: Final = trace.TraceFlags(trace.TraceFlags.SAMPLED)
_NOT_SAMPLED: Final = trace.TraceFlags(trace.TraceFlags.DEFAULT)
_UNSET: Final = trace.Status(trace.StatusCode.UNSET)
_EMPTY_STATE: Final = trace.TraceState()
_SAMPLED_DECISIONS: Final = (sampling.Decision.RECORD_AND_SAMPLE,)


_LOW_64: Final = (1 << 64) - 1


_PARENT_BASED: Final = (sampling.ParentBased, sampling.ParentBasedTraceIdRatio)
"""The parent-based samplers, as made by hand and as ``OTEL_TRACES_SAMPLER`` makes
``parentbased_traceidratio`` (a subclass that only builds its root sampler)."""


def _inline_root_bound(sampler: sampling.Sampler) -> int | None:
    """The bound a root span's trace id (its low 64 bits) must be under to be sampled, when
    ``sampler`` is ``parentbased_always_on`` (the default) or ``parentbased_traceidratio``: a
    child follows its parent's flag, a root is sampled by its id as the SDK's ratio sampler
    does. Those decisions are made inline (the SDK's cost a ``SamplingResult`` per span, even
    one not sampled); ``None`` for any other sampler, which is asked."""
    if type(sampler) not in _PARENT_BASED or not isinstance(sampler, sampling.ParentBased):
        return None
    follows_parent = (
        sampler._remote_parent_sampled is sampling.ALWAYS_ON
        and sampler._local_parent_sampled is sampling.ALWAYS_ON
        and sampler._remote_parent_not_sampled is sampling.ALWAYS_OFF
        and sampler._local_parent_not_sampled is sampling.ALWAYS_OFF
    )
    root = sampler._root
    if not follows_parent:
        return None
    if root is sampling.ALWAYS_ON:
        return _LOW_64 + 1
    if type(root) is sampling.TraceIdRatioBased:
        return root.bound
    return None


class LightSpan(trace.Span):
    """A sampled span, recording until it ends; then handed to the processor once."""

    events: list[Event] | tuple[()]
    dropped_attributes: Final = 0
    dropped_events: Final = 0
    dropped_links: Final = 0

    def __init__(
        self,
        tracer: LightTracer,
        name: str,
        span_context: trace.SpanContext,
        parent: trace.SpanContext | None,
        kind: trace.SpanKind,
        attributes: Mapping[str, Any] | None,
        links: Sequence[trace.Link],
        start_time: int | None,
    ) -> None:
        self.name = name
        self.context = span_context
        self.parent = parent
        self.kind = kind
        self.attributes: dict[str, Any] = (
            {key: value for key, value in attributes.items() if value is not None}
            if attributes
            else {}
        )
        self.links = tuple(links) if links else ()
        self.events = ()
        self.status = _UNSET
        self.resource = tracer.resource
        self.instrumentation_scope = tracer.scope
        self._processor = tracer.processor
        self.start_time = start_time if start_time is not None else time.time_ns()
        self.end_time: int | None = None

    def get_span_context(self) -> trace.SpanContext:
        return self.context

    def is_recording(self) -> bool:
        return self.end_time is None

    def set_attribute(self, key: str, value: Any) -> None:
        if self.end_time is None and value is not None:
            self.attributes[key] = value

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        for key, value in attributes.items():
            self.set_attribute(key, value)

    def set_status(
        self, status: trace.Status | trace.StatusCode, description: str | None = None
    ) -> None:
        if self.end_time is not None or self.status.status_code is trace.StatusCode.OK:
            return  # ended, or OK already: final, as the specification says
        if isinstance(status, trace.StatusCode):
            status = trace.Status(status, description)
        if status.status_code is not trace.StatusCode.UNSET:
            self.status = status

    def add_event(
        self, name: str, attributes: Mapping[str, Any] | None = None, timestamp: int | None = None
    ) -> None:
        if self.end_time is not None:
            return
        event = Event(name, attributes, timestamp if timestamp is not None else time.time_ns())
        if isinstance(self.events, tuple):
            self.events = [event]
        else:
            self.events.append(event)

    def add_link(
        self, context: trace.SpanContext, attributes: Mapping[str, Any] | None = None
    ) -> None:
        if self.end_time is None and context.is_valid:
            self.links = (*self.links, trace.Link(context, attributes))

    def update_name(self, name: str) -> None:
        if self.end_time is None:
            self.name = name

    def record_exception(
        self,
        exception: BaseException,
        attributes: Mapping[str, Any] | None = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        recorded = {
            "exception.type": type(exception).__qualname__,
            "exception.message": str(exception),
            "exception.stacktrace": "".join(traceback.format_exception(exception)),
            "exception.escaped": str(escaped),
            **(attributes or {}),
        }
        self.add_event("exception", recorded, timestamp)

    def end(self, end_time: int | None = None) -> None:
        if self.end_time is not None:
            return
        self.end_time = end_time if end_time is not None else time.time_ns()
        self._processor.on_end(self)  # type: ignore[arg-type]  # what it reads, a span has


class LightTracer(trace.Tracer):
    """Makes :class:`LightSpan` objects (or the API's non-recording span, not sampled)."""

    def __init__(
        self,
        resource: Resource,
        scope: InstrumentationScope,
        sampler: sampling.Sampler,
        processor: SpanProcessor,
    ) -> None:
        self.resource = resource
        self.scope = scope
        self.sampler = sampler
        self.processor = processor
        self._root_bound = _inline_root_bound(sampler)

    def start_span(
        self,
        name: str,
        context: context_api.Context | None = None,
        kind: trace.SpanKind = trace.SpanKind.INTERNAL,
        attributes: Mapping[str, Any] | None = None,
        links: Sequence[trace.Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> trace.Span:
        parent: trace.SpanContext | None = trace.get_current_span(context).get_span_context()
        if parent is not None and parent.is_valid:
            trace_id = parent.trace_id
        else:
            parent = None
            trace_id = random.getrandbits(128) or 1
        bound = self._root_bound
        if bound is not None:
            if parent is not None:
                sampled, state = parent.trace_flags.sampled, parent.trace_state
            else:
                sampled, state = (trace_id & _LOW_64) < bound, _EMPTY_STATE
            extra: Mapping[str, Any] | None = None
        else:
            decided = self.sampler.should_sample(context, trace_id, name, kind, attributes, links)
            sampled = decided.decision in _SAMPLED_DECISIONS
            state, extra = decided.trace_state or _EMPTY_STATE, decided.attributes
        span_context = trace.SpanContext(
            trace_id,
            random.getrandbits(64) or 1,
            is_remote=False,
            trace_flags=_SAMPLED if sampled else _NOT_SAMPLED,
            trace_state=state,
        )
        if not sampled:
            return trace.NonRecordingSpan(span_context)
        if extra:
            attributes = {**extra, **(attributes or {})}
        return LightSpan(
            self, name, span_context, parent, kind, attributes, links or (), start_time
        )

    @contextlib.contextmanager
    def start_as_current_span(  # type: ignore[override]
        self,
        name: str,
        context: context_api.Context | None = None,
        kind: trace.SpanKind = trace.SpanKind.INTERNAL,
        attributes: Mapping[str, Any] | None = None,
        links: Sequence[trace.Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[trace.Span]:
        span = self.start_span(name, context, kind, attributes, links, start_time)
        token = context_api.attach(trace.set_span_in_context(span, context))
        try:
            yield span
        finally:
            context_api.detach(token)
            if end_on_exit:
                span.end()


class LightTracerProvider(trace.TracerProvider):
    """Tracers of one resource whose spans go to one processor, shut down at exit."""

    def __init__(
        self,
        resource: Resource,
        processor: SpanProcessor,
        sampler: sampling.Sampler | None = None,
    ) -> None:
        self.resource = resource
        self.processor = processor
        # The SDK's choice from OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG, as its
        # TracerProvider makes it.
        self.sampler = sampler if sampler is not None else sampling._get_from_env_or_default()
        self._tracers: dict[tuple[str, str | None], LightTracer] = {}
        atexit.register(self.shutdown)

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> LightTracer:
        key = (instrumenting_module_name, instrumenting_library_version)
        tracer = self._tracers.get(key)
        if tracer is None:
            scope = InstrumentationScope(
                instrumenting_module_name, instrumenting_library_version, schema_url, attributes
            )
            tracer = self._tracers[key] = LightTracer(
                self.resource, scope, self.sampler, self.processor
            )
        return tracer

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.processor.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self.processor.shutdown()
