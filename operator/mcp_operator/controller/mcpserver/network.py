"""The NetworkPolicy of a managed MCPServer's Pods, rendered: pure, parsed objects in.

One policy per managed server, named like its Deployment and Service, selecting its Pods:

- **ingress** only on the serving port, the container port named ``mcp`` that the Service
  targets (the adapter's for a stdio server; the server's own, or the authenticating front's
  in front of it, for one that serves HTTP itself), so that no other port of the Pod can be
  reached from outside it; and only from the operator's probes
  (:func:`~mcp_operator.controller.network.operator_peers`), from AgentRun Pods (the label
  ``mcp-operator.dev/agent-run`` exists) in the namespaces the server permits (its own and
  ``spec.access.namespaces``, ``*`` for all), and from ``spec.network.ingressFrom``;
- **egress** unrestricted (``spec.network.egress: open``, the default), or restricted to the
  cluster's DNS and ``spec.network.egressTo``.
"""

from __future__ import annotations

from typing import Any

from mcp_operator.api import MCPServer
from mcp_operator.controller import network
from mcp_operator.controller.conditions import WantedCondition
from mcp_operator.controller.mcpserver.containers import ADAPTER_PORT_NAME
from mcp_operator.controller.mcpserver.render import labels, selector
from mcp_operator.controller.render import AGENT_RUN_LABEL
from mcp_operator.controller.settings import NetworkPolicySettings


def policy_name(server: MCPServer) -> str:
    """The NetworkPolicy's name: the server's own, like its Deployment and Service."""
    return server.metadata.name


def permitted_namespaces(server: MCPServer) -> list[str]:
    """The namespaces whose AgentRuns may call the server (``*``: every one)."""
    listed = (server.spec.access.namespaces if server.spec.access else None) or []
    return sorted({server.metadata.namespace or "", *listed})


def runs_peer(server: MCPServer) -> dict[str, Any]:
    """AgentRun Pods of the permitted namespaces."""
    return {
        "namespaceSelector": network.namespaces_selector(permitted_namespaces(server)),
        "podSelector": {"matchExpressions": [{"key": AGENT_RUN_LABEL, "operator": "Exists"}]},
    }


def network_policy(server: MCPServer, settings: NetworkPolicySettings) -> dict[str, Any]:
    """The server's NetworkPolicy."""
    spec = server.spec.network
    callers = [
        *network.operator_peers(settings),
        runs_peer(server),
        *(network.peer(p) for p in (spec.ingress_from if spec else None) or ()),
    ]
    ingress = [{"from": callers, "ports": [{"protocol": "TCP", "port": ADAPTER_PORT_NAME}]}]
    egress = None
    if spec is not None and spec.egress == "restricted":
        egress = [network.dns_rule(settings), *network.egress_rules(spec.egress_to)]
    return network.manifest(
        server,
        namespace=server.metadata.namespace or "",
        name=policy_name(server),
        labels=labels(server),
        pod_selector={"matchLabels": selector(server)},
        ingress=ingress,
        egress=egress,
    )


def describe(server: MCPServer) -> str:
    """What the policy allows, for the ``NetworkPolicy`` condition."""
    spec = server.spec.network
    namespaces = permitted_namespaces(server)
    who = "every namespace" if "*" in namespaces else "namespaces " + ", ".join(namespaces)
    extra = len(spec.ingress_from or ()) if spec else 0
    text = f"ingress on port {ADAPTER_PORT_NAME} from the operator and AgentRuns of {who}"
    if extra:
        text += f" and {extra} more peers (spec.network.ingressFrom)"
    if spec is not None and spec.egress == "restricted":
        text += f"; egress to DNS and {len(spec.egress_to or ())} rules (spec.network.egressTo)"
    else:
        text += "; egress open"
    return text


def condition(server: MCPServer, settings: NetworkPolicySettings) -> WantedCondition:
    """The ``NetworkPolicy`` condition once the policy was applied (or removed: disabled)."""
    if not settings.enabled:
        return network.disabled()
    return network.restricted(policy_name(server), describe(server))
