"""Only a bridge holds a key to a managed server, on the real node.

The attack of the review, kept: ``alice`` (impersonated) may manage MCPServers and AgentRuns
in her namespace and create Pods (the tenant policy requires it of whoever creates an
AgentRun), nothing more. She runs a Pod of her own that projects a token of the managed
server's audience and carries the run label, and calls the server with it.

- Without the bridge-key policy (what a namespace-scoped install cannot prevent) the kubelet
  mints the token, the NetworkPolicy admits her Pod and the adapter forwards her call: its
  own count of ``tools/call`` says so, and the server's ``Isolation`` condition says, before
  she tries, that this is possible.
- With the chart's bridge-key policy installed the API server refuses the same Pod, and the
  adapter's count does not move. Her AgentRun's bridge, created by the operator, still calls
  the server; ``exec`` into its ``mcp-bridge`` container is refused to her.
- ``/metrics`` of the run Pod's bridge: 401 from her Pod without a token, 403 with a token of
  her ServiceAccount for the metrics audience, 200 for the scraper the operator lists.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.test_no_way_around import adapter_metric
from tests.e2e.test_real_node import push_hello
from tests.support import needs, pods, scraper
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.objects import agentrun, condition, eventually, mcpserver, python_agent, ready

pytestmark = [pytest.mark.e2e, needs.mark(needs.image_tools_missing())]

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "mcp-operator"
ALICE = "alice"
OPERATOR_USER = "admin"
"""Who the operator runs as here (outside the cluster, the admin kubeconfig)."""

ATTACK = r"""
import json, os, urllib.error, urllib.request
token = open("/key/token").read().strip()
def post(url, body, headers):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    for name, value in {"content-type": "application/json",
                        "accept": "application/json, text/event-stream",
                        "authorization": "Bearer " + token, **headers}.items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")
call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "greet", "arguments": {"name": "alice"},
                   "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientCapabilities": {}}}}
import time
for attempt in range(90):  # the NetworkPolicy enforcer learns a new Pod's address in a while
    try:
        status, body = post(os.environ["SERVER_URL"], call, {
            "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
            "mcp-name": "greet"})
        break
    except urllib.error.URLError as error:
        status, body = None, repr(error)
        time.sleep(1)
print("ATTACK " + json.dumps({"status": status, "greeting": "Hi alice" in body}), flush=True)
time.sleep(600)
"""

SCRAPE = r"""
import sys, urllib.error, urllib.request
request = urllib.request.Request(sys.argv[1])
if len(sys.argv) > 2:
    request.add_header("authorization", "Bearer " + sys.argv[2])
try:
    print(urllib.request.urlopen(request, timeout=5).status)
except urllib.error.HTTPError as error:
    print(error.code)
"""

BRIDGE_AGENT = r"""
import json, os, urllib.request
def post(body, headers):
    request = urllib.request.Request(os.environ["MCP_BRIDGE_URL"], data=json.dumps(body).encode())
    request.add_header("content-type", "application/json")
    request.add_header("accept", "application/json, text/event-stream")
    for name, value in headers.items():
        request.add_header(name, value)
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.headers, answer.read().decode(errors="replace")
init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "agent", "version": "1"}}}
headers, _ = post(init, {})
legacy = {"mcp-protocol-version": "2025-11-25", "mcp-session-id": headers["mcp-session-id"]}
call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "hello_greet", "arguments": {"name": "agent"}}}
_, body = post(call, legacy)
print("BRIDGE " + json.dumps({"greeting": "Hi agent" in body}), flush=True)
import time
time.sleep(600)
"""


def tenant(cluster: Cluster, namespace: str) -> None:
    """alice: MCPServers and AgentRuns, creating Pods, exec (to show it refused); no
    serviceaccounts/token, no Secrets."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "alice"},
        "rules": [
            {
                "apiGroups": ["mcp-operator.dev"],
                "resources": ["mcpservers", "agentruns"],
                "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
            },
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get"]},
            {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]},
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "alice"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "alice"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": ALICE}],
    }
    cluster.apply(namespace, role)
    cluster.apply(namespace, binding)

    def can(*args: str) -> bool:
        answer = cluster.kubectl(
            "auth", "can-i", *args, f"--as={ALICE}", "-n", namespace, check=False
        )
        return answer.stdout.strip() == "yes"

    eventually("alice may create Pods", lambda: can("create", "pods"), 30)
    assert not can("create", "serviceaccounts", "--subresource=token")
    assert not can("get", "secrets")


def attack_pod(name: str, image: str, server_url: str, audience: str) -> dict[str, Any]:
    token = {"audience": audience, "expirationSeconds": 600, "path": "token"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"mcp-operator.dev/agent-run": "fake"}},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65532},
            "containers": [
                {
                    "name": "alice",
                    "image": image,
                    "command": ["python", "-c", ATTACK],
                    "env": [{"name": "SERVER_URL", "value": server_url}],
                    "volumeMounts": [{"name": "key", "mountPath": "/key", "readOnly": True}],
                }
            ],
            "volumes": [
                {"name": "key", "projected": {"sources": [{"serviceAccountToken": token}]}}
            ],
        },
    }


def as_alice(cluster: Cluster, namespace: str, *args: str, **kwargs: Any) -> Any:
    return cluster.kubectl(f"--as={ALICE}", "-n", namespace, *args, check=False, **kwargs)


def install_bridge_key_policy(cluster: Cluster, namespace: str, tmp_path: Path) -> str:
    """The chart's bridge-key policy for ``namespace``, exempting the operator's user here."""
    rendered = subprocess.run(
        [
            needs.helm(), "template", f"k-{namespace}", str(CHART), "--namespace", namespace,
            "--show-only", "templates/admission-bridge-keys.yaml",
            "--set", f"watchNamespaces={{{namespace}}}",
        ],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    documents = [d for d in yaml.safe_load_all(rendered) if d]
    policy = next(d for d in documents if d["kind"] == "ValidatingAdmissionPolicy")
    match = policy["spec"]["matchConditions"][0]
    match["expression"] = f'!(request.userInfo.username in ["{OPERATOR_USER}"])'
    path = tmp_path / "bridge-keys.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    cluster.kubectl("apply", "--server-side", "-f", str(path))
    return str(policy["metadata"]["name"])


def test_a_tenant_holds_no_key_where_the_policy_is_and_the_condition_says_so_where_not(
    node_cluster: Cluster,
    node_images: dict[str, str],
    node_operator: OperatorProcess,
    node_namespace: str,
    tmp_path: Path,
) -> None:
    cluster, namespace = node_cluster, node_namespace
    image = push_hello(cluster, tmp_path, "65532")
    cluster.apply(namespace, mcpserver("hello", mode="managed", deployment={"image": image}))
    server = ready(cluster, namespace, "mcpserver", "hello", timeout=180)
    server_pod = pods.only_pod(cluster, namespace, "mcp-operator.dev/server=hello")
    url, audience = server["status"]["url"], f"mcpserver.mcp-operator.dev/{namespace}/hello"
    tenant(cluster, namespace)

    def calls() -> float:
        return adapter_metric(cluster, server_pod, "mcp_adapter_calls_total", method="tools/call")

    assert calls() == 0

    # No bridge-key policy (this operator is not told of one): the condition says what
    # nobody prevents, and the attack of the review goes through.
    isolation = condition(server, "Isolation")
    assert (isolation["status"], isolation["reason"]) == ("False", "BridgeKeysUnguarded")
    assert f"create Pods in {namespace}" in isolation["message"]
    python = node_images["mcp-operator"]
    pod = attack_pod("alice-direct", python, url, audience)
    created = as_alice(cluster, namespace, "create", "-f", "-", input=json.dumps(pod))
    assert created.returncode == 0, created.stderr
    pods.wait_for_pod(cluster, namespace, "alice-direct", pods.is_ready, "Ready", 180)
    log = eventually(
        "alice's call",
        lambda: pods.logs(cluster, namespace, "alice-direct", "alice"),
        timeout=120,
        until=lambda text: "ATTACK " in text,
    )
    assert pods.marked(log, "ATTACK") == {"status": 200, "greeting": True}
    assert calls() == 1, "her call reached the server's process"

    # The chart's bridge-key policy: the same Pod is refused, and nothing more arrives.
    policy = install_bridge_key_policy(cluster, namespace, tmp_path)
    try:
        second = attack_pod("alice-again", python, url, audience)

        def refused() -> str | None:
            # A server-side dry run until the API server has loaded the policy.
            answer = as_alice(cluster, namespace, "create", "--dry-run=server", "-f", "-",
                              input=json.dumps(second))  # fmt: skip
            return str(answer.stderr) if answer.returncode != 0 else None

        eventually("the policy loaded", refused, 60)
        answer = as_alice(cluster, namespace, "create", "-f", "-", input=json.dumps(second))
        assert answer.returncode != 0, answer.stdout
        message = str(answer.stderr)
        assert f"ValidatingAdmissionPolicy '{policy}'" in message, message
        assert "only the operator may create Pod" in message
        assert pods.get_pod(cluster, namespace, "alice-again") is None
        assert calls() == 1

        # Her AgentRun: the operator creates its Pod, whose bridge calls the server.
        run = agentrun("honest", ["hello"], python_agent(python, BRIDGE_AGENT))
        applied = as_alice(cluster, namespace, "apply", "--server-side", "-f", "-",
                           input=json.dumps(run))  # fmt: skip
        assert applied.returncode == 0, applied.stderr
        run_pod = pods.wait_for_pod(cluster, namespace, "honest", pods.is_ready, "Ready", 180)
        bridged = eventually(
            "the bridge's call",
            lambda: pods.logs(cluster, namespace, "honest", "agent"),
            timeout=120,
            until=lambda text: "BRIDGE " in text,
        )
        assert pods.marked(bridged, "BRIDGE") == {"greeting": True}
        assert calls() == 2

        # exec into the bridge: refused to her (RBAC would let her).
        shell = as_alice(cluster, namespace, "exec", "honest", "-c", "mcp-bridge", "--", "true",
                         timeout=60)  # fmt: skip
        assert shell.returncode != 0 and "only the operator may exec" in shell.stderr, shell

        # The bridge's /metrics from another Pod (hers), and from the scraper.
        metrics = f"http://{run_pod['status']['podIP']}:7801/metrics"
        own = scraper.token(cluster, "default", namespace)
        for token, status in ((None, "401"), (own, "403")):
            argv = ["python", "-c", SCRAPE, metrics, *([token] if token else [])]
            seen = cluster.kubectl("-n", namespace, "exec", "alice-direct", "-c", "alice", "--",
                                   *argv, timeout=60)  # fmt: skip
            assert seen.stdout.strip() == status, (token is None, seen.stdout, seen.stderr)
        status, text = scraper.scrape(metrics, scraper.token(cluster))
        assert status == 200 and "mcp_bridge_calls_total" in text
    finally:
        cluster.kubectl("delete", "validatingadmissionpolicybinding,validatingadmissionpolicy",
                        policy, check=False)  # fmt: skip
