"""What only a real kubelet can answer about the Pods the operator renders.

On the cluster with its node (``node_cluster``), the operator on this machine renders the
Pods and the node's kubelet and containerd run them, from the images built from this
checkout and from a shell-less server image pushed to the node's registry:

- the bridge's startup probe holds the agent back: a slow upstream keeps the bridge unready
  for seconds, the kubelet's Events show the failing startup probe, the agent container is
  started after the bridge's Ready, and its first look at the bridge finds it ready;
- a read-only root filesystem refuses writes in every rendered container (the kernel's
  mount options from the node, a write tried inside), while ``/tmp`` takes them;
- ``runAsNonRoot`` with the image's numeric ``USER``: the server runs as that user, an image
  whose ``USER`` is root runs as 65532, no capability and seccomp on, as the kernel sees them;
- a managed server whose process dies: the adapter's ``/healthz`` goes red before the
  kubelet restarts the container (restart count still 0), then green again;
- a change of the bridge's ConfigMap reaches the running bridge through the kubelet's
  volume update, without a restart (the delay is measured and printed).

Every process check reads ``/proc`` of this machine, which is the node.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from mcp_operator.dev.processes import BIN_DIR
from tests.support import needs, peers, pods, registry
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.objects import agentrun, condition, eventually, mcpserver, python_agent, ready

pytestmark = [pytest.mark.e2e, needs.mark(needs.image_tools_missing())]

HELLO_PATH = "/server/mcp-hello-server"
BRIDGE_HEALTH = 7801
"""The bridge's health port: the default ``spec.bridge.port`` (7800) + 1."""
SLOW_SECONDS = 3.0
"""How long the slow upstream takes to answer each request."""

GATED_AGENT = """
import json, time, urllib.error, urllib.request
try:
    with urllib.request.urlopen("http://127.0.0.1:7801/readyz", timeout=5) as answer:
        status = answer.status
except urllib.error.HTTPError as error:
    status = error.code
print("AGENT-READYZ " + json.dumps({"status": status, "at": time.time()}), flush=True)
"""

WRITE_CHECK = """
import errno, json
out = {}
for path in ("/written-by-a-test", "/tmp/written-by-a-test"):
    try:
        with open(path, "w") as handle:
            handle.write("x")
        out[path] = "written"
    except OSError as error:
        out[path] = errno.errorcode[error.errno]
print("WRITES " + json.dumps(out), flush=True)
"""
WRITES = {"/written-by-a-test": "EROFS", "/tmp/written-by-a-test": "written"}
SLEEP = "import time; time.sleep(600)"


def push_hello(cluster: Cluster, workdir: Path, user: str) -> str:
    """The shell-less Go hello server as an image running as ``user``, in the node's
    registry; the reference names it alone (the operator reads its ENTRYPOINT and USER)."""
    local = registry.Registry(cluster.plane.registry)
    repository = f"tools/hello-{user.split(':')[0]}"
    local.push_image(
        repository,
        "1",
        {HELLO_PATH: BIN_DIR / "mcp-hello-server"},
        entrypoint=[HELLO_PATH],
        cmd=["stdio"],
        user=user,
        workdir=workdir,
    )
    return f"{local.backend}/{repository}:1"


def ready_server(cluster: Cluster, namespace: str, name: str, image: str) -> dict[str, Any]:
    """Apply the managed server ``name`` from ``image``; its Pod once the server is Ready."""
    cluster.apply(namespace, mcpserver(name, mode="managed", deployment={"image": image}))
    pod = pods.only_pod(cluster, namespace, f"mcp-operator.dev/server={name}")
    pod_name = pod["metadata"]["name"]
    ready(
        cluster,
        namespace,
        "mcpserver",
        name,
        explain=lambda: pods.describe(cluster, namespace, pod_name),
    )
    return pods.wait_for_pod(cluster, namespace, pod_name, pods.is_ready, "Ready")


def http_get(url: str) -> tuple[int, dict[str, Any]]:
    """Status and JSON body of a GET (an HTTP error status is an answer too)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


# -- the bridge's startup probe gates the agent ----------------------------------------------


def test_the_bridge_startup_probe_holds_the_agent_until_the_bridge_is_ready(
    node_cluster: Cluster,
    node_images: dict[str, str],
    node_operator: OperatorProcess,
    node_namespace: str,
) -> None:
    cluster, namespace = node_cluster, node_namespace
    # The slow server listens on the node's bridge address, a private one: the opt-in.
    cluster.kubectl(
        "label", "namespace", namespace, "mcp-operator.dev/private-destinations=allowed"
    )
    delay = str(SLOW_SECONDS)
    with peers.hostile_server("slow", "--delay", delay, host=cluster.plane.node.ip) as url:
        cluster.apply(
            namespace,
            mcpserver("slow", mode="external", url=url, probe={"timeoutSeconds": 60}),
        )
        eventually(
            "MCPServer slow Ready",
            lambda: (
                condition(cluster.get_json("-n", namespace, "mcpserver/slow"), "Ready").get(
                    "status"
                )
                == "True"
            ),
            timeout=120,
        )
        cluster.apply(
            namespace,
            agentrun("gated", ["slow"], python_agent(node_images["mcp-operator"], GATED_AGENT)),
        )
        pod = pods.wait_for_phase(cluster, namespace, "gated", "Succeeded", "Failed", timeout=180)
        agent_log = pods.logs(cluster, namespace, "gated", "agent")
    assert pods.phase(pod) == "Succeeded", pods.describe(cluster, namespace, "gated")
    bridge_started = pods.started_at(pod, "mcp-bridge")
    agent_started = pods.started_at(pod, "agent")
    initialized = pods.condition_time(pod, "Initialized")
    assert bridge_started and agent_started and initialized, pod["status"]
    held = agent_started - bridge_started
    print(f"\nbridge started {bridge_started}, Initialized {initialized}")
    print(f"agent started {agent_started}")
    print(f"the startup probe held the agent back {held.total_seconds():.0f} s")
    # The bridge's first listing takes two slow answers (initialize, tools/list); the
    # kubelet's times are whole seconds.
    assert held >= timedelta(seconds=2 * SLOW_SECONDS - 1), "the agent did not wait for the bridge"
    assert agent_started >= initialized
    assert pods.marked(agent_log, "AGENT-READYZ")["status"] == 200, (
        "the agent found the bridge unready"
    )
    events = cluster.get_json(
        "-n", namespace, "events", "--field-selector=involvedObject.name=gated,reason=Unhealthy"
    )["items"]
    failed = [e for e in events if "Startup probe failed" in e.get("message", "")]
    assert failed and all("mcp-bridge" in e["involvedObject"].get("fieldPath", "") for e in failed)


# -- read-only root, non-root users, capabilities ---------------------------------------------


def test_a_read_only_root_filesystem_refuses_writes_in_every_rendered_container(
    node_cluster: Cluster,
    node_images: dict[str, str],
    node_operator: OperatorProcess,
    node_namespace: str,
    tmp_path: Path,
) -> None:
    cluster, namespace = node_cluster, node_namespace
    server = ready_server(cluster, namespace, "hello", push_hello(cluster, tmp_path, "10001:10001"))
    cluster.apply(
        namespace,
        agentrun(
            "writer", ["hello"], python_agent(node_images["mcp-operator"], WRITE_CHECK + SLEEP)
        ),
    )
    run = pods.wait_for_pod(
        cluster,
        namespace,
        "writer",
        lambda pod: pods.container_status(pod, "agent").get("started") is True,
        "the agent started",
    )
    # The agent itself tried to write, as any agent program might.
    written = eventually(
        "the agent's writes",
        lambda: "WRITES " in pods.logs(cluster, namespace, "writer", "agent"),
    )
    assert written
    assert pods.marked(pods.logs(cluster, namespace, "writer", "agent"), "WRITES") == WRITES
    # Inside our own containers (the operator image has Python), tried through the kubelet.
    server_name = server["metadata"]["name"]
    for pod_name, container in ((server_name, "adapter"), ("writer", "mcp-bridge")):
        result = cluster.kubectl(
            "-n", namespace, "exec", pod_name, "-c", container, "--", "python", "-c", WRITE_CHECK
        )
        assert pods.marked(result.stdout, "WRITES") == WRITES, f"{pod_name}/{container}"
    # Every container, the shell-less server's included, as the kernel mounted its root.
    for pod, names in (
        (server, ("server", "adapter")),
        (pods.get_pod(cluster, namespace, "writer") or run, ("agent", "mcp-bridge")),
    ):
        for name in names:
            identity = pods.process_identity(pods.main_process(pod, name))
            assert "ro" in identity.root_options, f"{name}: / mounted {identity.root_options}"


def test_run_as_non_root_takes_the_images_numeric_user_and_nothing_runs_privileged(
    node_cluster: Cluster, node_operator: OperatorProcess, node_namespace: str, tmp_path: Path
) -> None:
    cluster, namespace = node_cluster, node_namespace
    numeric = ready_server(
        cluster, namespace, "hello", push_hello(cluster, tmp_path, "10001:10001")
    )
    rooted = ready_server(cluster, namespace, "rooted", push_hello(cluster, tmp_path, "0:0"))
    expected = {
        # The image's own non-root USER, read from its registry by the operator.
        (0, "server"): (10001, 10001),
        # An image whose USER is root keeps the Pod's non-root 65532.
        (1, "server"): (65532, 65532),
        (0, "adapter"): (65532, 65532),
        (1, "adapter"): (65532, 65532),
    }
    seen = {}
    for index, name in expected:
        pod = (numeric, rooted)[index]
        container = next(c for c in pod["spec"]["containers"] if c["name"] == name)
        assert container["securityContext"]["runAsNonRoot"] is True
        identity = pods.process_identity(pods.main_process(pod, name))
        seen[(index, name)] = (identity.uid, identity.gid)
        assert identity.capabilities == 0, f"{name}: capabilities {identity.status['CapEff']}"
        assert identity.status["NoNewPrivs"] == "1", name
        assert identity.status["Seccomp"] == "2", f"{name}: no seccomp filter"
    assert seen == expected


# -- a server that dies ---------------------------------------------------------------------


BURST_READS = 50
"""Reads of /healthz between two reads of the restart count (10 ms apart)."""


def test_a_managed_server_that_dies_turns_the_adapter_red_and_its_container_is_restarted(
    node_cluster: Cluster, node_operator: OperatorProcess, node_namespace: str, tmp_path: Path
) -> None:
    cluster, namespace = node_cluster, node_namespace
    pod = ready_server(cluster, namespace, "hello", push_hello(cluster, tmp_path, "10001:10001"))
    name = pod["metadata"]["name"]
    healthz = f"http://{pod['status']['podIP']}:8080/healthz"
    assert http_get(healthz)[0] == 200
    assert pods.container_status(pod, "server")["restartCount"] == 0

    server_process = pods.main_process(pod, "server")
    killed = time.monotonic()
    # From the node, as an OOM kill would end it: the server's own process, PID 1 of its
    # container (mcp-stdio-exec became the server).
    os.kill(server_process, signal.SIGKILL)
    # Each sample pairs a /healthz status with the restart count read before it, so that red
    # with 0 restarts is red before the kubelet's restart was seen. A restart count is a
    # kubectl call (a few hundred ms on a loaded machine, as long as a first restart can
    # take): /healthz is read in a burst between two of them, until it is red.
    samples: list[tuple[float, int, int]] = []
    restarts = 0  # as read above, before the kill
    deadline = killed + 90
    while time.monotonic() < deadline:
        for _ in range(BURST_READS):
            code = http_get(healthz)[0]
            samples.append((time.monotonic() - killed, code, restarts))
            if code != 200 or restarts >= 1:
                break
            time.sleep(0.01)
        if restarts >= 1 and code == 200:
            break
        current = pods.get_pod(cluster, namespace, name) or {}
        restarts = int(pods.container_status(current, "server").get("restartCount", 0))
        time.sleep(0.05)
    first_red = next((s for s in samples if s[1] != 200), None)
    restarted = next((s for s in samples if s[2] >= 1), None)
    green = samples[-1]
    # (seconds after the kill, /healthz status, restart count)
    print(f"\n/healthz red {first_red}, restart seen {restarted}, green again {green}")
    assert first_red is not None, samples
    assert first_red[2] == 0, "the adapter's /healthz went red only after the kubelet restarted"
    assert restarted is not None and green[1] == 200, samples[-5:]
    status = pods.container_status(pods.get_pod(cluster, namespace, name) or {}, "server")
    assert status["lastState"]["terminated"]["exitCode"] == 137  # SIGKILL, as the kubelet saw it
    eventually(
        "MCPServer hello Ready after the restart",
        lambda: (
            condition(cluster.get_json("-n", namespace, "mcpserver/hello"), "Ready").get("status")
            == "True"
        ),
        timeout=60,
    )


# -- the ConfigMap reaches the running bridge -------------------------------------------------


def test_a_config_map_change_reaches_the_running_bridge_through_the_kubelet(
    node_cluster: Cluster,
    node_images: dict[str, str],
    node_operator: OperatorProcess,
    node_namespace: str,
) -> None:
    cluster, namespace = node_cluster, node_namespace
    # An external server on the node's bridge address (a private one: the opt-in), so that
    # nothing but the ConfigMap's way into the Pod is under test.
    cluster.kubectl(
        "label", "namespace", namespace, "mcp-operator.dev/private-destinations=allowed"
    )
    with peers.mcp_server_time(host=cluster.plane.node.ip) as url:
        cluster.apply(namespace, mcpserver("clock", mode="external", url=url))
        eventually(
            "MCPServer clock Ready",
            lambda: (
                condition(cluster.get_json("-n", namespace, "mcpserver/clock"), "Ready").get(
                    "status"
                )
                == "True"
            ),
            timeout=60,
        )
        cluster.apply(
            namespace,
            agentrun("watcher", ["clock"], python_agent(node_images["mcp-operator"], SLEEP)),
        )
        pod = pods.wait_for_pod(cluster, namespace, "watcher", pods.is_ready, "Ready")
        readyz = f"http://{pod['status']['podIP']}:{BRIDGE_HEALTH}/readyz"
        assert http_get(readyz)[1]["tools"] == 2  # get_current_time, convert_time

        def config() -> str:
            found = cluster.get_json("-n", namespace, "configmap/watcher-bridge")
            return str(found["data"]["config.yaml"])

        before = config()
        cluster.kubectl(
            "-n",
            namespace,
            "patch",
            "mcpserver/clock",
            "--type=merge",
            "-p",
            '{"spec": {"toolsDeny": ["convert_time"]}}',
        )
        eventually(
            "the operator rewrote the ConfigMap", lambda: config() != before, 60, interval=0.1
        )
        changed = time.monotonic()
        eventually(
            "the bridge serving the new configuration",
            lambda: http_get(readyz)[1].get("tools"),
            180,
            until=lambda tools: tools == 1,
            interval=0.2,
        )
        delay = time.monotonic() - changed
    print(f"\nConfigMap change to the running bridge: {delay:.1f} s (kubelet volume update)")
    after = pods.get_pod(cluster, namespace, "watcher") or {}
    assert after["metadata"]["uid"] == pod["metadata"]["uid"], "the Pod was replaced"
    assert pods.container_status(after, "mcp-bridge")["restartCount"] == 0, "the bridge restarted"
