"""The local node's network add-ons, for real: cluster DNS and NetworkPolicy enforcement.

On the session's node (CoreDNS on the bridge address behind the ``kube-dns`` Service,
kube-router's firewall): a Pod resolves a Service's full and short names to its
ClusterIP and reaches it there; a name outside the cluster gets no answer at all (CoreDNS
refuses it itself: it has no forwarder, so the query never leaves the machine); a
default-deny ingress NetworkPolicy really drops traffic that worked just before, and a
policy allowing one podSelector lets exactly that Pod through again. On a node of its own
(``own_node``): the firewall's chains and ipsets are gone once the node stops, and the
cleanup every start runs removes those a killed kube-router left. The Pods run Debian's
static busybox alone (``nslookup``, ``nc``, ``httpd``), pushed to the node's registry.
"""

from __future__ import annotations

import os
import re
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_operator.dev import node_addons, node_addons_config
from mcp_operator.dev.cluster import ControlPlane
from tests.support import needs
from tests.support.cluster import Cluster
from tests.support.dns import DnsError, query_a
from tests.support.registry import Registry
from tests.support.waiting import eventually

BUSYBOX = Path("/bin/busybox")
NONROOT_UID = "65532"
PAGE = "served-by-web"
WEB_PORT = 8080

pytestmark = [
    pytest.mark.e2e,
    needs.mark(needs.real_node_missing()),
    needs.mark(node_addons.missing()),
    needs.mark(None if BUSYBOX.is_file() else "busybox-static missing: `make node-packages`"),
]


# ---------------------------------------------------------------- Pods and helpers


def push_busybox(registry: str, workdir: Path) -> str:
    """busybox alone, as a non-root numeric user, into ``registry``; its digest."""
    return Registry(backend=registry).push_image(
        "e2e/netdns-busybox",
        "1",
        {"/bin/busybox": BUSYBOX},
        entrypoint=["/bin/busybox"],
        cmd=[],
        user=NONROOT_UID,
        workdir=workdir,
    )


def web_from_friends() -> dict[str, Any]:
    """Ingress to the web Pod only from Pods labelled ``role=friend``, on its port."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "web-from-friends"},
        "spec": {
            "podSelector": {"matchLabels": {"app": "web"}},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [{"podSelector": {"matchLabels": {"role": "friend"}}}],
                    "ports": [{"protocol": "TCP", "port": WEB_PORT}],
                }
            ],
        },
    }


def dead(pid: int) -> bool:
    """The process is gone or a zombie (killed, not yet reaped by the node)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def only_enforcer(plane: ControlPlane) -> node_addons.NetworkPolicyEnforcer:
    assert plane.node is not None
    found = [
        a for a in plane.node.add_ons or [] if isinstance(a, node_addons.NetworkPolicyEnforcer)
    ]
    assert len(found) == 1, plane.node.add_ons
    return found[0]


@pytest.fixture(scope="module")
def busybox_image(node_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> str:
    """busybox alone, as a non-root numeric user, in the node's registry (by digest)."""
    registry = node_cluster.plane.registry
    digest = push_busybox(registry, tmp_path_factory.mktemp("netdns-image"))
    return f"{registry}/e2e/netdns-busybox@{digest}"


@pytest.fixture
def net_namespace(node_cluster: Cluster) -> Iterator[str]:
    name = f"net-{uuid.uuid4().hex[:10]}"
    node_cluster.kubectl("create", "namespace", name)
    yield name
    node_cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def busybox_pod(
    name: str, image: str, script: str, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """A long-running Pod as we make them (non-root, read-only root, no capabilities,
    RuntimeDefault) running ``script`` in busybox's shell; ``/www`` is writable."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "command": ["/bin/busybox", "sh", "-c", script],
                    "securityContext": {
                        "runAsNonRoot": True,
                        "readOnlyRootFilesystem": True,
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "volumeMounts": [{"name": "www", "mountPath": "/www"}],
                }
            ],
            "volumes": [{"name": "www", "emptyDir": {}}],
        },
    }


def web_server(image: str) -> dict[str, Any]:
    script = f"echo {PAGE} > /www/index.html && exec /bin/busybox httpd -f -p {WEB_PORT} -h /www"
    return busybox_pod("web", image, script, {"app": "web"})


def client(name: str, image: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    # `trap` so that the Pod stops at once when its namespace goes.
    return busybox_pod(name, image, "trap 'exit 0' TERM; while true; do sleep 1; done", labels)


def web_service() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"app": "web"},
            "ports": [{"name": "http", "port": 80, "targetPort": WEB_PORT}],
        },
    }


def running(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = eventually(
        f"Pod {name} Ready",
        lambda: cluster.get_json("-n", namespace, "pod", name),
        timeout=90,
        until=lambda p: any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in p.get("status", {}).get("conditions", [])
        ),
    )
    return found


def run_in(cluster: Cluster, namespace: str, pod: str, script: str) -> str:
    """What ``script`` prints (stdout and stderr) in the Pod's busybox shell, via the
    kubelet's exec API; its exit code is not judged here."""
    result = cluster.kubectl(
        "-n",
        namespace,
        "exec",
        pod,
        "--",
        "/bin/busybox",
        "sh",
        "-c",
        f"{script} 2>&1",
        check=False,
        timeout=30,
    )
    if "error:" in result.stderr and not result.stdout:
        raise AssertionError(f"kubectl exec in {pod} failed: {result.stderr}")
    return result.stdout


def fetch(cluster: Cluster, namespace: str, pod: str, address: str, port: int) -> str:
    """An HTTP GET from the Pod to ``address:port`` with busybox's nc (3 s at most)."""
    request = r"printf 'GET / HTTP/1.0\r\n\r\n'"
    return run_in(cluster, namespace, pod, f"{request} | /bin/busybox nc -w 3 {address} {port}")


def addresses_of(nslookup_output: str, name: str) -> list[str]:
    """The IPv4 addresses busybox's nslookup printed for ``name`` (not the server's)."""
    answers = nslookup_output.split(f"Name:\t{name}")[1:]
    found = []
    for answer in answers:
        found += re.findall(r"^Address: (\d+\.\d+\.\d+\.\d+)$", answer, re.MULTILINE)
    return found


# ---------------------------------------------------------------- cluster DNS


def test_a_pod_resolves_a_service_by_its_full_and_short_name_and_reaches_it(
    node_cluster: Cluster, net_namespace: str, busybox_image: str
) -> None:
    node_cluster.apply(net_namespace, web_server(busybox_image))
    node_cluster.apply(net_namespace, web_service())
    node_cluster.apply(net_namespace, client("client", busybox_image))
    running(node_cluster, net_namespace, "web")
    running(node_cluster, net_namespace, "client")
    cluster_ip = node_cluster.get_json("-n", net_namespace, "service", "web")["spec"]["clusterIP"]

    # The Pod's resolver is the kube-dns Service, with the cluster's search path.
    resolv = run_in(node_cluster, net_namespace, "client", "cat /etc/resolv.conf")
    assert f"nameserver {node_addons_config.DNS_SERVICE_IP}" in resolv
    assert f"search {net_namespace}.svc.cluster.local svc.cluster.local cluster.local" in resolv

    full = f"web.{net_namespace}.svc.cluster.local"
    looked_up = run_in(node_cluster, net_namespace, "client", f"/bin/busybox nslookup {full}")
    assert addresses_of(looked_up, full) == [cluster_ip], looked_up
    # The short name, through the search path (busybox prints the name it found).
    short = run_in(node_cluster, net_namespace, "client", "/bin/busybox nslookup web")
    assert addresses_of(short, full) == [cluster_ip], short

    answer = eventually(
        "the web Service to answer at its ClusterIP",
        lambda: fetch(node_cluster, net_namespace, "client", cluster_ip, 80),
        until=lambda text: PAGE in text,
    )
    assert "200 OK" in answer


def test_a_name_outside_the_cluster_gets_no_answer_from_off_the_machine(
    node_cluster: Cluster, net_namespace: str, busybox_image: str
) -> None:
    node = node_cluster.plane.node
    assert node is not None
    # CoreDNS itself, asked from the host: the cluster's names, and REFUSED for any other.
    assert query_a("kubernetes.default.svc.cluster.local", node.ip) == ["10.96.0.1"]
    for outside in ("example.com", "mcp-operator.dev", "localhost"):
        with pytest.raises(DnsError) as refused:
            query_a(outside, node.ip)
        assert refused.value.rcode == "REFUSED", outside

    # From a Pod: nothing resolves it (through the search path and then as it is).
    node_cluster.apply(net_namespace, client("client", busybox_image))
    running(node_cluster, net_namespace, "client")
    looked_up = run_in(node_cluster, net_namespace, "client", "/bin/busybox nslookup example.com")
    assert not addresses_of(looked_up, "example.com"), looked_up
    assert "REFUSED" in looked_up or "can't find" in looked_up.lower(), looked_up
    # CoreDNS answered the Pod's query itself: its log shows it refused (there is no forwarder).
    log = eventually(
        "CoreDNS to log the refused query",
        lambda: node.log("coredns").read_text(),
        until=lambda text: re.search(r'"A IN example\.com\. .*" REFUSED', text),
    )
    assert not re.search(r"example\.com\. .*NOERROR", log)


# ---------------------------------------------------------------- NetworkPolicy


def test_a_denying_network_policy_drops_traffic_and_a_pod_selector_lets_one_pod_through(
    node_cluster: Cluster, net_namespace: str, busybox_image: str
) -> None:
    node_cluster.apply(net_namespace, web_server(busybox_image))
    node_cluster.apply(net_namespace, client("friend", busybox_image, {"role": "friend"}))
    node_cluster.apply(net_namespace, client("stranger", busybox_image, {"role": "stranger"}))
    web_ip = running(node_cluster, net_namespace, "web")["status"]["podIP"]
    running(node_cluster, net_namespace, "friend")
    running(node_cluster, net_namespace, "stranger")

    def served(pod: str) -> bool:
        return PAGE in fetch(node_cluster, net_namespace, pod, web_ip, WEB_PORT)

    # Before any policy both reach the web Pod.
    assert eventually("the friend to reach the web Pod", lambda: served("friend"))
    assert eventually("the stranger to reach the web Pod", lambda: served("stranger"))

    node_cluster.apply(
        net_namespace,
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "default-deny-ingress"},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
        },
    )
    eventually("the denying policy to drop the friend's traffic", lambda: not served("friend"))
    assert not served("stranger")
    assert not served("friend")  # and it stays dropped

    node_cluster.apply(net_namespace, web_from_friends())
    eventually("the allowing policy to let the friend through", lambda: served("friend"))
    assert not served("stranger")


# ---------------------------------------------------------------- a node of our own


@pytest.mark.own_node
def test_a_stopped_node_leaves_none_of_the_firewalls_chains_or_ipsets(tmp_path: Path) -> None:
    with ControlPlane(node=True) as plane:
        cluster = Cluster(plane)
        assert plane.node is not None
        digest = push_busybox(plane.registry, tmp_path)
        cluster.apply("default", web_server(f"{plane.registry}/e2e/netdns-busybox@{digest}"))
        running(cluster, "default", "web")
        cluster.apply("default", web_from_friends())
        # The other side: while the node runs, its Pod's chain and the policy's ipsets exist.
        present = eventually(
            "kube-router to program the policy",
            lambda: "\n".join(node_addons.firewall_leftovers()),
            until=lambda text: "iptables chain KUBE-POD-FW-" in text and "ipset KUBE-" in text,
        )
        assert "iptables chain KUBE-ROUTER-FORWARD" in present
        enforcer = only_enforcer(plane)
    # Read by the stop itself while the node still held the lock (another node may start
    # the moment it lets go, with chains of its own).
    assert enforcer.left_behind == []


@pytest.mark.own_node
def test_the_cleanup_a_node_start_runs_takes_back_what_a_killed_kube_router_left(
    tmp_path: Path,
) -> None:
    # Under this node's own lock, so that no other node's start can take them back first:
    # kube-router killed (as a killed run kills it, no stop), then the add-on's part of the
    # cleanup that every node start runs before anything else (`Node.prepare`).
    with ControlPlane(node=True) as plane:
        cluster = Cluster(plane)
        enforcer = only_enforcer(plane)
        digest = push_busybox(plane.registry, tmp_path)
        cluster.apply("default", web_server(f"{plane.registry}/e2e/netdns-busybox@{digest}"))
        running(cluster, "default", "web")
        cluster.apply("default", web_from_friends())
        programmed = eventually(
            "kube-router to program the policy (the Pod's chain and the policy's ipsets)",
            node_addons.firewall_leftovers,
            until=lambda found: (
                any("KUBE-POD-FW-" in item for item in found)
                and any(item.startswith("ipset KUBE-") for item in found)
            ),
        )
        pod_chain = next(item for item in programmed if "KUBE-POD-FW-" in item)
        pid = enforcer.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        eventually("kube-router to be gone", lambda: dead(pid))
        # The kill removed nothing.
        assert pod_chain in node_addons.firewall_leftovers()

        assert plane.node is not None
        enforcer.clean_leftovers(plane.node)
        assert pod_chain in enforcer.taken_back, enforcer.taken_back
        assert any(item.startswith("ipset KUBE-") for item in enforcer.taken_back)
        assert node_addons.firewall_leftovers() == []
    assert enforcer.left_behind == []
