"""The egress NetworkPolicy of an AgentRun's Pod, rendered: pure, parsed objects in.

A run whose egress is ``restricted`` (``spec.network.egress``, or the operator's default)
gets one policy, named like its Pod and applied before the Pod exists, that lets the Pod
connect only to:

- the cluster's DNS (:func:`~mcp_operator.controller.network.dns_rule`);
- each usable managed server's Pods, on their serving port (the container port named
  ``mcp``). A Service's ClusterIP is not listed: kube-proxy translates it to a Pod's address
  before the enforcers on the node judge the packet, so the Pod is what the policy sees;
- each usable external server's addresses, on its URL's port, as the caller resolved them
  (:func:`external_endpoints` says which names; the caller drops what the egress policy
  refuses, and refreshes them on every reconcile);
- ``spec.network.egressTo`` (where the agent's LLM endpoint is).

An ``open`` run gets no policy at all. Ingress is not restricted here: the Pod serves nothing
beyond its own loopback (the bridge's endpoint).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from mcp_operator.api import AgentRun
from mcp_operator.api.network import Egress
from mcp_operator.controller import network
from mcp_operator.controller.agentrun.render import labels, pod_name
from mcp_operator.controller.agentrun.resolve import Resolution
from mcp_operator.controller.mcpserver.containers import ADAPTER_PORT_NAME
from mcp_operator.controller.mcpserver.render import selector as server_selector
from mcp_operator.controller.render import AGENT_RUN_LABEL
from mcp_operator.controller.settings import NetworkPolicySettings

Endpoint = tuple[str, int]
"""``(host, port)`` of an external server's URL."""


def egress(run: AgentRun, settings: NetworkPolicySettings) -> Egress:
    """The run's egress: its own ``spec.network.egress``, or the operator's default."""
    chosen = run.spec.network.egress if run.spec.network is not None else None
    return chosen or settings.agent_egress


def policy_name(run: AgentRun) -> str:
    """The NetworkPolicy's name: the Pod's."""
    return pod_name(run)


def external_endpoints(resolution: Resolution) -> list[Endpoint]:
    """The ``(host, port)`` of every usable external server the run uses, in spec order."""
    found: list[Endpoint] = []
    for binding in resolution.usable:
        server = binding.server
        if server is None or server.spec.mode != "external" or not server.spec.url:
            continue
        parts = urlsplit(server.spec.url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        endpoint = ((parts.hostname or "").strip("[]"), port)
        if endpoint[0] and endpoint not in found:
            found.append(endpoint)
    return found


def network_policy(
    run: AgentRun,
    resolution: Resolution,
    addresses: Mapping[Endpoint, Sequence[str]],
    settings: NetworkPolicySettings,
) -> dict[str, Any]:
    """The run's egress NetworkPolicy; ``addresses`` holds the allowed addresses of each of
    :func:`external_endpoints` (an endpoint without any gets no rule)."""
    rules = [network.dns_rule(settings)]
    for binding in resolution.usable:
        server = binding.server
        if server is None or server.spec.mode != "managed":
            continue
        rules.append(
            {
                "to": [
                    {
                        "namespaceSelector": network.namespaces_selector([binding.namespace]),
                        "podSelector": {"matchLabels": server_selector(server)},
                    }
                ],
                "ports": [{"protocol": "TCP", "port": ADAPTER_PORT_NAME}],
            }
        )
    for host, port in external_endpoints(resolution):
        allowed = sorted(set(addresses.get((host, port), ())))
        if allowed:
            rules.append(
                {
                    "to": [network.address_peer(address) for address in allowed],
                    "ports": [{"protocol": "TCP", "port": port}],
                }
            )
    spec = run.spec.network
    rules += network.egress_rules(spec.egress_to if spec else None)
    return network.manifest(
        run,
        namespace=run.metadata.namespace or "",
        name=policy_name(run),
        labels=labels(run),
        pod_selector={"matchLabels": {AGENT_RUN_LABEL: run.metadata.name}},
        ingress=None,
        egress=rules,
    )


def describe(manifest: Mapping[str, Any], refused: Sequence[str] = ()) -> str:
    """What the policy allows, for the ``NetworkPolicy`` condition; ``refused``: addresses of
    external servers that the egress policy refused (left out)."""
    rules = manifest["spec"]["egress"]
    text = (
        f"egress only to DNS and {len(rules) - 1} more rules (MCP servers, spec.network.egressTo)"
    )
    if refused:
        text += "; left out, refused by the operator's egress policy: " + ", ".join(refused[:8])
    return text
