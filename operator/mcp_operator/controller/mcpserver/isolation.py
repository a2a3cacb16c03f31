"""The ``Isolation`` condition of a managed MCPServer: who besides a run's bridge can call it.

Pure: the server and what the operator found at start in, a condition out. A managed
server's endpoint takes a projected ServiceAccount token of its audience from a permitted
namespace (``access.authentication: kubernetes``); the bridge of a run holds one, and only
the bridge-key admission policy (the chart's ``<release>-bridge-keys``, docs/security.md,
"Who holds a bridge's key") keeps everyone else from minting one: a Pod of one's own that
projects it, a ``TokenRequest``, an ephemeral container or ``exec`` in a bridge. Where that
policy was not found (a namespace-scoped install cannot see it, or none is installed), the
condition says what then nobody prevents, rather than leaving it to be guessed. Whether the
server's own access rules hold for every caller is the adapter's business, not this one's.
"""

from __future__ import annotations

from mcp_operator.api import MCPServer
from mcp_operator.controller.conditions import WantedCondition
from mcp_operator.controller.mcpserver.network import permitted_namespaces
from mcp_operator.controller.mcpserver.render import authentication

ISOLATION = "Isolation"


def condition(server: MCPServer, bridge_key_policy: str | None) -> WantedCondition | None:
    """``Isolation`` of a managed server (``None`` for an external one, which we do not
    serve): ``True`` when only bridges and the operator can hold a key to it."""
    if server.spec.mode != "managed":
        return None
    method = authentication(server)
    if method == "none":
        return WantedCondition(
            ISOLATION,
            "False",
            "Unauthenticated",
            "The endpoint takes every caller that can connect (access.authentication none or "
            "transport sse): only its NetworkPolicy keeps Pods other than run bridges away",
        )
    if method == "oidc":
        return WantedCondition(
            ISOLATION,
            "False",
            "ExternalCallers",
            "Whoever holds a token of the issuer in spec.access.oidc for this server's "
            "audience calls it without a bridge, as configured",
        )
    permitted = permitted_namespaces(server)
    namespaces = "any namespace" if "*" in permitted else ", ".join(permitted)
    if bridge_key_policy is not None:
        return WantedCondition(
            ISOLATION,
            "True",
            "BridgeOnly",
            f"Only run bridges and the operator hold a token of this server's audience: "
            f"ValidatingAdmissionPolicy {bridge_key_policy} refuses everyone else such a Pod, "
            "TokenRequest, run label, ephemeral container or exec into a bridge",
        )
    return WantedCondition(
        ISOLATION,
        "False",
        "BridgeKeysUnguarded",
        f"No bridge-key admission policy was found: whoever may create Pods in {namespaces} "
        "can run a Pod that projects a token of this server's audience and call it without "
        "a run's bridge and its policy (filters, approval, rate limits, pins, audit), as can "
        "whoever may request serviceaccounts/token there or exec into a bridge; the server's "
        "own access rules still apply (docs/security.md)",
    )
