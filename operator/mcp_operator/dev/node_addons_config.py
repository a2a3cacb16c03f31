"""What the local node's add-ons read and apply, rendered: cluster DNS and the firewall.

Pure: every function takes names, addresses and paths and returns the text or
objects of one thing — CoreDNS's ``Corefile``, the API objects each add-on needs
(its ServiceAccount, least-privilege ClusterRole and binding; the ``kube-dns``
Service and the EndpointSlice that points it at CoreDNS on the node's bridge
address), a token kubeconfig, and the ``iptables-restore`` input that removes
what kube-router's firewall left in the ``filter`` table. No I/O, no clock;
:mod:`mcp_operator.dev.node_addons` writes, applies and runs them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CLUSTER_DOMAIN = "cluster.local"
DNS_SERVICE_IP = "10.96.0.10"
"""The ``kube-dns`` Service's ClusterIP: the kubelet's ``clusterDNS``, as in most clusters."""
DNS_NAMESPACE = "kube-system"
FIELD_MANAGER = "mcp-operator-dev-node"
ADDON_LABEL = "mcp-operator.dev/node-addon"

FIREWALL_CHAIN_PREFIXES = ("KUBE-ROUTER-", "KUBE-POD-FW-", "KUBE-NWPLCY-")
"""kube-router's firewall chains in the ``filter`` table (its netpol controller's names)."""
FIREWALL_IPSET_PREFIXES = ("KUBE-SRC-", "KUBE-DST-", "inet6:KUBE-SRC-", "inet6:KUBE-DST-")
"""kube-router's ipsets for NetworkPolicy peers and targets."""

COREDNS_RULES: list[dict[str, Any]] = [
    # The kubernetes plugin answers from Services and their EndpointSlices, and needs the
    # Namespaces to tell "no such namespace" from "no such Service". Pods are not read
    # (`pods disabled`, the default): no Pod records.
    {"apiGroups": [""], "resources": ["services", "namespaces"], "verbs": ["list", "watch"]},
    {
        "apiGroups": ["discovery.k8s.io"],
        "resources": ["endpointslices"],
        "verbs": ["list", "watch"],
    },
]
"""CoreDNS's ClusterRole: read-only, and only what its ``kubernetes`` plugin lists."""

KUBE_ROUTER_RULES: list[dict[str, Any]] = [
    # What the firewall acts on: Pods and their labels, Namespaces and theirs, the policies,
    # and its own Node (addresses, Pod range; `get` by name at start).
    {
        "apiGroups": [""],
        "resources": ["pods", "namespaces", "nodes"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["networking.k8s.io"],
        "resources": ["networkpolicies"],
        "verbs": ["list", "watch"],
    },
    # kube-router v2.1.0 starts one shared informer factory for all its controllers and
    # waits for every informer to sync, even those only its router and service proxy (both
    # off here) use: without list/watch on these it never starts. Read-only all the same.
    {
        "apiGroups": [""],
        "resources": ["services", "endpoints"],
        "verbs": ["list", "watch"],
    },
    {
        "apiGroups": ["discovery.k8s.io"],
        "resources": ["endpointslices"],
        "verbs": ["list", "watch"],
    },
]
"""kube-router's ClusterRole with ``--run-firewall`` only: read-only."""


def corefile(*, bind: str, kubeconfig: Path, ready_port: int, reverse_cidrs: list[str]) -> str:
    """CoreDNS on ``bind``:53 answering for the cluster domain (and the reverse zones of
    ``reverse_cidrs``) from the API server, and for nothing else.

    There is no ``forward`` plugin anywhere: the root zone's block logs a query for any
    other name and refuses it (``acl`` ``block``: REFUSED), so no DNS query ever leaves
    the machine, and the log shows each one that was refused.
    """
    zones = " ".join([CLUSTER_DOMAIN, *reverse_cidrs])
    return f"""\
{zones}:53 {{
    bind {bind}
    errors
    log
    # 200 once the kubernetes plugin has synced with the API server.
    ready 127.0.0.1:{ready_port}
    kubernetes {{
        kubeconfig {kubeconfig}
        ttl 5
    }}
    cache 5
    loadbalance
}}

.:53 {{
    bind {bind}
    log
    acl {{
        block
    }}
}}
"""


def addon_labels(name: str) -> dict[str, str]:
    return {ADDON_LABEL: name}


def identity_objects(name: str, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A ServiceAccount ``kube-system/<name>``, a ClusterRole with ``rules`` and the binding."""
    role = f"mcp-operator-dev:{name}"
    labels = addon_labels(name)
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": DNS_NAMESPACE, "labels": labels},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role, "labels": labels},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role, "labels": labels},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": DNS_NAMESPACE}],
        },
    ]


def dns_service_objects(address: str) -> list[dict[str, Any]]:
    """The ``kube-dns`` Service (no selector: CoreDNS is no Pod) and the EndpointSlice that
    sends its port 53 to CoreDNS at ``address``, the node's bridge address."""
    labels = {**addon_labels("coredns"), "k8s-app": "kube-dns"}
    ports = [
        {"name": "dns", "port": 53, "protocol": "UDP"},
        {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
    ]
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kube-dns", "namespace": DNS_NAMESPACE, "labels": labels},
            "spec": {
                "clusterIP": DNS_SERVICE_IP,
                "ports": [{**p, "targetPort": 53} for p in ports],
            },
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": "kube-dns-node",
                "namespace": DNS_NAMESPACE,
                "labels": {
                    **labels,
                    "kubernetes.io/service-name": "kube-dns",
                    # Not the EndpointSlice controller's: it leaves this slice alone.
                    "endpointslice.kubernetes.io/managed-by": FIELD_MANAGER,
                },
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
            "ports": ports,
        },
    ]


def token_kubeconfig(server: str, ca_cert: Path, token_file: Path) -> dict[str, Any]:
    """A kubeconfig that authenticates with the bearer token in ``token_file``."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "local", "cluster": {"server": server, "certificate-authority": str(ca_cert)}}
        ],
        "users": [{"name": "addon", "user": {"tokenFile": str(token_file)}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "addon"}}],
        "current-context": "local",
    }


def _is_firewall_chain(name: str) -> bool:
    return name.startswith(FIREWALL_CHAIN_PREFIXES)


def firewall_chains(filter_table: str) -> list[str]:
    """kube-router's chains declared in ``iptables-save -t filter`` output."""
    return [
        line[1:].split()[0]
        for line in filter_table.splitlines()
        if line.startswith(":") and _is_firewall_chain(line[1:].split()[0])
    ]


def firewall_removal(filter_table: str) -> str | None:
    """``iptables-restore --noflush`` input that removes kube-router's firewall from the
    ``filter`` table that ``iptables-save -t filter`` printed, leaving every other rule and
    chain as it is; ``None`` when there is nothing of it.

    The jumps into its chains from other chains are deleted, then its chains are flushed
    (they jump to each other) and deleted.
    """
    ours = firewall_chains(filter_table)
    jumps = []
    for line in filter_table.splitlines():
        if not line.startswith("-A "):
            continue
        words = line.split()
        chain = words[1]
        target = words[words.index("-j") + 1] if "-j" in words else ""
        if not _is_firewall_chain(chain) and _is_firewall_chain(target):
            jumps.append("-D " + line[3:])
    if not ours and not jumps:
        return None
    lines = ["*filter", *jumps]
    lines += [f"-F {chain}" for chain in ours]
    lines += [f"-X {chain}" for chain in ours]
    lines.append("COMMIT")
    return "\n".join(lines) + "\n"


def filter_table_is_empty(filter_table: str) -> bool:
    """Whether ``iptables-save -t filter`` shows only the built-in chains, accepting, with
    no rule: then the table does nothing and removing it changes nothing."""
    for line in filter_table.splitlines():
        if line.startswith("-"):
            return False
        if line.startswith(":"):
            chain, policy = [*line[1:].split(), "", ""][:2]
            if chain not in ("INPUT", "FORWARD", "OUTPUT") or policy != "ACCEPT":
                return False
    return True


def firewall_ipsets(names: str) -> list[str]:
    """kube-router's ipsets among ``ipset list -n`` output."""
    return [name for name in names.split() if name.startswith(FIREWALL_IPSET_PREFIXES)]
