"""A managed stdio server end to end, with real traffic on the path an operator takes.

The operator creates the Deployment; the node's kubelet runs its Pod from the images built
from this checkout (the adapter, the FIFO and mcp-stdio-exec init containers) and the
server's own image, and the endpoint controllers point the Service at the Pod. The
operator, running outside the cluster like from a laptop, probes the server through the
API server's service proxy. ``status.tools`` must list what a plain SDK client sees when
it talks to the same server over stdio.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_operator.adapter.core import child_initialize_params
from tests.support import peers, pods, registry, wire
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.objects import condition, eventually

pytestmark = pytest.mark.e2e


def stdio_tools(command: list[str]) -> set[str]:
    """The tools the server lists over plain stdio to a client that declares what the
    adapter declares to its child (server-everything shows some tools only to clients
    that can answer sampling, elicitation or roots requests)."""
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdin is not None and process.stdout is not None

    def call(message: dict[str, Any]) -> dict[str, Any]:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(message).encode() + b"\n")
        process.stdin.flush()
        while True:
            answer = json.loads(process.stdout.readline())
            if answer.get("id") == message.get("id"):
                return dict(answer)

    try:
        call(wire.request("initialize", child_initialize_params()))
        process.stdin.write(json.dumps(wire.initialized()).encode() + b"\n")
        names: set[str] = set()
        cursor = None
        for page in range(2, 100):
            params = {"cursor": cursor} if cursor is not None else {}
            result = call({"jsonrpc": "2.0", "id": page, "method": "tools/list", "params": params})[
                "result"
            ]
            names |= {tool["name"] for tool in result["tools"]}
            cursor = result.get("nextCursor")
            if cursor is None:
                return names
        raise AssertionError("the server's tool list did not end")
    finally:
        process.kill()
        process.wait()


SERVERS = {
    # name: (its image in node_images, the same server run here over stdio)
    "everything": (
        "server-everything",
        lambda: [shutil.which("node") or "node", str(peers.SERVER_EVERYTHING), "stdio"],
    ),
    "time": ("mcp-server-time", lambda: [str(Path(sys.executable).with_name("mcp-server-time"))]),
}


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_the_probe_reaches_a_managed_stdio_server_through_the_service_proxy(
    node_cluster: Cluster,
    node_images: dict[str, str],
    node_operator: OperatorProcess,
    node_namespace: str,
    server: str,
) -> None:
    cluster, namespace = node_cluster, node_namespace
    image_name, here = SERVERS[server]
    expected = stdio_tools(here())
    image = node_images[image_name]
    # The user's command: the one the image would run, written out.
    command = registry.image_argv(image)
    cluster.kubectl(
        "-n",
        namespace,
        "create",
        "secret",
        "generic",
        "greeting",
        "--from-literal=value=hello-from-a-secret",
    )
    cluster.kubectl(
        "-n", namespace, "label", "secret", "greeting", "mcp-operator.dev/for-mcp-servers=true"
    )
    cluster.apply(
        namespace,
        {
            "apiVersion": "mcp-operator.dev/v1alpha1",
            "kind": "MCPServer",
            "metadata": {"name": server},
            "spec": {
                "mode": "managed",
                "toolsPrefix": server,
                "deployment": {
                    "image": image,
                    "command": command,
                    "env": [
                        {
                            "name": "GREETING",
                            "valueFrom": {"secretKeyRef": {"name": "greeting", "key": "value"}},
                        }
                    ],
                },
                "probe": {"intervalSeconds": 10, "timeoutSeconds": 5},
            },
        },
    )

    def ready() -> dict[str, Any] | None:
        obj = cluster.get_json("-n", namespace, f"mcpserver/{server}")
        return obj if condition(obj, "Ready").get("status") == "True" else None

    pod = pods.only_pod(cluster, namespace, f"mcp-operator.dev/server={server}")
    name = pod["metadata"]["name"]
    try:
        obj = eventually(
            "Ready", ready, timeout=120, explain=lambda: pods.describe(cluster, namespace, name)
        )
        pod = pods.wait_for_phase(cluster, namespace, name, "Running")
        log = "\n".join(pods.logs(cluster, namespace, name, c) for c in ("adapter", "server"))
    finally:
        last = cluster.get_json("-n", namespace, f"mcpserver/{server}")
        print(f"--- status ---\n{last.get('status')}")
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "server")
    assert container["command"][3:] == command, "the server runs the user's command"
    running = pods.process_identity(pods.main_process(pod, "server"))
    assert running.environ["GREETING"] == "hello-from-a-secret"
    status = obj["status"]
    assert {t["originalName"] for t in status["tools"]} == expected, log[-3000:]
    assert {t["name"] for t in status["tools"]} == {f"{server}_{n}" for n in expected}
    assert condition(obj, "Deployed")["status"] == "True"
    assert status["url"] == f"http://{server}.{namespace}.svc.cluster.local:8080/mcp"
    assert "hello-from-a-secret" not in str(obj)
    # The Pod's log (the adapter's and the server's lines) holds no value of the Secret either.
    assert "hello-from-a-secret" not in log


def test_a_per_session_managed_server_starts_a_server_process_per_session_in_its_pod(
    node_cluster: Cluster,
    node_images: dict[str, str],
    node_operator: OperatorProcess,
    node_namespace: str,
) -> None:
    """``sessions: perSession``: the server container runs the helper's ``--spawn-socket``
    mode and the adapter ``--child-per-session``; the probe's session gets a server process
    of its own in the server container (non-root, read-only root filesystem, the socket in
    the shared in-memory volume), and its tools are those of the server itself."""
    cluster, namespace = node_cluster, node_namespace
    image_name, here = SERVERS["everything"]
    expected = stdio_tools(here())
    image = node_images[image_name]
    cluster.apply(
        namespace,
        {
            "apiVersion": "mcp-operator.dev/v1alpha1",
            "kind": "MCPServer",
            "metadata": {"name": "isolated"},
            "spec": {
                "mode": "managed",
                "deployment": {
                    "image": image,
                    "command": registry.image_argv(image),
                    "sessions": "perSession",
                },
                "probe": {"intervalSeconds": 10, "timeoutSeconds": 10},
            },
        },
    )

    def ready() -> dict[str, Any] | None:
        obj = cluster.get_json("-n", namespace, "mcpserver/isolated")
        return obj if condition(obj, "Ready").get("status") == "True" else None

    pod = pods.only_pod(cluster, namespace, "mcp-operator.dev/server=isolated")
    name = pod["metadata"]["name"]
    obj = eventually(
        "Ready", ready, timeout=180, explain=lambda: pods.describe(cluster, namespace, name)
    )
    pod = pods.wait_for_phase(cluster, namespace, name, "Running")
    containers = {c["name"]: c for c in pod["spec"]["containers"]}
    assert containers["server"]["command"][1] == "--spawn-socket=/run/mcp/spawn.sock"
    assert "--child-per-session" in containers["adapter"]["args"]
    assert {t["originalName"] for t in obj["status"]["tools"]} == expected
