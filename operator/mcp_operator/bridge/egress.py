"""Where the bridge may connect upstream: :data:`BRIDGE_EGRESS`.

Every request to an upstream (calls, listings and change streams alike) is a request of its
MCP session (:mod:`~mcp_operator.mcp.session`) on the bridge's one pool, given this policy:
every address judged at every connect, TLS still verifying the name, no proxy from the
environment. The rules are :mod:`~mcp_operator.net.egress`'s.
"""

from __future__ import annotations

from mcp_operator.net.egress import EgressPolicy

BRIDGE_EGRESS = EgressPolicy(allow_private=True, allow_loopback=True)
"""Where the bridge's upstream calls may connect: its upstreams are in-cluster Services
(private addresses) that the operator resolved from Ready MCPServers, whose probes judged
them first; loopback is the agent's own Pod. Refused always: link-local and cloud metadata
addresses, unspecified, multicast and reserved ones, whatever a name resolves to at call
time (docs/security.md)."""
