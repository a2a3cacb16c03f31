"""An MCP server on the official SDK over stdio with OpenTelemetry on, for the trace tests.

Run as ``python tests/support/traced_server.py SPANS_FILE``. The SDK's server opens a span
per request with the trace context of ``params._meta`` as its parent; this server exports
its finished spans as JSON lines to ``SPANS_FILE`` (trace, span and parent ids in hex,
name, kind, attributes), and its tool ``echo`` answers with the ``traceparent`` it saw in
``_meta``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult


class FileExporter(SpanExporter):
    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self.path, "a", encoding="utf-8") as sink:
            for span in spans:
                context = span.get_span_context()
                assert context is not None
                sink.write(
                    json.dumps(
                        {
                            "trace": f"{context.trace_id:032x}",
                            "span": f"{context.span_id:016x}",
                            "parent": f"{span.parent.span_id:016x}" if span.parent else None,
                            "name": span.name,
                            "kind": span.kind.name,
                            "attributes": dict(span.attributes or {}),
                        }
                    )
                    + "\n"
                )
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(FileExporter(sys.argv[1])))
trace.set_tracer_provider(provider)
server = MCPServer("traced")


@server.tool(description="Echoes the message and the traceparent it was called with")
def echo(message: str, ctx: Context) -> str:
    meta: Any = ctx.request_context.meta
    seen = None
    if meta is not None:
        dumped = meta if isinstance(meta, dict) else meta.model_dump()
        seen = dumped.get("traceparent")
    return json.dumps({"message": message, "traceparent": seen})


if __name__ == "__main__":
    server.run("stdio")
