"""OTLP/HTTP traces of our own: light spans, and their export.

- :mod:`~mcp_operator.otlp.spans`: a tracer provider whose spans are the OpenTelemetry API's,
  with the SDK's samplers and without its per-span machinery.
- :mod:`~mcp_operator.otlp.encode`: finished spans (ours or the SDK's) straight into OTLP
  protobuf bytes (a small protobuf writer for the fields OTLP traces have), no message objects.
- :mod:`~mcp_operator.otlp.export`: a span processor that encodes a span when it ends and a
  thread that POSTs the bytes in bounded batches to the endpoint the standard ``OTEL_*``
  variables name, without retries.

Why not the SDK's spans, ``BatchSpanProcessor`` and OTLP exporter: docs/tracing.md ("What it
costs"). Used by :mod:`mcp_operator.tracing` only.
"""
