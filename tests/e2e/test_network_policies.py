"""The operator's NetworkPolicies on the real node, where kube-router enforces them.

Every attempt is a real TCP connection between Pods of the session's node (busybox's
``nc`` in Pods as we make them, as in ``test_node_network.py``), judged side by side with
one that must succeed at the same moment, so that a failure can only be the policy's:

- a managed server's Pods take connections on their serving port only from AgentRun Pods
  of the namespaces the server permits (and the operator's probe, which makes the server
  Ready): an AgentRun-labelled Pod of a namespace the server does not permit, and a Pod
  without the label in the server's own namespace, get no connection, while a permitted
  one does; a port of the Pod other than the serving one (an HTTP-native server's own,
  behind its front) is reachable from no other Pod at all;
- with the operator's policies turned off (``--network-policies=disabled``) the operator
  removes its policy and the stranger's connection is made — and its MCP request without a
  token is refused with a 401 by the server's adapter (docs/security.md: the token is the
  line that holds without the network's);
- an AgentRun with restricted egress resolves names through the cluster's DNS and reaches
  its server, and cannot reach another Pod that any unrestricted Pod reaches.

kube-router rejects what a policy does not allow (an ICMP port-unreachable, so ``nc`` sees
a refusal at once) rather than dropping it silently; the tests assert what is true on this
node: no connection where the policy says no, a connection where it says yes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from mcp_operator.controller.mcpserver.containers import FRONT_PORT
from mcp_operator.dev.cluster import DEV_IDENTITY
from tests.e2e.test_node_network import busybox_pod, client, fetch, push_busybox, run_in
from tests.support import needs, pods
from tests.support.cluster import Cluster, OperatorProcess, operator_process
from tests.support.objects import agentrun, condition, eventually, get, mcpserver, ready

pytestmark = [pytest.mark.e2e, needs.mark(needs.real_node_missing())]

SERVING_PORT = 8080
OWN_PORT = 9090
"""A second listener in the HTTP-native server's Pod: what its own port is behind a front."""
EVERYTHING = "/app/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
RUN_LABEL = "mcp-operator.dev/agent-run"


@contextmanager
def operator(
    cluster: Cluster, images: dict[str, str], namespace: str, log: Path, *extra: str
) -> Iterator[OperatorProcess]:
    """The operator on this machine for ``namespace``, as ``node_operator`` starts it, with
    ``extra`` flags; the node's DNS is CoreDNS on the node's bridge address, not a Pod."""
    node = cluster.plane.node
    assert node is not None
    registry_host = cluster.plane.registry
    with operator_process(
        "--verbose",
        f"--namespace={namespace}",
        f"--adapter-image={images['mcp-operator']}",
        f"--insecure-registries={registry_host}",
        f"--allowed-registries={registry_host}",
        "--no-leader-election",
        "--metrics=none",
        "--liveness=none",
        f"--dns-cidrs={node.ip}/32",
        "--private-destinations=labelled",
        # Whose tokens the probe presents to managed servers (the plane makes the account).
        f"--identity={DEV_IDENTITY}",
        *extra,
        env=cluster.env(),
        log_path=log,
    ) as running:
        yield running


@pytest.fixture
def busybox(node_cluster: Cluster, tmp_path: Path) -> str:
    registry = node_cluster.plane.registry
    workdir = tmp_path / "busybox"
    workdir.mkdir()
    digest = push_busybox(registry, workdir)
    return f"{registry}/e2e/netdns-busybox@{digest}"


@pytest.fixture
def other_namespaces(node_cluster: Cluster) -> Iterator[tuple[str, str]]:
    """A namespace the servers permit and one they do not."""
    names = (f"ok-{uuid.uuid4().hex[:8]}", f"no-{uuid.uuid4().hex[:8]}")
    for name in names:
        node_cluster.kubectl("create", "namespace", name)
    yield names
    for name in names:
        node_cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def connects(cluster: Cluster, namespace: str, pod: str, address: str, port: int) -> bool:
    """Whether a TCP connection from the Pod got an HTTP answer (any status)."""
    return "HTTP/1." in fetch(cluster, namespace, pod, address, port)


def post_mcp(cluster: Cluster, namespace: str, pod: str, address: str, host: str) -> str:
    """An MCP ``initialize`` POST without a token from the Pod to ``address``'s serving port,
    with the Service's ``host`` name (what the adapter's Host check admits); the raw answer."""
    body = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}'
    head = (
        f"POST /mcp HTTP/1.0\\r\\nHost: {host}\\r\\nContent-Type: application/json\\r\\n"
        f"Accept: application/json, text/event-stream\\r\\nContent-Length: {len(body)}\\r\\n\\r\\n"
    )
    request = f"printf '{head}{body}'"
    command = f"{request} | /bin/busybox nc -w 3 {address} {SERVING_PORT}"
    return run_in(cluster, namespace, pod, command)


def ready_pod(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    return pods.wait_for_pod(cluster, namespace, name, pods.is_ready, "Ready", timeout=120)


def server_pod_ip(cluster: Cluster, namespace: str, server: str) -> str:
    """The address of the server's Pod once it is Ready (the kubelet's probes come from the
    Pod's own node, which kube-router always lets in)."""
    pod = pods.only_pod(cluster, namespace, f"mcp-operator.dev/server={server}", timeout=120)
    ready = ready_pod(cluster, namespace, pod["metadata"]["name"])
    return str(ready["status"]["podIP"])


def test_a_managed_server_takes_connections_only_from_permitted_runs_on_its_serving_port(
    node_cluster: Cluster,
    node_images: dict[str, str],
    node_namespace: str,
    other_namespaces: tuple[str, str],
    busybox: str,
    tmp_path: Path,
) -> None:
    cluster, namespace = node_cluster, node_namespace
    permitted, stranger = other_namespaces
    access = {"namespaces": [permitted]}
    # An HTTP-native server with a second listener: behind a front, its own port.
    both_ports = (
        f"PORT={OWN_PORT} node {EVERYTHING} streamableHttp & "
        f"PORT={SERVING_PORT} exec node {EVERYTHING} streamableHttp"
    )
    with operator(cluster, node_images, namespace, tmp_path / "operator.log"):
        cluster.apply(
            namespace,
            mcpserver(
                "ev",
                mode="managed",
                access=access,
                deployment={"image": node_images["server-everything"]},
            ),
        )
        cluster.apply(
            namespace,
            mcpserver(
                "web",
                mode="managed",
                transport="streamable-http",
                access=access,
                deployment={
                    "image": node_images["server-everything"],
                    "command": ["/bin/sh", "-c", both_ports],
                    "port": SERVING_PORT,
                },
            ),
        )
        run_pod = {RUN_LABEL: "stand-in"}
        cluster.apply(permitted, client("friend", busybox, run_pod))
        cluster.apply(stranger, client("stranger", busybox, run_pod))
        cluster.apply(namespace, client("neighbour", busybox))
        for where, pod in ((permitted, "friend"), (stranger, "stranger"), (namespace, "neighbour")):
            ready_pod(cluster, where, pod)

        # The operator's probe (through the API server's service proxy) is let in.
        ready(cluster, namespace, "mcpserver", "ev", timeout=180)
        policy = eventually(
            "the server's NetworkPolicy",
            lambda: get(cluster, namespace, "networkpolicy", "ev"),
            timeout=60,
        )
        assert policy["metadata"]["ownerReferences"][0]["kind"] == "MCPServer"
        posture = eventually(
            "the NetworkPolicy condition",
            lambda: condition(get(cluster, namespace, "mcpserver", "ev"), "NetworkPolicy"),
            timeout=60,
            until=lambda c: c.get("reason") == "Restricted",
        )
        assert posture["status"] == "True", posture

        ev_ip = server_pod_ip(cluster, namespace, "ev")
        web_ip = server_pod_ip(cluster, namespace, "web")
        eventually(
            "the permitted run's Pod to reach the server's Pod",
            lambda: connects(cluster, permitted, "friend", ev_ip, SERVING_PORT),
            timeout=90,
        )
        # At the same moment, side by side: the permitted Pod connects, the others do not.
        assert connects(cluster, permitted, "friend", ev_ip, SERVING_PORT)
        assert not connects(cluster, stranger, "stranger", ev_ip, SERVING_PORT)
        assert not connects(cluster, namespace, "neighbour", ev_ip, SERVING_PORT)
        print("what the stranger saw:", fetch(cluster, stranger, "stranger", ev_ip, SERVING_PORT))

        # The HTTP-native server: its serving port (named mcp: the authenticating front's) for
        # the permitted Pod; the server's own port behind the front, and any other port of its
        # Pod, for nobody, while the Pod itself listens on them.
        eventually(
            "the permitted Pod to reach the HTTP-native server's front",
            lambda: connects(cluster, permitted, "friend", web_ip, FRONT_PORT),
            timeout=60,
        )
        assert not connects(cluster, permitted, "friend", web_ip, SERVING_PORT)
        assert not connects(cluster, permitted, "friend", web_ip, OWN_PORT)
        assert not connects(cluster, namespace, "neighbour", web_ip, OWN_PORT)
        web_pod = pods.only_pod(cluster, namespace, "mcp-operator.dev/server=web")
        listening = cluster.kubectl(
            "-n", namespace, "exec", web_pod["metadata"]["name"], "-c", "server", "--",
            "node", "-e",
            f"require('http').get('http://127.0.0.1:{OWN_PORT}/', r => "
            "{ console.log('answered', r.statusCode); process.exit(0) })",
            check=False,
        )  # fmt: skip
        assert "answered" in listening.stdout, listening

    # Turned off: the operator removes its own policy, and the stranger connects.
    with operator(
        cluster, node_images, namespace, tmp_path / "disabled.log", "--network-policies=disabled"
    ):
        eventually(
            "the operator to remove its NetworkPolicy",
            lambda: get(cluster, namespace, "networkpolicy", "ev") is None,
            timeout=120,
        )
        posture = eventually(
            "the NetworkPolicy condition to say Disabled",
            lambda: condition(get(cluster, namespace, "mcpserver", "ev"), "NetworkPolicy"),
            timeout=60,
            until=lambda c: c.get("reason") == "Disabled",
        )
        assert posture["status"] == "False"
        eventually(
            "the stranger to reach the server once nothing restricts it",
            lambda: connects(cluster, stranger, "stranger", ev_ip, SERVING_PORT),
            timeout=60,
        )
        # The connection is made, the call is not: the adapter wants a token.
        refused = post_mcp(cluster, stranger, "stranger", ev_ip, f"ev.{namespace}.svc")
        assert refused.startswith("HTTP/1.1 401"), refused
        # RFC 6750: no token presented, so a bare challenge (no error code).
        assert "www-authenticate: Bearer" in refused.lower().replace("bearer", "Bearer"), refused
        assert "a bearer token is required" in refused, refused
        assert connects(cluster, namespace, "neighbour", web_ip, OWN_PORT)


AGENT = f"""
trap 'exit 0' TERM
/bin/busybox nslookup kubernetes.default.svc.cluster.local 2>&1 | /bin/busybox sed 's/^/dns: /'
printf 'GET / HTTP/1.0\\r\\n\\r\\n' | /bin/busybox nc -w 3 "$SERVER_IP" {SERVING_PORT} \\
  | /bin/busybox head -1 | /bin/busybox sed 's/^/server: /'
printf 'GET / HTTP/1.0\\r\\n\\r\\n' | /bin/busybox nc -w 3 "$WEB_IP" {SERVING_PORT} \\
  | /bin/busybox head -1 | /bin/busybox sed 's/^/elsewhere: /'
echo done
"""


def everything_pod(image: str) -> dict[str, Any]:
    """server-everything serving Streamable HTTP in a Pod of its own (no policy selects it)."""
    pod = busybox_pod("everything", image, "", {"app": "everything"})
    container = pod["spec"]["containers"][0]
    container["command"] = ["node", EVERYTHING, "streamableHttp"]
    container["env"] = [{"name": "PORT", "value": str(SERVING_PORT)}]
    container["volumeMounts"] = [{"name": "www", "mountPath": "/tmp"}]
    pod["spec"]["securityContext"] = {"runAsUser": 65532, "runAsGroup": 65532}
    return pod


def test_a_restricted_agent_run_reaches_dns_and_its_server_and_nothing_else(
    node_cluster: Cluster,
    node_images: dict[str, str],
    node_namespace: str,
    other_namespaces: tuple[str, str],
    busybox: str,
    tmp_path: Path,
) -> None:
    cluster, namespace = node_cluster, node_namespace
    elsewhere = other_namespaces[1]
    web = f"echo up > /www/index.html && exec /bin/busybox httpd -f -p {SERVING_PORT} -h /www"
    cluster.apply(elsewhere, busybox_pod("web", busybox, web, {"app": "web"}))
    cluster.apply(elsewhere, client("probe", busybox))
    # The run's server: external to the operator (it runs no Pod for it), at a Pod address.
    cluster.apply(elsewhere, everything_pod(node_images["server-everything"]))
    web_ip = ready_pod(cluster, elsewhere, "web")["status"]["podIP"]
    server_ip = ready_pod(cluster, elsewhere, "everything")["status"]["podIP"]
    ready_pod(cluster, elsewhere, "probe")
    # Any Pod without a restriction reaches both.
    for address in (web_ip, server_ip):
        assert eventually(
            f"an unrestricted Pod to reach {address}",
            lambda a=address: connects(cluster, elsewhere, "probe", a, SERVING_PORT),
        )
    cluster.kubectl(
        "label", "namespace", namespace, "mcp-operator.dev/private-destinations=allowed"
    )
    with operator(
        cluster, node_images, namespace, tmp_path / "operator.log", "--agent-egress=restricted"
    ):
        url = f"http://{server_ip}:{SERVING_PORT}/mcp"
        cluster.apply(namespace, mcpserver("ev", mode="external", url=url))
        ready(cluster, namespace, "mcpserver", "ev", timeout=120)
        agent = {
            "image": busybox,
            "command": ["/bin/busybox", "sh", "-c", AGENT],
            "env": [
                {"name": "WEB_IP", "value": web_ip},
                {"name": "SERVER_IP", "value": server_ip},
            ],
        }
        cluster.apply(namespace, agentrun("agent", ["ev"], agent))
        pod = pods.wait_for_phase(cluster, namespace, "agent", "Succeeded", "Failed")
        log = pods.logs(cluster, namespace, "agent", "agent")
        print(f"--- agent ---\n{log}")
        assert pods.phase(pod) == "Succeeded", pods.describe(cluster, namespace, "agent")
        policy = get(cluster, namespace, "networkpolicy", "agent")
        assert policy is not None and policy["spec"]["policyTypes"] == ["Egress"]
        blocks = [
            p.get("ipBlock", {}).get("cidr") for r in policy["spec"]["egress"] for p in r["to"]
        ]
        assert f"{server_ip}/32" in blocks, policy
        status = get(cluster, namespace, "agentrun", "agent")
        posture = condition(status, "NetworkPolicy")
        assert (posture.get("status"), posture.get("reason")) == ("True", "Restricted"), posture
    # DNS answered through the policy, the server answered (the bridge reached it too: its
    # startup probe held the agent until then), and the other Pod did not.
    assert "dns: Address: 10.96.0.1" in log, log
    assert "server: HTTP/1." in log, log
    assert "elsewhere:" not in log, log
    assert "done" in log, log
    # The same Pod is still reachable from an unrestricted one.
    assert connects(cluster, elsewhere, "probe", web_ip, SERVING_PORT)
    assert run_in(cluster, elsewhere, "probe", "echo alive").strip() == "alive"
