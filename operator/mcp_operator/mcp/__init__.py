"""The MCP client side, shared by the probe and the bridge. One module per job:

- :mod:`~mcp_operator.mcp.session` — the one MCP client session (either era), used by the
  probe and the bridge alike; its one failure type, ``McpFailure``; the pagination rule;
  change streams;
- :mod:`~mcp_operator.mcp.sse` — the one SSE reader;
- :mod:`~mcp_operator.mcp.streamable` — the probe's face of the session (bounds, SDK models);
- :mod:`~mcp_operator.mcp.target` — where and how to probe;
- :mod:`~mcp_operator.mcp.client` — the bounded body, and the SDK's client for the legacy
  HTTP+SSE transport;
- :mod:`~mcp_operator.mcp.pages` — tool lists counted and cut on the raw JSON;
- :mod:`~mcp_operator.mcp.budget` — the byte budget shared by all probes;
- :mod:`~mcp_operator.mcp.scrub` — masking header values a server echoes back;
- :mod:`~mcp_operator.mcp.errors` — ``ProbeError`` and the table that translates failures;
- :mod:`~mcp_operator.mcp.discovery` — the probe: every page of ``tools/list``;
- :mod:`~mcp_operator.mcp.watch` — waiting for ``tools/list_changed``;
- :mod:`~mcp_operator.mcp.naming` — exposed names and filters, as one plan.

The wire (connections, egress policy, TLS) is :mod:`mcp_operator.net`'s. Nothing here
imports ``kube`` or ``controller``.
"""
