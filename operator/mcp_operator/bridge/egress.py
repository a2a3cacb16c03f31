"""Where the bridge may connect upstream: :data:`BRIDGE_EGRESS`, and the httpx transport of
its change streams under that policy.

The bridge's calls go through :class:`~mcp_operator.net.pool.Http1Pool`, given
:data:`BRIDGE_EGRESS`; its legacy GET streams (``tools/list_changed``) use the shared
``httpx.AsyncClient``, whose transport (:func:`guarded_transport`) is the same pool under
httpx's interface (:mod:`~mcp_operator.net.transport`): every address judged at every
connect, TLS still verifying the name, no proxy from the environment. One guard for both;
the rules are :mod:`~mcp_operator.net.egress`'s.
"""

from __future__ import annotations

from mcp_operator.net.egress import EgressPolicy
from mcp_operator.net.tls import tls_context
from mcp_operator.net.transport import Http1Transport

BRIDGE_EGRESS = EgressPolicy(allow_private=True, allow_loopback=True)
"""Where the bridge's upstream calls may connect: its upstreams are in-cluster Services
(private addresses) that the operator resolved from Ready MCPServers, whose probes judged
them first; loopback is the agent's own Pod. Refused always: link-local and cloud metadata
addresses, unspecified, multicast and reserved ones, whatever a name resolves to at call
time (docs/security.md)."""


def guarded_transport(policy: EgressPolicy, *, max_connections: int) -> Http1Transport:
    """An httpx transport on the lean pool, connecting only where ``policy`` allows, at most
    ``max_connections`` per upstream origin."""
    return Http1Transport(tls_context(True), egress=policy, max_connections=max_connections)
