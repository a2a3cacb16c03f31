"""The mcp-bridge: one governed MCP endpoint for an agent, in front of the run's MCPServers.

The call pipeline and what it decides, pure (no sockets, no clock of its own):

- :mod:`~mcp_operator.bridge.catalog` — exposed name → server, original name, schema, hints;
- :mod:`~mcp_operator.bridge.errors` — the structured tool error every failure becomes;
- :mod:`~mcp_operator.bridge.validate` — arguments against the tool's ``inputSchema``;
- :mod:`~mcp_operator.bridge.pii` — PII detectors and the JSON scanner (detect, redact, block);
- :mod:`~mcp_operator.bridge.checksums` — the checksums that make a PII candidate count;
- :mod:`~mcp_operator.bridge.hooks` — the before/after-call hook interface, PII as built-ins;
- :mod:`~mcp_operator.bridge.breaker` — a circuit breaker per server;
- :mod:`~mcp_operator.bridge.retry` — which failures are retried, and after how long;
- :mod:`~mcp_operator.bridge.audit` — one JSON line per call, never a value;
- :mod:`~mcp_operator.bridge.pipeline` — validate → before-hooks → call → after-hooks →
  normalise-error, in one place.

The configuration file it reads is :mod:`mcp_operator.api.bridge`. Upstream sessions, the
agent-facing HTTP front and metrics live in their own modules; nothing here imports
``controller``, ``kube`` or ``adapter``.
"""
