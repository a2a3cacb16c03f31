"""mcp_operator.otlp.export: the standard variables it reads, the spans it sends to a collector
(the stand-in of tests/support, decoding with the official messages), and what it does when
the collector fails or the queue is full: drop and count, never retry."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from mcp_operator.otlp.export import OtlpSpanProcessor, Sender, Settings
from tests.support import peers
from tests.support.otlp_collector import Collector
from tests.support.waiting import eventually


@pytest.fixture
def collector() -> Iterator[Collector]:
    collector = Collector()
    yield collector
    collector.close()


def _processor(url: str, **settings: object) -> tuple[TracerProvider, OtlpSpanProcessor]:
    chosen = Settings(endpoint=f"{url}/v1/traces", schedule_delay=3600, **settings)  # type: ignore[arg-type]
    processor = OtlpSpanProcessor(chosen, Sender(chosen, "test/1"))
    provider = TracerProvider(resource=Resource.create({"service.name": "unit"}))
    provider.add_span_processor(processor)
    return provider, processor


@pytest.mark.parametrize(
    ("environ", "endpoint"),
    [
        ({}, "http://localhost:4318/v1/traces"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}, "http://c:4318/v1/traces"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c/base"}, "https://c/base/v1/traces"),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://general:4318",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:9/custom",
            },
            "http://t:9/custom",
        ),
    ],
)
def test_the_endpoint_is_the_one_the_sdk_exporter_would_use(
    environ: dict[str, str], endpoint: str
) -> None:
    assert Settings.from_environ(environ).endpoint == endpoint


def test_the_other_standard_variables_are_read_and_the_traces_ones_win() -> None:
    settings = Settings.from_environ({
        "OTEL_EXPORTER_OTLP_HEADERS": "api-key=general",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "api-key=s%20ecret,tenant=t1",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "3",
        "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip",
        "OTEL_EXPORTER_OTLP_CERTIFICATE": "/ca.pem",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "OTEL_BSP_MAX_QUEUE_SIZE": "100",
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "500",
    })  # fmt: skip
    assert dict(settings.headers) == {"api-key": "s ecret", "tenant": "t1"}
    assert settings.timeout == 3 and settings.compression == "gzip"
    assert settings.certificate == "/ca.pem"
    assert settings.schedule_delay == 0.2
    assert (settings.max_queue_size, settings.max_export_batch_size) == (100, 100)


def test_a_value_that_is_not_one_falls_back_to_the_default_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = Settings.from_environ(
        {"OTEL_BSP_SCHEDULE_DELAY": "soon", "OTEL_EXPORTER_OTLP_COMPRESSION": "brotli"}
    )
    assert settings.schedule_delay == 5.0 and settings.compression == "none"
    assert "OTEL_BSP_SCHEDULE_DELAY" in caplog.text and "brotli" in caplog.text


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_sampled_spans_reach_the_collector_with_the_headers_and_nothing_else(
    collector: Collector, compression: str
) -> None:
    provider, processor = _processor(
        collector.url, headers={"api-key": "k1"}, compression=compression
    )
    tracer = provider.get_tracer("mcp_operator", "9.9")
    outer_attributes = {"mcp.method.name": "x"}
    with (
        tracer.start_as_current_span("tools/call echo", attributes=outer_attributes),
        tracer.start_as_current_span("inner"),
    ):
        pass
    unsampled = TracerProvider(sampler=ALWAYS_OFF)
    unsampled.add_span_processor(processor)
    unsampled.get_tracer("other").start_span("never sent").end()
    assert processor.force_flush()
    assert [s["name"] for s in collector.spans] == ["inner", "tools/call echo"]
    inner, outer = collector.spans
    assert inner["parent"] == outer["span"] and inner["trace"] == outer["trace"]
    assert outer["service"] == "unit" and outer["attributes"] == {"mcp.method.name": "x"}
    assert collector.headers["api-key"] == "k1"
    assert collector.headers["content-type"] == "application/x-protobuf"
    assert collector.trace_posts == 1 and processor.exported == 2
    processor.shutdown()


def test_a_full_batch_is_sent_without_waiting_for_the_schedule(collector: Collector) -> None:
    provider, processor = _processor(collector.url, max_export_batch_size=3)
    tracer = provider.get_tracer("t")
    for number in range(3):
        tracer.start_span(f"span {number}").end()
    eventually("the full batch", lambda: len(collector.spans) == 3, timeout=10)
    assert collector.trace_posts == 1
    processor.shutdown()


def test_a_wake_for_a_full_batch_sends_full_batches_and_the_schedule_the_rest(
    collector: Collector,
) -> None:
    # Spans that came while a batch was posted wait for their batch to fill (or the
    # schedule), not posted a few at a time.
    provider, processor = _processor(collector.url, max_queue_size=100, max_export_batch_size=3)
    processor._wake.set = lambda: None  # type: ignore[method-assign]  # the thread stays asleep
    tracer = provider.get_tracer("t")
    for number in range(7):
        tracer.start_span(f"span {number}").end()
    processor._export(full_batches_only=True)  # what the thread does when woken
    assert collector.trace_posts == 2 and len(collector.spans) == 6
    processor.force_flush()  # what the schedule does, and a flush
    assert collector.trace_posts == 3
    assert [s["name"] for s in collector.spans] == [f"span {n}" for n in range(7)]
    del processor._wake.set
    processor.shutdown()


def test_a_failed_export_is_dropped_and_counted_not_retried(
    collector: Collector, caplog: pytest.LogCaptureFixture
) -> None:
    collector.status = 503
    provider, processor = _processor(collector.url)
    tracer = provider.get_tracer("t")
    for number in range(4):
        tracer.start_span(f"span {number}").end()
    with caplog.at_level(logging.WARNING):
        processor.force_flush()
        processor.force_flush()
    assert collector.trace_posts == 1  # one attempt, and nothing left to send again
    assert processor.dropped == 4 and processor.exported == 0
    assert "Dropped 4 span(s)" in caplog.text and "HTTP 503" in caplog.text
    collector.status = 200
    tracer.start_span("after").end()
    processor.force_flush()
    assert [s["name"] for s in collector.spans] == ["after"]
    processor.shutdown()


def test_a_collector_that_is_not_there_costs_one_connection_attempt_per_batch() -> None:
    provider, processor = _processor(f"http://127.0.0.1:{peers.free_port()}", timeout=2)
    provider.get_tracer("t").start_span("lost").end()
    processor.force_flush()
    assert processor.dropped == 1
    processor.shutdown()


def test_a_full_queue_drops_the_oldest_spans(collector: Collector) -> None:
    provider, processor = _processor(collector.url, max_queue_size=2, max_export_batch_size=2)
    processor._wake.set = lambda: None  # type: ignore[method-assign]  # hold the batch back
    tracer = provider.get_tracer("t")
    for name in ("first", "second", "third"):
        tracer.start_span(name).end()
    processor.force_flush()
    assert [s["name"] for s in collector.spans] == ["second", "third"]
    assert processor.dropped == 1
    del processor._wake.set
    processor.shutdown()


def test_shutdown_sends_what_is_left(collector: Collector) -> None:
    provider, _ = _processor(collector.url)
    provider.get_tracer("t").start_span("last").end()
    provider.shutdown()
    assert [s["name"] for s in collector.spans] == ["last"]
    provider.get_tracer("t").start_span("after shutdown").end()
    assert [s["name"] for s in collector.spans] == ["last"]
