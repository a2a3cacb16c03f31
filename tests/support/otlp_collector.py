"""An OTLP/HTTP collector stand-in: a local HTTP server that takes ``/v1/traces`` (protobuf)
and keeps the spans it was sent, decoded (``/v1/metrics`` is counted). For the trace tests
and for bench/bridge_bench.py's tracing rows (``keep=False``: decoded nowhere, only counted).
"""

from __future__ import annotations

import gzip
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

KINDS = {1: "INTERNAL", 2: "SERVER", 3: "CLIENT"}


class Collector:
    """An OTLP/HTTP collector stand-in: the spans it was sent, decoded."""

    def __init__(self, *, keep: bool = True, host: str = "127.0.0.1") -> None:
        self.spans: list[dict[str, Any]] = []
        self.metrics_posts = 0
        self.trace_posts = 0
        self.keep = keep
        self.status = 200
        """What the collector answers (a 503 to play one that is overloaded)."""
        self.headers: dict[str, str] = {}
        """The headers of the last POST to ``/v1/traces``."""
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                encoding = self.headers.get("content-encoding", "")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                if self.path == "/v1/traces":
                    collector.trace_posts += 1
                    collector.headers = {k.lower(): v for k, v in self.headers.items()}
                if self.path == "/v1/traces" and collector.keep and collector.status == 200:
                    request = ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    collector._take(request)
                elif self.path == "/v1/metrics":
                    collector.metrics_posts += 1
                self.send_response(collector.status)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _take(self, request: ExportTraceServiceRequest) -> None:
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            service = resource.get("service.name")
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append({
                        "service": service,
                        "resource": resource,
                        "trace": span.trace_id.hex(),
                        "span": span.span_id.hex(),
                        "parent": span.parent_span_id.hex() or None,
                        "name": span.name,
                        "kind": KINDS.get(span.kind, str(span.kind)),
                        "attributes": {a.key: _value(a.value) for a in span.attributes},
                        "links": [(link.trace_id.hex(), link.span_id.hex()) for link in span.links],
                        "error": span.status.code == 2,
                    })  # fmt: skip


def _value(value: Any) -> Any:
    return getattr(value, value.WhichOneof("value")) if value.WhichOneof("value") else None
