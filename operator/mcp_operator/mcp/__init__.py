"""The MCP client side, shared by the probe and the bridge. One module per job:

- :mod:`~mcp_operator.mcp.target` — where and how to connect; URLs safe to show;
- :mod:`~mcp_operator.mcp.client` — the bounded HTTP client and the handshake, either era;
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
