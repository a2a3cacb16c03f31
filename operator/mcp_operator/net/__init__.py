"""The wire: every HTTP connection the operator and the bridge open, and the rules for it.

One module per job:

- :mod:`~mcp_operator.net.pool` — the lean keep-alive HTTP/1.1 client (probe, bridge, API
  server);
- :mod:`~mcp_operator.net.egress` — which addresses a connection may go to (pure policy);
- :mod:`~mcp_operator.net.guard` — the httpx2 transport that applies that policy to every
  connection it opens;
- :mod:`~mcp_operator.net.tls` — the shared TLS client contexts;
- :mod:`~mcp_operator.net.cancel` — whether the current task was asked to stop.

Nothing here knows MCP or Kubernetes: ``net`` imports none of the operator's other rooms
(import-linter contract ``net``).
"""
