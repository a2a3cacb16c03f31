"""Benchmark: what one span costs in-process, piece by piece (µs per span, best of rounds).

The pieces of a bridge call's two spans (bridge/core.py's server span through
``tracing.serve``, mcp/session.py's client span through ``tracing.client``):

1. **making them**: the SDK alone (``start_span`` with the conventions' attributes, ``end``)
   and through our helpers (``tracing.serve`` / ``tracing.client``: names, attributes, the
   ``_meta`` parent, the header link, the context written into ``_meta``), with no processor;
   the same with the sampler saying no (``parentbased_traceidratio`` 0: what a request not
   sampled costs);
2. **handing them on**: the SDK's ``BatchSpanProcessor.on_end`` against our
   ``OtlpSpanProcessor.on_end`` (which encodes the span then and there);
   and the same through our light spans (otlp/spans.py), made and encoded;
3. **encoding them**: the SDK's OTLP encoder (``encode_spans`` + serialization, what its
   export thread does per span) against ours (``otlp.encode.span`` + ``request``).

``PYTHONPATH=operator .venv/bin/python bench/span_cost.py [--spans 20000] [--rounds 5]``.
Numbers of one run only are comparable (the machine may be shared); the calls/s these make
in the bridge are bench/bridge_bench.py's tracing rows.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBasedTraceIdRatio
from opentelemetry.trace import SpanKind

from mcp_operator import tracing
from mcp_operator.otlp import encode
from mcp_operator.otlp.export import OtlpSpanProcessor, Sender, Settings
from mcp_operator.otlp.spans import LightTracerProvider

PARAMS = {
    "name": "ev_echo",
    "arguments": {"message": "hello"},
    "_meta": {"traceparent": f"00-{'a' * 32}-{'b' * 16}-01", "progressToken": 1},
}
HEADERS = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
           (b"accept", b"application/json, text/event-stream"), (b"mcp-session-id", b"s" * 32),
           (b"traceparent", f"00-{'c' * 32}-{'d' * 16}-01".encode())]  # fmt: skip
ANSWER = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "x"}]}}


class Keep(SpanProcessor):
    """Keeps the finished spans (for the encoders), does nothing else."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


class Discard(SpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def best(rounds: int, count: int, run: Callable[[int], None]) -> float:
    """µs per item of the fastest of ``rounds`` runs of ``run(count)``."""
    fastest = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        run(count)
        fastest = min(fastest, time.perf_counter() - started)
    return fastest / count * 1e6


def provider(sampler: Any = None) -> TracerProvider:
    return TracerProvider(resource=Resource.create({"service.name": "bench"}), sampler=sampler)


def bridge_call(traced: bool) -> Callable[[int], None]:
    """``count`` calls' worth of spans through our helpers: a server span around a client
    span, as a bridge call makes them; ``traced``: the agent's request carries its trace
    context in ``_meta`` and a ``traceparent`` header (a parent and a link), else none (as
    bench/bridge_bench.py's calls)."""
    params = PARAMS if traced else {"name": "ev_echo", "arguments": {"message": "hello"}}
    headers = HEADERS if traced else HEADERS[:-1]

    async def upstream() -> dict[str, Any]:
        with tracing.client("tools/call", {"name": "echo", "arguments": {}}, server="ev") as (
            span,
            _carried,
        ):
            tracing.outcome(span, ANSWER)
        return ANSWER

    async def calls(count: int) -> None:
        tracing.HEADERS.set(headers)
        for number in range(count):
            await tracing.serve("tools/call", params, upstream(), request_id=number)

    return lambda count: asyncio.run(calls(count))


def sdk_only(tracer: Any) -> Callable[[int], None]:
    attributes = {
        "mcp.method.name": "tools/call",
        "jsonrpc.request.id": "7",
        "gen_ai.tool.name": "ev_echo",
        "gen_ai.operation.name": "execute_tool",
    }

    def run(count: int) -> None:
        for _ in range(count):
            tracer.start_span("tools/call ev_echo", kind=SpanKind.SERVER,
                              attributes=attributes).end()  # fmt: skip

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    n, rounds = args.spans, args.rounds
    rows: list[tuple[str, float]] = []

    bare = provider()
    rows.append(("SDK start_span + 4 attributes + end, no processor",
                 best(rounds, n, sdk_only(bare.get_tracer("bench")))))  # fmt: skip
    tracing.install(bare)
    rows.append(("a bridge call's 2 spans via tracing.serve/client, per span",
                 best(rounds, n // 2, bridge_call(False)) / 2))  # fmt: skip
    rows.append(("  the same, the agent's context a parent and a header link",
                 best(rounds, n // 2, bridge_call(True)) / 2))  # fmt: skip
    tracing.install(provider(ParentBasedTraceIdRatio(0.0)))
    rows.append(("  the same, not sampled (ratio 0; no agent context), per span",
                 best(rounds, n // 2, bridge_call(False)) / 2))  # fmt: skip

    # Light spans (otlp/spans.py, what an OTLP-exporting process makes), each encoded as it
    # ends by our processor (never a full batch: nothing is sent).
    quiet = Settings(max_queue_size=n + 1, max_export_batch_size=n + 1, schedule_delay=3600)
    light = OtlpSpanProcessor(quiet, Sender(Settings(), "bench"))
    tracing.install(LightTracerProvider(Resource.create({"service.name": "bench"}), light))
    calls = bridge_call(False)

    def emptied_first(count: int) -> None:
        light._queue.clear()  # a round's spans never fill it: none dropped, none sent
        calls(count)

    rows.append(("light spans: a bridge call's 2 via tracing.serve/client, made and encoded",
                 best(rounds, n // 2, emptied_first) / 2))  # fmt: skip
    light._queue.clear()
    tracing.install(LightTracerProvider(Resource.create({"service.name": "bench"}), light,
                                        ParentBasedTraceIdRatio(0.0)))  # fmt: skip
    rows.append(("  the same, not sampled (ratio 0)", best(rounds, n // 2, bridge_call(False)) / 2))
    light.shutdown()

    keeper = provider()
    keep = Keep()
    keeper.add_span_processor(keep)
    tracing.install(keeper)
    bridge_call(True)(512)
    spans = keep.spans[:1024]
    tracing.uninstall()

    sdk_batch = BatchSpanProcessor(Discard(), max_queue_size=n, max_export_batch_size=n,
                                   schedule_delay_millis=3_600_000)  # fmt: skip
    ours = OtlpSpanProcessor(
        # Never a full batch, never the schedule: nothing is sent (no collector here).
        Settings(max_queue_size=n + 1, max_export_batch_size=n + 1, schedule_delay=3600),
        Sender(Settings(), "bench"),
    )

    def on_end(processor: SpanProcessor, queue: Any) -> Callable[[int], None]:
        def run(count: int) -> None:
            queue.clear()
            for index in range(count):
                processor.on_end(spans[index % len(spans)])

        return run

    sdk_queue = sdk_batch._batch_processor._queue
    rows.append(("SDK BatchSpanProcessor.on_end (queue only)",
                 best(rounds, n, on_end(sdk_batch, sdk_queue))))  # fmt: skip
    rows.append(("our OtlpSpanProcessor.on_end (encodes the span)",
                 best(rounds, n, on_end(ours, ours._queue))))  # fmt: skip

    def sdk_encode(count: int) -> None:
        for _ in range(count // len(spans)):
            encode_spans(spans).SerializePartialToString()

    encoded = [(s.resource, s.instrumentation_scope, encode.span(s)) for s in spans]

    def our_request(count: int) -> None:
        for _ in range(count // len(spans)):
            encode.request(encoded)

    total = n - n % len(spans)
    rows.append(("SDK encode_spans + serialize (its export thread)",
                 best(rounds, total, sdk_encode)))  # fmt: skip
    rows.append(("our request assembly from encoded spans (our export thread)",
                 best(rounds, total, our_request)))  # fmt: skip
    sdk_queue.clear()
    ours._queue.clear()  # nothing to send to a collector that is not there
    sdk_batch.shutdown()
    ours.shutdown()

    print("| piece | µs per span |")
    print("|---|---|")
    for name, micros in rows:
        print(f"| {name} | {micros:.2f} |")


if __name__ == "__main__":
    main()
