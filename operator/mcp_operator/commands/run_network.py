"""The NetworkPolicy flags of ``mcp-operator run``, and the settings they make.

This module owns ``--network-policies``, ``--agent-egress``, the operator's and DNS's Pod
labels and CIDRs (docs/security.md, "NetworkPolicies"), ``--metrics-scrapers`` parsing, and
their checks: a malformed value ends the process with the flag's name.
"""

from __future__ import annotations

import argparse
import os

from mcp_operator.api.network import check_cidr
from mcp_operator.controller.settings import NetworkPolicySettings


def add_network_policy_arguments(parser: argparse.ArgumentParser) -> None:
    """The NetworkPolicies the operator renders (docs/security.md, "NetworkPolicies")."""
    defaults = NetworkPolicySettings()
    parser.add_argument(
        "--network-policies",
        choices=["enabled", "disabled"],
        default=os.environ.get("MCP_OPERATOR_NETWORK_POLICIES", "enabled"),
        help="render a NetworkPolicy for every managed server's Pods and every restricted "
        "AgentRun Pod (env MCP_OPERATOR_NETWORK_POLICIES); 'disabled' where the cluster has no "
        "NetworkPolicy enforcer (default %(default)s)",
    )
    parser.add_argument(
        "--agent-egress",
        choices=["open", "restricted"],
        default=os.environ.get("MCP_OPERATOR_AGENT_EGRESS", defaults.agent_egress),
        help="egress of AgentRun Pods whose spec.network.egress is unset (env "
        "MCP_OPERATOR_AGENT_EGRESS; default %(default)s)",
    )
    parser.add_argument(
        "--operator-pod-labels",
        default=os.environ.get("MCP_OPERATOR_POD_LABELS", label_list(defaults.operator_pod_labels)),
        help="comma-separated key=value labels of the operator's own Pods, which managed "
        "servers' NetworkPolicies let in (env MCP_OPERATOR_POD_LABELS; default %(default)s)",
    )
    parser.add_argument(
        "--dns-namespace",
        default=defaults.dns_namespace,
        help="namespace of the cluster's DNS Pods, which restricted egress reaches "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--dns-pod-labels",
        default=label_list(defaults.dns_pod_labels),
        help="comma-separated key=value labels of the cluster's DNS Pods (default %(default)s)",
    )
    parser.add_argument(
        "--dns-cidrs",
        default=os.environ.get("MCP_OPERATOR_DNS_CIDRS"),
        help="comma-separated CIDRs of DNS servers that are not Pods (NodeLocal DNSCache, a DNS "
        "on the nodes), which restricted egress reaches on port 53 too (env "
        "MCP_OPERATOR_DNS_CIDRS; default none)",
    )


def label_list(labels: tuple[tuple[str, str], ...]) -> str:
    return ",".join(f"{key}={value}" for key, value in labels)


def parse_labels(text: str, flag: str) -> tuple[tuple[str, str], ...]:
    """``k=v,k=v`` as label pairs; a malformed entry ends the process with the flag's name."""
    pairs = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        key, equals, value = item.partition("=")
        if not equals or not key:
            raise SystemExit(f"{flag}: {item!r} is not key=value")
        pairs.append((key.strip(), value.strip()))
    if not pairs:
        raise SystemExit(f"{flag}: at least one key=value is needed")
    return tuple(pairs)


def scraper_list(text: str) -> tuple[str, ...]:
    """``--metrics-scrapers``: ``namespace/name`` entries, or ``SystemExit`` naming a bad one."""
    found: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        namespace, _, name = item.partition("/")
        if not namespace or not name or "/" in name or ":" in item:
            raise SystemExit(f"--metrics-scrapers: {item!r} must be NAMESPACE/NAME")
        found.append(item)
    return tuple(sorted(set(found)))


def network_policy_settings(args: argparse.Namespace) -> NetworkPolicySettings:
    cidrs = tuple(c.strip() for c in (args.dns_cidrs or "").split(",") if c.strip())
    for cidr in cidrs:
        try:
            check_cidr(cidr)
        except ValueError as error:
            raise SystemExit(f"--dns-cidrs: {error}") from None
    return NetworkPolicySettings(
        enabled=args.network_policies == "enabled",
        agent_egress=args.agent_egress,
        operator_pod_labels=parse_labels(args.operator_pod_labels, "--operator-pod-labels"),
        dns_namespace=args.dns_namespace,
        dns_pod_labels=parse_labels(args.dns_pod_labels, "--dns-pod-labels"),
        dns_cidrs=cidrs,
    )
