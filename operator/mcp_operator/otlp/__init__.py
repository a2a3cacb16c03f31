"""OTLP/HTTP traces of our own: light spans, and their export.

Why not the SDK's spans, ``BatchSpanProcessor`` and OTLP exporter: docs/tracing.md ("What it
costs"). Used by :mod:`mcp_operator.tracing` only. Modules:

- ``spans``   a tracer provider whose spans are the OpenTelemetry API's, with the SDK's
  samplers and without its per-span machinery
- ``encode``  finished spans (ours or the SDK's) straight into OTLP protobuf bytes
- ``export``  a span processor that encodes a span when it ends, and a thread that POSTs the
  bytes in bounded batches to the endpoint the ``OTEL_*`` variables name, without retries
"""
