"""The mcp-bridge: one governed MCP endpoint for an agent, in front of the run's MCPServers.

The call pipeline and what it decides, pure (no sockets, no clock of its own):

- :mod:`~mcp_operator.bridge.catalog` — exposed name → server, original name, schema, hints;
- :mod:`~mcp_operator.bridge.errors` — the structured tool error every failure becomes;
- :mod:`~mcp_operator.bridge.validate` — arguments against the tool's ``inputSchema``;
- :mod:`~mcp_operator.bridge.pii` — the PII scanner of any JSON value (detect, redact, block);
- :mod:`~mcp_operator.bridge.pii_detectors` — the PII detectors: built-in, and plugins';
- :mod:`~mcp_operator.bridge.pii_leaves` — a value's texts normalised, walked and rebuilt;
- :mod:`~mcp_operator.bridge.checksums` — the checksums that make a PII candidate count;
- :mod:`~mcp_operator.bridge.hooks` — the before/after-call hook interface, PII as built-ins;
- :mod:`~mcp_operator.bridge.plugins` — loading hook and detector plugins from entry points;
- :mod:`~mcp_operator.bridge.breaker` — a circuit breaker per server;
- :mod:`~mcp_operator.bridge.retry` — which failures are retried, and after how long;
- :mod:`~mcp_operator.bridge.audit` — one JSON line per call, never a value;
- :mod:`~mcp_operator.bridge.pipeline` — validate → before-hooks → call → after-hooks →
  normalise-error, in one place.

The program around it (``mcp-operator bridge``):

- :mod:`~mcp_operator.bridge.upstreams` — every server of the run, each one session of
  :mod:`mcp_operator.mcp.session` (the MCP client the probe uses too: the bridge has no
  client of its own): listing, re-listing with back-off, following ``list_changed``;
- :mod:`~mcp_operator.bridge.core` — the running state: configuration, catalog, pipeline;
- :mod:`~mcp_operator.bridge.front`, :mod:`~mcp_operator.bridge.front_legacy` — the agent's
  endpoint in both eras, on :mod:`mcp_operator.serve` (its session table and per-era
  answers);
- :mod:`~mcp_operator.bridge.reload` — re-reading the mounted configuration;
- :mod:`~mcp_operator.bridge.health`, :mod:`~mcp_operator.bridge.metrics` — ``/healthz``,
  ``/readyz``, ``/metrics`` on the health port;
- :mod:`~mcp_operator.bridge.server` — the process: settings, servers, SIGTERM.

The configuration file it reads is :mod:`mcp_operator.api.bridge`; nothing here imports
``controller``, ``kube`` or ``adapter``.
"""
