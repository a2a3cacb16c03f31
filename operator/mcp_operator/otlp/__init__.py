"""OTLP/HTTP trace export of our own: the OpenTelemetry SDK makes the spans, this package
sends them.

- :mod:`~mcp_operator.otlp.encode`: the SDK's finished spans straight into OTLP protobuf
  bytes (a small protobuf writer for the fields OTLP traces have), no message objects.
- :mod:`~mcp_operator.otlp.export`: a span processor that encodes a span when it ends and a
  thread that POSTs the bytes in bounded batches to the endpoint the standard ``OTEL_*``
  variables name, without retries.

Why not the SDK's ``BatchSpanProcessor`` and OTLP exporter: docs/tracing.md ("What it
costs"). Used by :mod:`mcp_operator.tracing` only.
"""
