"""The wire: every HTTP connection the operator and the bridge open, and the rules for it.

One module per job:

- :mod:`~mcp_operator.net.pool` — the lean keep-alive HTTP/1.1 client (probe, bridge, API
  server): a cap per origin, interim answers read past, nothing sent twice that may have
  been read;
- :mod:`~mcp_operator.net.transport` — httpx's interface on that pool (the Kubernetes API
  client);
- :mod:`~mcp_operator.net.headers` — which configured headers may be sent (the one rule,
  checked where a header is configured and again by the pool);
- :mod:`~mcp_operator.net.egress` — which addresses a connection may go to (pure policy);
- :mod:`~mcp_operator.net.dial` — the one way a TCP connection is opened: every address
  judged by that policy, Happy Eyeballs between the allowed ones;
- :mod:`~mcp_operator.net.guard` — the httpx2 transport (the SDK's paths of the probe) on
  the same dial;
- :mod:`~mcp_operator.net.tls` — the shared TLS client contexts;
- :mod:`~mcp_operator.net.cancel` — whether the current task was asked to stop.

Nothing here knows MCP or Kubernetes: ``net`` imports none of the operator's other rooms
(import-linter contract ``net``).
"""
