"""A managed stdio server end to end, with real traffic on the path an operator takes.

The operator creates the Deployment; the test reads the Pod it produced back
from the API server and runs that Pod's containers — exactly their command,
arguments and environment — in a network namespace it owns, as a kubelet
would, and reports the Pod running. The endpoint controllers then point the
Service at the namespace's address, and the operator (running outside the
cluster, like from a laptop) probes the server through the API server's
service proxy. ``status.tools`` must list what a plain SDK client sees when it
talks to the same server over stdio.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_operator.adapter.core import child_initialize_params
from mcp_operator.controller.mcpserver.render import RenderSettings
from tests.support import kubelet, needs, peers, wire
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.objects import condition, eventually

pytestmark = [
    pytest.mark.e2e,
    needs.mark(kubelet.available()),
]

OPERATOR_IMAGE = RenderSettings().adapter_image
ENTRYPOINTS = {OPERATOR_IMAGE: [str(Path(sys.executable).with_name("mcp-operator"))]}


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
    "everything": lambda: [shutil.which("node") or "node", str(peers.SERVER_EVERYTHING), "stdio"],
    "time": lambda: [str(Path(sys.executable).with_name("mcp-server-time"))],
}


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_the_probe_reaches_a_managed_stdio_server_through_the_service_proxy(
    cluster: Cluster, operator: OperatorProcess, namespace: str, tmp_path: Path, server: str
) -> None:
    command = SERVERS[server]()
    expected = stdio_tools(command)
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
                    "image": "registry.example/mcp-server:1",
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
    pods = eventually(
        "the Pod",
        lambda: cluster.get_json(
            "-n", namespace, "pods", "-l", f"mcp-operator.dev/server={server}"
        )["items"],
    )
    pod = pods[0]

    def secret(name: str, key: str) -> str:
        data = cluster.get_json("-n", namespace, f"secret/{name}")["data"]
        return base64.b64decode(data[key]).decode()

    with kubelet.netns_host() as host:
        containers, mounts = kubelet.plan(
            pod["spec"], pod_ip=host.address, secret=secret, entrypoints=ENTRYPOINTS
        )
        by_name = {c["name"]: c for c in containers}
        assert by_name["server"]["argv"][3:] == command, "the server runs the user's command"
        assert by_name["server"]["env"]["GREETING"] == "hello-from-a-secret"
        host.run_pod(containers, mounts, tmp_path / "pod.log")
        kubelet.report_running(cluster.kubectl, namespace, pod["metadata"]["name"], host)

        def ready() -> dict[str, Any] | None:
            obj = cluster.get_json("-n", namespace, f"mcpserver/{server}")
            return obj if condition(obj, "Ready").get("status") == "True" else None

        try:
            obj = eventually("Ready", ready, timeout=60)
        finally:
            log = (tmp_path / "pod.log").read_text(errors="replace")
            print(f"--- pod log ---\n{log[-3000:]}")
            last = cluster.get_json("-n", namespace, f"mcpserver/{server}")
            print(f"--- status ---\n{last.get('status')}")
            kubelet.forget_node(cluster.kubectl, host)
    status = obj["status"]
    assert {t["originalName"] for t in status["tools"]} == expected, log[-3000:]
    assert {t["name"] for t in status["tools"]} == {f"{server}_{n}" for n in expected}
    assert condition(obj, "Deployed")["status"] == "True"
    assert status["url"] == f"http://{server}.{namespace}.svc.cluster.local:8080/mcp"
    assert "hello-from-a-secret" not in str(obj)
    # The Pod's log (the adapter's and the server's lines) holds no value of the Secret either.
    assert "hello-from-a-secret" not in log
