"""What the NetworkPolicies of both kinds share, rendered: peers, DNS, the manifest, the condition.

Pure: parsed objects and settings in, manifest pieces out (no I/O, no clock). Each kind's
own policy is its controller's ``network`` module
(:mod:`mcp_operator.controller.mcpserver.network`, :mod:`mcp_operator.controller.agentrun.
network`); applying them, owned and never taking over another's, is
:mod:`mcp_operator.controller.network_policies`.

Pods are selected by labels the operator sets, Namespaces by ``kubernetes.io/metadata.name``
(which the API server sets on every Namespace and no tenant can change), so that a peer is
never widened by a label a tenant can write on its own objects.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mcp_operator.api.network import EgressRule, NetworkPeer
from mcp_operator.controller.conditions import WantedCondition
from mcp_operator.controller.render import Owner, owner_reference
from mcp_operator.controller.settings import NetworkPolicySettings

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""The label the API server sets on every Namespace to its name (immutable by tenants)."""
CONDITION = "NetworkPolicy"  # a condition type, not a reason
"""The condition type that says which network posture applies to an object's Pods."""
DNS_PORT = 53


def namespaces_selector(namespaces: Iterable[str]) -> dict[str, Any]:
    """A namespaceSelector of exactly these Namespaces (``*`` among them: every Namespace)."""
    names = sorted(set(namespaces))
    if "*" in names:
        return {}
    return {"matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": names}]}


def address_peer(address: str) -> dict[str, Any]:
    """An ipBlock of exactly one address (``/32`` or ``/128``)."""
    ip = ipaddress.ip_address(address)
    return {"ipBlock": {"cidr": f"{ip}/{ip.max_prefixlen}"}}


def peer(spec: NetworkPeer) -> dict[str, Any]:
    """A peer of the spec, as a NetworkPolicy holds it."""
    dumped: dict[str, Any] = spec.model_dump(by_alias=True, exclude_none=True)
    return dumped


def egress_rules(rules: Sequence[EgressRule] | None) -> list[dict[str, Any]]:
    """``spec.network.egressTo`` as NetworkPolicy egress rules (``protocol`` defaulted)."""
    rendered = []
    for rule in rules or ():
        entry: dict[str, Any] = {"to": [peer(p) for p in rule.to]}
        if rule.ports:
            entry["ports"] = [p.model_dump(by_alias=True, exclude_none=True) for p in rule.ports]
        rendered.append(entry)
    return rendered


def dns_rule(settings: NetworkPolicySettings) -> dict[str, Any]:
    """Egress to the cluster's DNS on port 53, UDP and TCP: its Pods, and its other
    addresses when the settings name any."""
    to: list[dict[str, Any]] = [
        {
            "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: settings.dns_namespace}},
            "podSelector": {"matchLabels": dict(settings.dns_pod_labels)},
        }
    ]
    to += [{"ipBlock": {"cidr": cidr}} for cidr in settings.dns_cidrs]
    return {
        "to": to,
        "ports": [
            {"protocol": "UDP", "port": DNS_PORT},
            {"protocol": "TCP", "port": DNS_PORT},
        ],
    }


def operator_peers(settings: NetworkPolicySettings) -> list[dict[str, Any]]:
    """Where the operator's probes come from: its own Pods (by their labels, in its
    namespace), and the API server's addresses when it probes through the service proxy."""
    peers: list[dict[str, Any]] = []
    if settings.operator_namespace is not None:
        peers.append(
            {
                "namespaceSelector": {
                    "matchLabels": {NAMESPACE_NAME_LABEL: settings.operator_namespace}
                },
                "podSelector": {"matchLabels": dict(settings.operator_pod_labels)},
            }
        )
    peers += [address_peer(address) for address in sorted(set(settings.api_server_addresses))]
    return peers


def manifest(
    owner: Owner,
    *,
    namespace: str,
    name: str,
    labels: Mapping[str, str],
    pod_selector: Mapping[str, Any],
    ingress: list[dict[str, Any]] | None,
    egress: list[dict[str, Any]] | None,
) -> dict[str, Any]:
    """A NetworkPolicy owned by ``owner``; ``None`` for a direction leaves it unrestricted
    (not in ``policyTypes``), a list restricts it to those rules."""
    spec: dict[str, Any] = {"podSelector": dict(pod_selector), "policyTypes": []}
    if ingress is not None:
        spec["policyTypes"].append("Ingress")
        spec["ingress"] = ingress
    if egress is not None:
        spec["policyTypes"].append("Egress")
        spec["egress"] = egress
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels),
            "ownerReferences": [owner_reference(owner)],
        },
        "spec": spec,
    }


# -- the NetworkPolicy condition -------------------------------------------------------------


def disabled() -> WantedCondition:
    """The operator renders no NetworkPolicies (``--network-policies=disabled``)."""
    return WantedCondition(
        CONDITION,
        "False",
        "Disabled",
        "The operator renders no NetworkPolicies (--network-policies=disabled): the Pods' "
        "traffic is limited by the endpoints' token check alone",
    )


def restricted(name: str, what: str) -> WantedCondition:
    """The NetworkPolicy ``name`` applies; ``what`` says what it allows."""
    return WantedCondition(CONDITION, "True", "Restricted", f"NetworkPolicy {name}: {what}")


def failed(reason: str, message: str) -> WantedCondition:
    """The NetworkPolicy could not be applied (``NameConflict``, ``ApplyFailed``)."""
    return WantedCondition(CONDITION, "False", reason, message[:1024])
