"""No way around the bridge: on the real node, the agent of an AgentRun tries every way past
its bridge to a managed server that authenticates (the default), and only the bridge gets in.

The managed server is the Go SDK's hello server over stdio behind our adapter, with a
Secret-backed header; the operator runs on this machine (outside the cluster) and probes it
through the API server's service proxy with its own audience-bound token. The run's agent is
given, on purpose, what a careless platform might give it: a Kubernetes API token
(``automountServiceAccountToken``) and the right to mint tokens of its own ServiceAccount for
any audience. It then:

- calls the server's Service directly with no token: ``401``, and the adapter's own count of
  ``tools/call`` forwarded to its child says nothing reached it;
- calls it with the API token, and with a token it minted for another audience: refused;
- calls the same tool through ``MCP_BRIDGE_URL``: the bridge's call succeeds, and its audit
  line names the run Pod's identity;
- looks for the bridge's token where the bridge has it, and for the bridge's processes.

From this machine (which is the node) the test then reads the agent container's whole
filesystem and environment through ``/proc/<pid>/root`` and ``/proc/<pid>/environ`` and finds
no token of any server's audience and no Secret-backed header value, while the same search in
the bridge container finds both (so the search can find them).

A second test deletes a run Pod and measures how long its bridge's token (taken from the
bridge container's filesystem) is still accepted: the operator adds the Pod's uid to the
server's revoked Pods, and the kubelet brings the ConfigMap to the adapter.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import jwt
import pytest

from tests.e2e.test_real_node import push_hello
from tests.support import needs, pods, scraper
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.objects import agentrun, eventually, mcpserver, python_agent, ready

pytestmark = [pytest.mark.e2e, needs.mark(needs.image_tools_missing())]

AUDIENCE_PREFIX = "mcpserver.mcp-operator.dev/"
REVOCATION_WINDOW_SECONDS = 90
"""What docs/security.md promises: a deleted run Pod's token is refused within this long
(the operator's reconcile, then the kubelet's ConfigMap volume update)."""

AGENT = r"""
import json, os, ssl, urllib.error, urllib.request

SERVER = os.environ["SERVER_URL"]
BRIDGE = os.environ["MCP_BRIDGE_URL"]
API = "https://%s:%s" % (
    os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"])
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
UNVERIFIED = ssl._create_unverified_context()
out = {}

def post(url, body, token=None, headers=None, context=None):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    request.add_header("content-type", "application/json")
    request.add_header("accept", "application/json, text/event-stream")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    if token:
        request.add_header("authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            return answer.status, answer.headers, answer.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read().decode(errors="replace")
    except OSError as error:
        return None, {}, repr(error)

CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "greet", "arguments": {"name": "agent"}}}
MODERN = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "greet"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "agent", "version": "1"}}}

status, headers, _ = post(SERVER, INIT)
out["direct_initialize"] = {"status": status, "challenge": headers.get("WWW-Authenticate")}
status, _, _ = post(SERVER, CALL, headers=MODERN)
out["direct_call"] = status

api_token = open(SA_DIR + "/token").read().strip()
status, headers, _ = post(SERVER, CALL, token=api_token, headers=MODERN)
out["api_token_call"] = status
out["api_token_challenge"] = headers.get("WWW-Authenticate")

namespace = open(SA_DIR + "/namespace").read().strip()
minted = post(
    API + "/api/v1/namespaces/%s/serviceaccounts/%s/token" % (namespace, os.environ["ME"]),
    {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
     "spec": {"audiences": ["not-this-server"], "expirationSeconds": 600}},
    token=api_token, context=UNVERIFIED)
out["minted_status"] = minted[0]
other = json.loads(minted[2]).get("status", {}).get("token") if minted[0] == 201 else None
status, _, _ = post(SERVER, CALL, token=other, headers=MODERN) if other else (None, {}, "")
out["other_audience_call"] = status
forbidden = post(
    API + "/api/v1/namespaces/%s/serviceaccounts/%s/token" % (namespace, "default"),
    {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
     "spec": {"audiences": [os.environ["SERVER_AUDIENCE"]]}},
    token=api_token, context=UNVERIFIED)
out["mint_for_another_account"] = forbidden[0]

status, headers, _ = post(BRIDGE, INIT)
session = headers.get("mcp-session-id")
legacy = {"mcp-protocol-version": "2025-11-25", "mcp-session-id": session or ""}
post(BRIDGE, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=legacy)
bridged = dict(CALL, params={"name": "hello_greet", "arguments": {"name": "agent"}})
status, _, body = post(BRIDGE, bridged, headers=legacy)
out["bridge_call"] = {"status": status, "greeting": "Hi agent" in body}

out["bridge_token_dir_exists"] = os.path.exists("/var/run/mcp-bridge")
out["processes"] = sorted(
    open("/proc/%s/cmdline" % pid, "rb").read().replace(b"\0", b" ").decode(errors="replace")
    for pid in os.listdir("/proc") if pid.isdigit() and int(pid) != os.getpid()
)
print("AGENT-TRIES " + json.dumps(out), flush=True)
import time
time.sleep(600)
"""


def keyed_server(name: str, image: str, secret: str) -> dict[str, Any]:
    key = {"name": "X-Api-Key", "valueFrom": {"secretKeyRef": {"name": secret, "key": "key"}}}
    return mcpserver(name, mode="managed", deployment={"image": image}, headers=[key])


def tempted_agent(cluster: Cluster, namespace: str, account: str) -> None:
    """A ServiceAccount that may mint tokens of itself for any audience (on purpose)."""
    cluster.kubectl("-n", namespace, "create", "serviceaccount", account)
    cluster.kubectl(
        "-n", namespace, "label", "serviceaccount", account, "mcp-operator.dev/for-mcp-servers=true"
    )
    cluster.kubectl(
        "-n", namespace, "create", "role", f"{account}-mints",
        "--verb=create", "--resource=serviceaccounts/token", f"--resource-name={account}",
    )  # fmt: skip
    cluster.kubectl(
        "-n", namespace, "create", "rolebinding", f"{account}-mints",
        f"--role={account}-mints", f"--serviceaccount={namespace}:{account}",
    )  # fmt: skip


def jwt_audiences(text: str) -> list[str]:
    """The ``aud`` of every JWT-looking word of ``text``."""
    found: list[str] = []
    for word in text.replace('"', " ").split():
        if not word.startswith("eyJ"):
            continue
        try:
            claims = jwt.decode(word, options={"verify_signature": False})
        except jwt.InvalidTokenError:
            continue
        aud = claims.get("aud")
        found.extend(aud if isinstance(aud, list) else [str(aud)])
    return found


SKIPPED = ("proc", "sys", "dev")


def container_view(pid: int) -> tuple[list[str], set[str], str]:
    """What container ``pid`` can read: the audiences of every token in its filesystem and
    environment, every file's stripped content (small files), and its environment."""
    root = Path(f"/proc/{pid}/root")
    environment = Path(f"/proc/{pid}/environ").read_bytes().replace(b"\0", b"\n").decode()
    audiences = jwt_audiences(environment)
    contents: set[str] = set()
    for directory, dirs, files in os.walk(root, followlinks=False):
        relative = Path(directory).relative_to(root)
        if relative.parts[:1] and relative.parts[0] in SKIPPED:
            dirs[:] = []
            continue
        for name in files:
            path = Path(directory) / name
            try:
                if path.is_symlink() or not path.is_file() or path.stat().st_size > 64 * 1024:
                    continue
                text = path.read_bytes().decode(errors="replace")
            except OSError:
                continue
            contents.add(text.strip())
            if "eyJ" in text:
                audiences.extend(jwt_audiences(text))
    return audiences, contents, environment


def adapter_metric(cluster: Cluster, pod: dict[str, Any], name: str, **labels: str) -> float:
    """One sample of the adapter's /metrics, read from this machine (the node) as the
    scraper the operator lists (tests.support.scraper)."""
    url = f"http://{pod['status']['podIP']}:8080/metrics"
    status, text = scraper.scrape(url, scraper.token(cluster))
    assert status == 200, text
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            total += float(value)
    return total


def test_the_agent_cannot_go_around_its_bridge_and_holds_no_server_token(
    node_cluster: Cluster,
    node_images: dict[str, str],
    node_operator: OperatorProcess,
    node_namespace: str,
    tmp_path: Path,
) -> None:
    cluster, namespace = node_cluster, node_namespace
    header_value = f"header-{uuid.uuid4().hex}"
    cluster.kubectl(
        "-n", namespace, "create", "secret", "generic", "hello-key",
        f"--from-literal=key={header_value}",
    )  # fmt: skip
    cluster.kubectl(
        "-n", namespace, "label", "secret", "hello-key", "mcp-operator.dev/for-mcp-servers=true"
    )
    image = push_hello(cluster, tmp_path, "65532")
    cluster.apply(namespace, keyed_server("hello", image, "hello-key"))
    # Ready: the operator's probe got in, with its own token.
    server = ready(cluster, namespace, "mcpserver", "hello", timeout=180)
    assert server["status"]["access"]["authentication"] == "kubernetes"
    server_pod = pods.only_pod(cluster, namespace, "mcp-operator.dev/server=hello")

    tempted_agent(cluster, namespace, "tempted")
    audience = f"{AUDIENCE_PREFIX}{namespace}/hello"
    env = [
        {"name": "SERVER_URL", "value": server["status"]["url"]},
        {"name": "SERVER_AUDIENCE", "value": audience},
        {"name": "ME", "value": "tempted"},
    ]
    agent = python_agent(
        node_images["mcp-operator"],
        AGENT,
        serviceAccountName="tempted",
        automountServiceAccountToken=True,
        env=env,
    )
    cluster.apply(namespace, agentrun("sneaky", ["hello"], agent))
    pod = pods.wait_for_pod(cluster, namespace, "sneaky", pods.is_ready, "Ready", timeout=180)
    log = eventually(
        "the agent's report",
        lambda: pods.logs(cluster, namespace, "sneaky", "agent"),
        timeout=120,
        until=lambda text: "AGENT-TRIES " in text,
    )
    tries = pods.marked(log, "AGENT-TRIES")

    # Directly, with no token: refused by the auth layer, never a tool-level answer.
    assert tries["direct_initialize"]["status"] == 401, tries
    assert str(tries["direct_initialize"]["challenge"]).startswith("Bearer"), tries
    assert tries["direct_call"] == 401, tries
    # With the API token it was given, and with one it minted for another audience: refused.
    assert tries["api_token_call"] == 401, tries
    assert 'error="invalid_token"' in str(tries["api_token_challenge"]), tries
    assert tries["minted_status"] == 201, tries  # the power was there, on purpose
    assert tries["other_audience_call"] == 401, tries
    # It cannot mint a token of the server's audience for another account either.
    assert tries["mint_for_another_account"] == 403, tries
    # Its bridge's call goes through.
    assert tries["bridge_call"] == {"status": 200, "greeting": True}, tries
    assert tries["bridge_token_dir_exists"] is False, tries
    # It sees no process but its own (no shared process namespace): not the bridge's.
    assert tries["processes"] == [], tries["processes"]
    # Nothing of the agent's reached the child: one tools/call forwarded, the bridge's.
    assert adapter_metric(cluster, server_pod, "mcp_adapter_calls_total", method="tools/call") == 1
    assert adapter_metric(cluster, server_pod, "mcp_adapter_auth_refusals_total") >= 4

    # The bridge's audit line names who called.
    audit = [
        json.loads(line)
        for line in pods.logs(cluster, namespace, "sneaky", "mcp-bridge").splitlines()
        if line.startswith('{"time"')
    ]
    assert audit and audit[-1]["identity"] == {
        "namespace": namespace,
        "serviceAccount": "tempted",
        "pod": "sneaky",
    }

    # What the agent container can read, from the node: no server token, no header value.
    agent_audiences, agent_files, agent_env = container_view(pods.main_process(pod, "agent"))
    assert not [a for a in agent_audiences if a.startswith(AUDIENCE_PREFIX)], agent_audiences
    assert agent_audiences, "the search found not even the API token it was given"
    assert header_value not in agent_files and header_value not in agent_env
    # The same search in the bridge container finds both: the search is not blind.
    bridge_audiences, bridge_files, _ = container_view(pods.main_process(pod, "mcp-bridge"))
    assert audience in bridge_audiences
    assert header_value in bridge_files
    spec = (pods.get_pod(cluster, namespace, "sneaky") or {})["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert not spec.get("shareProcessNamespace")


def test_a_deleted_run_pods_token_is_refused_within_the_documented_window(
    node_cluster: Cluster,
    node_images: dict[str, str],
    node_operator: OperatorProcess,
    node_namespace: str,
    tmp_path: Path,
) -> None:
    cluster, namespace = node_cluster, node_namespace
    image = push_hello(cluster, tmp_path, "65532")
    cluster.apply(namespace, mcpserver("hello", mode="managed", deployment={"image": image}))
    ready(cluster, namespace, "mcpserver", "hello", timeout=180)
    server_pod = pods.only_pod(cluster, namespace, "mcp-operator.dev/server=hello")
    sleeper = python_agent(node_images["mcp-operator"], "import time; time.sleep(600)")
    cluster.apply(namespace, agentrun("brief", ["hello"], sleeper))
    pod = pods.wait_for_pod(cluster, namespace, "brief", pods.is_ready, "Ready", timeout=180)
    bridge = pods.main_process(pod, "mcp-bridge")
    # /var/run is a link to /run in the image: read through the container's own /run.
    token_path = Path(f"/proc/{bridge}/root/run/mcp-bridge/tokens/{namespace}/hello/token")
    token = token_path.read_text().strip()
    url = f"http://{server_pod['status']['podIP']}:8080/mcp"

    def status() -> int:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
        request.add_header("content-type", "application/json")
        request.add_header("accept", "application/json, text/event-stream")
        request.add_header("authorization", f"Bearer {token}")
        request.add_header("host", f"hello.{namespace}.svc.cluster.local:8080")
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as error:
            return int(error.code)

    assert status() == 200, "the bridge's token is accepted while its Pod runs"
    cluster.kubectl("-n", namespace, "delete", "pod", "brief", "--wait=true", timeout=120)
    deleted = time.monotonic()
    eventually(
        "the deleted Pod's token refused",
        status,
        timeout=REVOCATION_WINDOW_SECONDS + 30,
        until=lambda code: code == 401,
        interval=0.5,
    )
    window = time.monotonic() - deleted
    print(f"\nA deleted run Pod's token was refused {window:.1f} s after the Pod was gone")
    assert window <= REVOCATION_WINDOW_SECONDS
    access = cluster.get_json("-n", namespace, "configmap/hello-access")
    revoked = json.loads(access["data"]["access.json"])["revokedPods"]
    assert pod["metadata"]["uid"] in revoked
