"""mcp_operator.tracing: when it turns on, the spans and histograms it makes, what it never
records."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from mcp_operator import tracing

AGENT_TRACE, AGENT_SPAN = "a" * 32, "b" * 16
HEADER_TRACE, HEADER_SPAN = "c" * 32, "d" * 16


@pytest.fixture
def spans() -> Iterator[tuple[InMemorySpanExporter, InMemoryMetricReader]]:
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider, MeterProvider(metric_readers=[reader]))
    yield exporter, reader
    tracing.uninstall()


@pytest.mark.parametrize(
    ("environ", "wanted"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, False),
    ],
)
def test_only_the_standard_variables_turn_tracing_on(environ: dict[str, str], wanted: bool) -> None:
    assert tracing.wanted(environ) is wanted


def test_without_configuration_tracing_stays_off() -> None:
    assert tracing.configure("test", {}) is False
    assert tracing.ENABLED is False


def _meta_params(arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "echo",
        "arguments": arguments,
        "_meta": {"traceparent": f"00-{AGENT_TRACE}-{AGENT_SPAN}-01", "progressToken": 3},
    }


def test_a_server_span_has_the_meta_parent_the_header_link_and_the_conventions_attributes(
    spans: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    exporter, reader = spans
    params = _meta_params({"secret": "do-not-record"})
    sent: list[dict[str, Any]] = []

    async def work() -> dict[str, Any]:
        with tracing.client("tools/call", params, server="up") as (_span, carried):
            sent.append(carried)
            return {"jsonrpc": "2.0", "id": 5, "result": {"content": [], "isError": True}}

    async def main() -> dict[str, Any]:
        tracing.HEADERS.set([(b"traceparent", f"00-{HEADER_TRACE}-{HEADER_SPAN}-01".encode())])
        return await tracing.serve("tools/call", params, work(), request_id=5, session_id="s1")

    asyncio.run(main())
    client, server = exporter.get_finished_spans()
    assert server.name == client.name == "tools/call echo"
    assert server.kind == SpanKind.SERVER and client.kind == SpanKind.CLIENT
    assert f"{server.context.trace_id:032x}" == AGENT_TRACE
    assert server.parent is not None and f"{server.parent.span_id:016x}" == AGENT_SPAN
    assert [f"{link.context.span_id:016x}" for link in server.links] == [HEADER_SPAN]
    assert client.parent is not None and client.parent.span_id == server.context.span_id
    assert dict(server.attributes or {}) == {
        "mcp.method.name": "tools/call",
        "jsonrpc.request.id": "5",
        "mcp.session.id": "s1",
        "gen_ai.tool.name": "echo",
        "gen_ai.operation.name": "execute_tool",
        "error.type": "tool_error",
    }
    assert server.status.status_code == StatusCode.ERROR
    # The upstream request carries the client span's context; the caller's params unchanged.
    assert sent[0]["_meta"]["traceparent"].split("-")[2] == f"{client.context.span_id:016x}"
    assert sent[0]["_meta"]["progressToken"] == 3
    assert params["_meta"]["traceparent"].split("-")[2] == AGENT_SPAN
    assert "do-not-record" not in repr([dict(s.attributes or {}) for s in (server, client)])
    metrics = reader.get_metrics_data()
    assert metrics is not None
    names = {
        metric.name: metric
        for resource in metrics.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    assert {"mcp.server.operation.duration", "mcp.client.operation.duration"} <= set(names)
    point = next(iter(names["mcp.server.operation.duration"].data.data_points))
    assert point.count == 1
    assert dict(point.attributes) == {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "echo",
        "gen_ai.operation.name": "execute_tool",
        "error.type": "tool_error",
    }


def test_a_failed_request_marks_the_span_with_its_error_type(
    spans: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    exporter, _ = spans

    async def refused() -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no"}}

    async def main() -> None:
        await tracing.serve("prompts/list", {}, refused(), request_id=1)

    asyncio.run(main())
    (span,) = exporter.get_finished_spans()
    assert span.name == "prompts/list"
    assert dict(span.attributes or {})["error.type"] == "-32601"


def test_the_operators_own_spans_and_their_failures(
    spans: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    exporter, _ = spans
    with tracing.internal("reconcile MCPServer", k8s_namespace_name="ns", k8s_object_name="x"):
        pass
    with pytest.raises(ValueError), tracing.internal("probe"):
        raise ValueError("boom")
    done, failed = exporter.get_finished_spans()
    assert dict(done.attributes or {}) == {"k8s.namespace.name": "ns", "k8s.object.name": "x"}
    assert dict(failed.attributes or {}) == {"error.type": "ValueError"}
    assert failed.status.status_code == StatusCode.ERROR


def test_with_tracing_off_the_operator_spans_are_nothing() -> None:
    tracing.uninstall()
    with tracing.internal("probe") as span:
        assert span is None
