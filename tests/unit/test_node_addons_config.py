"""The local node's add-on files and objects: what CoreDNS serves, who may read what, and the
removal of kube-router's firewall from an ``iptables-save`` dump."""

from __future__ import annotations

from pathlib import Path

from mcp_operator.dev import node_addons_config as config

# The shape `iptables-save -t filter` (1.8.9, nf_tables) prints with kube-router's firewall
# programmed for one Pod under a policy, next to rules of someone else's.
SAVED = (Path(__file__).parent / "golden" / "iptables-save-kube-router.txt").read_text()


def test_the_removal_deletes_the_jumps_into_kube_routers_chains_then_the_chains() -> None:
    removal = config.firewall_removal(SAVED)
    assert removal is not None
    lines = removal.splitlines()
    assert lines[0] == "*filter" and lines[-1] == "COMMIT"
    assert lines[1:4] == [
        f'-D {chain} -m comment --comment "kube-router netpol - {uuid}" -j KUBE-ROUTER-{chain}'
        for chain, uuid in (
            ("INPUT", "4IA2OSFRMVNDXBVV"),
            ("FORWARD", "TEMCG2JMHZYE7H7T"),
            ("OUTPUT", "VEAAIY32XVBHCSCY"),
        )
    ]
    ours = [
        "KUBE-NWPLCY-DEFAULT",
        "KUBE-NWPLCY-3KHWNSRSKJV3TVBI",
        "KUBE-POD-FW-J2JK2W6UCE7JVTTA",
        "KUBE-ROUTER-FORWARD",
        "KUBE-ROUTER-INPUT",
        "KUBE-ROUTER-OUTPUT",
    ]
    # Every chain flushed before any is deleted: they jump to each other.
    assert lines[4:10] == [f"-F {chain}" for chain in ours]
    assert lines[10:16] == [f"-X {chain}" for chain in ours]


def test_the_removal_leaves_every_other_rule_and_chain_alone() -> None:
    removal = config.firewall_removal(SAVED)
    assert removal is not None
    assert "SOMEONE-ELSE" not in removal
    assert "192.0.2.0/24" not in removal
    assert "-D KUBE-" not in removal  # rules inside our own chains go with the flush


def test_there_is_nothing_to_remove_without_kube_router() -> None:
    plain = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n-A INPUT -j ACCEPT\nCOMMIT\n"
    assert config.firewall_removal(plain) is None
    assert config.firewall_removal("") is None
    assert config.firewall_chains(plain) == []


def test_only_kube_routers_ipsets_are_named_for_removal() -> None:
    listed = "KUBE-SRC-ABC\nKUBE-DST-DEF\ninet6:KUBE-DST-GHI\nmy-own-set\nKUBE-OTHER\n"
    assert config.firewall_ipsets(listed) == ["KUBE-SRC-ABC", "KUBE-DST-DEF", "inet6:KUBE-DST-GHI"]


def test_coredns_serves_the_cluster_zones_on_the_bridge_and_forwards_nothing() -> None:
    text = config.corefile(
        bind="10.244.0.1",
        kubeconfig=Path("/n/coredns/kubeconfig"),
        ready_port=4321,
        reverse_cidrs=["10.244.0.0/16", "10.96.0.0/16"],
    )
    first = text.splitlines()[0]
    assert first == "cluster.local 10.244.0.0/16 10.96.0.0/16:53 {"
    assert "bind 10.244.0.1" in text
    assert "ready 127.0.0.1:4321" in text
    assert "kubeconfig /n/coredns/kubeconfig" in text
    # No forwarder: any other name is REFUSED by CoreDNS itself, in the root zone's block.
    assert "forward" not in text and "proxy" not in text
    root = text[text.index("\n.:53 {") :]
    assert "bind 10.244.0.1" in root
    assert "acl {\n        block\n    }" in root
    assert "kubernetes" not in root


def test_the_add_ons_may_only_read() -> None:
    readers = (("coredns", config.COREDNS_RULES), ("kube-router", config.KUBE_ROUTER_RULES))
    for name, rules in readers:
        objects = config.identity_objects(name, rules)
        kinds = [o["kind"] for o in objects]
        assert kinds == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"]
        verbs = {verb for rule in objects[1]["rules"] for verb in rule["verbs"]}
        assert verbs <= {"get", "list", "watch"}, name
        subject = objects[2]["subjects"][0]
        assert subject == {"kind": "ServiceAccount", "name": name, "namespace": "kube-system"}
    coredns = {r for rule in config.COREDNS_RULES for r in rule["resources"]}
    assert coredns == {"services", "namespaces", "endpointslices"}
    assert not any("secrets" in rule["resources"] for rule in config.KUBE_ROUTER_RULES)


def test_kube_dns_points_at_coredns_on_the_node_and_is_left_to_us() -> None:
    service, endpoints = config.dns_service_objects("10.244.0.1")
    assert service["spec"]["clusterIP"] == config.DNS_SERVICE_IP
    assert "selector" not in service["spec"]
    assert endpoints["endpoints"][0]["addresses"] == ["10.244.0.1"]
    labels = endpoints["metadata"]["labels"]
    assert labels["kubernetes.io/service-name"] == "kube-dns"
    assert labels["endpointslice.kubernetes.io/managed-by"] != "endpointslice-controller.k8s.io"
    assert {p["protocol"] for p in endpoints["ports"]} == {"UDP", "TCP"}


def test_an_empty_filter_table_is_told_from_one_with_rules_or_chains() -> None:
    empty = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"
    assert config.filter_table_is_empty(empty)
    assert config.filter_table_is_empty("")
    assert not config.filter_table_is_empty(empty.replace("COMMIT", "-A INPUT -j DROP\nCOMMIT"))
    assert not config.filter_table_is_empty(empty.replace(":OUTPUT ACCEPT", ":OUTPUT DROP"))
    assert not config.filter_table_is_empty(empty + ":SOMEONE - [0:0]\n")
    assert not config.filter_table_is_empty(SAVED)
