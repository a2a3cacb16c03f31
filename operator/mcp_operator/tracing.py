"""OpenTelemetry traces and metrics of MCP requests, off unless configured.

Owns the one place the bridge, the adapter and the operator speak OpenTelemetry:

- **Configuration** (:func:`configure`): from the standard variables only
  (``OTEL_TRACES_EXPORTER``, ``OTEL_EXPORTER_OTLP_ENDPOINT``,
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_SDK_DISABLED``, ``OTEL_SERVICE_NAME``,
  ``OTEL_TRACES_SAMPLER``...): without an exporter named or an OTLP endpoint set, nothing
  is imported and :data:`ENABLED` stays ``False``. Exported over OTLP/HTTP, the spans and
  their export are ours (:mod:`mcp_operator.otlp`: the API's spans and context, the SDK's
  samplers, the same variables and bytes at a fraction of the SDK's CPU); the ``console``
  exporter is the SDK's. :func:`install` takes providers of the caller's own (the SDK's with
  an in-memory exporter in tests): the helpers use only the API's span methods.
- **Spans per the MCP semantic conventions** (semantic-conventions-genai ``mcp.md``): a
  SERVER span per request received (:func:`serve`), a CLIENT span per request sent
  (:func:`client`), named ``{mcp.method.name} {target}`` (the tool or prompt name), with
  ``mcp.method.name``, ``jsonrpc.request.id``, ``mcp.session.id``, ``gen_ai.tool.name``,
  ``gen_ai.operation.name`` (``execute_tool``) and ``error.type``; never the arguments.
- **Propagation in** ``params._meta`` (``traceparent``, ``tracestate``, W3C Trace Context):
  the ``_meta`` context is a server span's parent, the HTTP request's header context
  (:data:`HEADERS`, set by the fronts) a link; a client span's context is written into the
  ``_meta`` of the request it sends (a copy: the caller's params are not changed).
- **Metrics**: ``mcp.server.operation.duration`` / ``mcp.client.operation.duration``
  histograms (seconds) next to the Prometheus ones, when ``OTEL_METRICS_EXPORTER=otlp`` names
  them (or :func:`install` is given a meter provider).

With tracing off the callers check :data:`ENABLED` (a module attribute: ``tracing.ENABLED``)
and build nothing.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from types import SimpleNamespace
from typing import Any, Final

ENABLED: bool = False
"""Whether spans are made (read it as ``tracing.ENABLED``: it changes when configured)."""

HEADERS: ContextVar[Sequence[tuple[bytes, bytes]] | None] = ContextVar(
    "mcp_operator_tracing_headers", default=None
)
"""The HTTP request's headers (ASGI form), set by a front while tracing is on: their trace
context becomes a link of the request's server span."""

TRACEPARENT: Final = "traceparent"
TRACESTATE: Final = "tracestate"
DURATION_BUCKETS: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
"""The conventions' advice for the operation duration histograms (seconds)."""
_TARGETED: Final = frozenset({"tools/call", "prompts/get"})

_tracer: Any = None
_server_duration: Any = None
_client_duration: Any = None
_propagator: Any = None
_api: Any = None


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether the standard variables ask for traces: an exporter named (not ``none``) or an
    OTLP endpoint set, and the SDK not disabled."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    endpoint = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    )
    return bool(exporter) or bool(endpoint)


def configure(service_name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Turn tracing on when the standard variables ask for it (OTLP over HTTP, or
    ``console``); whether it is on. ``OTEL_SERVICE_NAME`` wins over ``service_name``."""
    env = os.environ if environ is None else environ
    if not wanted(env):
        return False
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    from mcp_operator import __version__

    resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or service_name})
    provider: Any
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "console":
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    else:
        # Ours, not the SDK's spans and BatchSpanProcessor over its OTLPSpanExporter: the same
        # variables and bytes at a fraction of the CPU (docs/tracing.md, "What it costs").
        from mcp_operator.otlp.export import OtlpSpanProcessor, Sender, Settings
        from mcp_operator.otlp.spans import LightTracerProvider

        settings = Settings.from_environ(env)
        sender = Sender(settings, f"mcp-operator/{__version__}")
        provider = LightTracerProvider(resource, OtlpSpanProcessor(settings, sender))
    meter_provider = None
    # Named explicitly, not by default: a histogram record costs the SDK about as much as a
    # span (bench/README.md), and the Prometheus histograms are always there.
    if env.get("OTEL_METRICS_EXPORTER", "").strip().lower() == "otlp":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        reader = PeriodicExportingMetricReader(OTLPMetricExporter())
        meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    install(provider, meter_provider)
    return True


def install(tracer_provider: Any, meter_provider: Any = None) -> None:
    """Make spans with ``tracer_provider`` (and the duration histograms with
    ``meter_provider``, when given) from now on."""
    global ENABLED, _tracer, _server_duration, _client_duration, _propagator, _api
    from opentelemetry import context, trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    # Looked up once, not per request.
    _api = SimpleNamespace(
        attach=context.attach,
        detach=context.detach,
        root=context.Context(),
        Link=trace.Link,
        SERVER=trace.SpanKind.SERVER,
        CLIENT=trace.SpanKind.CLIENT,
        error=trace.Status(trace.StatusCode.ERROR),
        get_current_span=trace.get_current_span,
        set_span_in_context=trace.set_span_in_context,
    )

    from mcp_operator import __version__

    _propagator = TraceContextTextMapPropagator()
    _tracer = tracer_provider.get_tracer("mcp_operator", __version__)
    if meter_provider is not None:
        meter = meter_provider.get_meter("mcp_operator", __version__)
        advice = {"explicit_bucket_boundaries_advisory": list(DURATION_BUCKETS)}
        _server_duration = meter.create_histogram(
            "mcp.server.operation.duration", unit="s", **advice
        )
        _client_duration = meter.create_histogram(
            "mcp.client.operation.duration", unit="s", **advice
        )
    ENABLED = True


def uninstall() -> None:
    """Tracing off again (tests)."""
    global ENABLED, _tracer, _server_duration, _client_duration
    ENABLED = False
    _tracer = _server_duration = _client_duration = None


# ---------------------------------------------------------------------------------- attributes


def _target(method: str, params: Any) -> str | None:
    if method in _TARGETED and isinstance(params, dict):
        name = params.get("name")
        if isinstance(name, str):
            return name
    return None


def _attributes(
    method: str, target: str | None, request_id: Any, session_id: str | None
) -> dict[str, Any]:
    attributes: dict[str, Any] = {"mcp.method.name": method}
    if request_id is not None and not isinstance(request_id, bool):
        attributes["jsonrpc.request.id"] = str(request_id)
    if session_id is not None:
        attributes["mcp.session.id"] = session_id
    if target is not None and method == "tools/call":
        attributes["gen_ai.tool.name"] = target
        attributes["gen_ai.operation.name"] = "execute_tool"
    elif target is not None:
        attributes["gen_ai.prompt.name"] = target
    return attributes


def error_type(response: Any) -> str | None:
    """The conventions' ``error.type`` of a JSON-RPC response (its error code) or a tool's
    result that is an error (``tool_error``); ``None`` for a success."""
    if not isinstance(response, dict):
        return None
    error = response.get("error")
    if isinstance(error, dict):
        return str(error.get("code", "_OTHER"))
    result = response.get("result", response)
    if isinstance(result, dict) and result.get("isError") is True:
        return "tool_error"
    return None


def _carrier_of(meta: Any) -> dict[str, str]:
    if not isinstance(meta, dict):
        return {}
    carrier: dict[str, str] = {}
    for key in (TRACEPARENT, TRACESTATE):
        value = meta.get(key)
        if isinstance(value, str):
            carrier[key] = value
    return carrier


def _header_carrier(headers: Sequence[tuple[bytes, bytes]] | None) -> dict[str, str]:
    carrier: dict[str, str] = {}
    for key, value in headers or ():
        name = key.lower()
        if name == b"traceparent" or name == b"tracestate":
            carrier[name.decode()] = value.decode("latin-1")
    return carrier


def _inject(context: Any, carrier: dict[str, Any]) -> None:
    """Write a span's context into ``carrier`` as W3C Trace Context (``traceparent``, and
    ``tracestate`` when it has one): what the propagator's ``inject`` writes, from the span's
    context directly rather than through a context made for it."""
    if not context.is_valid:
        return
    carrier[TRACEPARENT] = (
        f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
    )
    if context.trace_state:
        carrier[TRACESTATE] = context.trace_state.to_header()


def _end(span: Any, kind_error: str | None, histogram: Any, attributes: dict[str, Any]) -> None:
    if kind_error is not None:
        span.set_attribute("error.type", kind_error)
        span.set_status(_api.error)
        attributes["error.type"] = kind_error
    if histogram is not None:
        attributes.pop("jsonrpc.request.id", None)
        attributes.pop("mcp.session.id", None)
        attributes.pop("gen_ai.prompt.name", None)


# ---------------------------------------------------------------------------------- spans


async def serve(
    method: str,
    params: Any,
    work: Awaitable[dict[str, Any]],
    *,
    request_id: Any = None,
    session_id: str | None = None,
) -> dict[str, Any]:
    """``work`` (the JSON-RPC response to a request received) in a SERVER span: its parent
    the context in ``params._meta``, the HTTP headers' context a link."""
    assert _propagator is not None
    target = _target(method, params)
    attributes = _attributes(method, target, request_id, session_id)
    meta = params.get("_meta") if isinstance(params, dict) else None
    carrier = _carrier_of(meta)
    # A request without trace context (most) is a root: the empty context, made once.
    parent = _propagator.extract(carrier) if carrier else _api.root
    links: Sequence[Any] = ()
    headers = _header_carrier(HEADERS.get())
    if headers:
        linked = _api.get_current_span(_propagator.extract(headers)).get_span_context()
        if linked.is_valid:
            links = (_api.Link(linked),)
    name = f"{method} {target}" if target else method
    started = time.perf_counter()
    span = _tracer.start_span(
        name, context=parent, kind=_api.SERVER, attributes=attributes, links=links
    )
    token = _api.attach(_api.set_span_in_context(span, parent))
    failure: str | None = None
    try:
        response = await work
    except BaseException as error:
        failure = type(error).__name__
        raise
    else:
        failure = error_type(response)
        return response
    finally:
        _api.detach(token)
        _end(span, failure, _server_duration, attributes)
        span.end()
        if _server_duration is not None:
            _server_duration.record(time.perf_counter() - started, attributes)


@contextlib.contextmanager
def client(
    method: str,
    params: Mapping[str, Any],
    *,
    server: str | None = None,
    session_id: str | None = None,
) -> Iterator[tuple[Any, dict[str, Any]]]:
    """A CLIENT span for a request sent, current while the request runs; yields the span and
    a copy of ``params`` whose ``_meta`` carries the span's context."""
    assert _propagator is not None
    target = _target(method, params)
    attributes = _attributes(method, target, None, session_id)
    if server is not None:
        attributes["server.address"] = server
    name = f"{method} {target}" if target else method
    started = time.perf_counter()
    span = _tracer.start_span(name, kind=_api.CLIENT, attributes=attributes)
    meta = params.get("_meta")
    carried = dict(meta) if isinstance(meta, dict) else {}
    carried.pop(TRACESTATE, None)
    _inject(span.get_span_context(), carried)
    failure: str | None = None
    try:
        yield span, {**params, "_meta": carried}
    except BaseException as error:
        failure = getattr(error, "kind", None) or type(error).__name__
        raise
    finally:
        _end(span, failure, _client_duration, attributes)
        span.end()
        if _client_duration is not None:
            _client_duration.record(time.perf_counter() - started, attributes)


def outcome(span: Any, response: Any) -> None:
    """Mark a client span failed when the response it got is an error (or a tool error)."""
    failure = error_type(response)
    if failure is not None:
        _end(span, failure, None, {})


@contextlib.contextmanager
def internal(name: str, **attributes: Any) -> Iterator[Any]:
    """A span of the operator's own work (a reconcile, a probe); nothing when tracing is
    off. An exception marks it failed with ``error.type``."""
    if not ENABLED:
        yield None
        return

    shown = {key.replace("_", "."): value for key, value in attributes.items() if value is not None}
    with _tracer.start_as_current_span(name, attributes=shown, record_exception=False) as span:
        try:
            yield span
        except BaseException as error:
            span.set_attribute("error.type", type(error).__name__)
            span.set_status(_api.error)
            raise
