"""An AgentRun end to end with real traffic: the Pod the operator wrote, run as a kubelet would.

The operator resolves two MCPServers of different protocol eras: a managed stdio
server-everything behind our adapter (legacy), and an external mcp-server-time on
the SDK (2026-07-28); it writes the bridge configuration and the agent's Pod. The
test plays the kubelet for both Pods, in one network namespace it owns: the
managed server's Pod as its Deployment made it (the operator probes it through
the API server's service proxy), then the agent's Pod — the ``mcp-bridge`` native
sidecar exactly as rendered (its command, its startup probe), reading the
ConfigMap as mounted and reaching the managed server by its Service name (the
Pod's /etc/hosts answers it, as cluster DNS would), then the agent container: a
program on the official Python SDK client that lists the tools behind
``$MCP_BRIDGE_URL`` and calls them. mcp-server-time listens on the host side of
the namespace's veth pair, so no traffic leaves this machine's loopback and the
test-made namespace.
"""

from __future__ import annotations

import base64
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_operator.bridge.audit import tool_digest
from mcp_operator.controller.settings import AgentRenderSettings
from tests.support import kubelet, needs, peers
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.objects import condition, eventually

pytestmark = [pytest.mark.e2e, needs.mark(kubelet.available())]

OPERATOR_IMAGE = AgentRenderSettings().bridge_image
ENTRYPOINTS = {OPERATOR_IMAGE: [str(Path(sys.executable).with_name("mcp-operator"))]}
EVERYTHING = [shutil.which("node") or "node", str(peers.SERVER_EVERYTHING), "stdio"]
SECRET_WORD = "do-not-log-this-argument"

AGENT = """
import asyncio, json, os
from mcp import Client

async def call(client, name, arguments):
    result = await client.call_tool(name, arguments)
    return result.model_dump(by_alias=True, exclude_none=True)

async def main():
    out = {}
    async with Client(os.environ["MCP_BRIDGE_URL"], mode="auto", cache=None) as client:
        listed = await client.list_tools()
        out["era"] = client.protocol_version
        out["tools"] = sorted(tool.name for tool in listed.tools)
        out["echo"] = await call(client, "ev_echo", {"message": os.environ["WORD"]})
        out["time"] = await call(client, "clock_get_current_time", {"timezone": "UTC"})
        out["denied"] = await call(client, "ev_get-sum", {"a": 1, "b": 2})
        out["invalid"] = await call(client, "ev_echo", {"message": 42})
        out["pii"] = await call(client, "ev_echo", {"message": "write to alice@example.com"})
    print("AGENT-RESULT " + json.dumps(out), flush=True)

asyncio.run(main())
"""


def mcpserver(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "mcp-operator.dev/v1alpha1",
        "kind": "MCPServer",
        "metadata": {"name": name},
        "spec": spec,
    }


def agentrun() -> dict[str, Any]:
    return {
        "apiVersion": "mcp-operator.dev/v1alpha1",
        "kind": "AgentRun",
        "metadata": {"name": "agent"},
        "spec": {
            "mcpServers": [{"name": "ev", "toolsDeny": ["get-sum"]}, {"name": "clock"}],
            "agent": {
                "image": "registry.example/agent:1",
                "command": [sys.executable, "-c", AGENT],
                "env": [{"name": "WORD", "value": SECRET_WORD}],
            },
            "bridge": {"policy": {"pii": {"arguments": "block"}}},
        },
    }


def get(cluster: Cluster, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
    result = cluster.kubectl("-n", namespace, "get", "-o", "json", f"{kind}/{name}", check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def structured(result: dict[str, Any]) -> dict[str, Any]:
    assert result.get("isError") is True, result
    content: dict[str, Any] = result["structuredContent"]
    return content


def test_an_agent_reaches_two_servers_of_both_eras_through_the_bridge_sidecar(
    cluster: Cluster, operator: OperatorProcess, namespace: str, tmp_path: Path
) -> None:
    def config_map(name: str) -> dict[str, str]:
        found = get(cluster, namespace, "configmap", name)
        assert found is not None
        return dict(found["data"])

    def secret_data(name: str) -> dict[str, str]:
        found = get(cluster, namespace, "secret", name) or {"data": {}}
        return {k: base64.b64decode(v).decode() for k, v in found["data"].items()}

    def run_as_kubelet(pod: dict[str, Any], host: kubelet.NetnsHost, **extra: Any) -> Path:
        containers, mounts = kubelet.plan(
            pod["spec"],
            pod_ip=host.address,
            secret=lambda name, key: secret_data(name)[key],
            entrypoints=ENTRYPOINTS,
        )
        files = kubelet.volume_files(pod["spec"], config_map=config_map, secret_data=secret_data)
        log = tmp_path / f"{pod['metadata']['name']}.log"
        host.run_pod(containers, mounts, log, files, **extra)
        kubelet.report_running(cluster.kubectl, namespace, pod["metadata"]["name"], host)
        return log

    def ready(name: str) -> bool:
        return (
            condition(get(cluster, namespace, "mcpserver", name), "Ready").get("status") == "True"
        )

    with kubelet.netns_host() as host, peers.mcp_server_time(host=host.host_address) as clock_url:
        try:
            cluster.apply(
                namespace,
                mcpserver(
                    "ev",
                    mode="managed",
                    toolsAllow=["echo", "get-sum"],
                    deployment={"image": "registry.example/everything:1", "command": EVERYTHING},
                ),
            )
            # The clock listens on a private address (the test's network namespace): the
            # Namespace opts in, as a platform team would for in-cluster servers.
            cluster.kubectl(
                "label", "namespace", namespace, "mcp-operator.dev/private-destinations=allowed"
            )
            cluster.apply(namespace, mcpserver("clock", mode="external", url=clock_url))
            server_pod = eventually(
                "the managed server's Pod",
                lambda: cluster.get_json(
                    "-n", namespace, "pods", "-l", "mcp-operator.dev/server=ev"
                )["items"],
            )[0]
            run_as_kubelet(server_pod, host)
            for name in ("ev", "clock"):
                eventually(f"MCPServer {name} Ready", lambda n=name: ready(n), timeout=90)

            cluster.apply(namespace, agentrun())
            pod = eventually("the agent Pod", lambda: get(cluster, namespace, "pod", "agent"))
            service = f"ev.{namespace}.svc.cluster.local"
            config = yaml.safe_load(config_map("agent-bridge")["config.yaml"])
            urls = {server["name"]: server["url"] for server in config["servers"]}
            assert urls == {"ev": f"http://{service}:8080/mcp", "clock": clock_url}
            log = run_as_kubelet(pod, host, hosts={service: host.address})
            line = eventually(
                "the agent's result",
                lambda: next(
                    (x for x in log.read_text().splitlines() if x.startswith("AGENT-RESULT ")),
                    None,
                ),
                timeout=90,
                explain=lambda: log.read_text()[-3000:],
            )
            eventually(
                "the run Running",
                lambda: (
                    condition(get(cluster, namespace, "agentrun", "agent"), "Ready").get("reason")
                    == "Running"
                ),
            )
        finally:
            host.stop_pods()
            kubelet.forget_node(cluster.kubectl, host)

    result = json.loads(line.removeprefix("AGENT-RESULT "))
    assert result["tools"] == ["clock_convert_time", "clock_get_current_time", "ev_echo"]
    assert result["echo"]["content"][0]["text"] == f"Echo: {SECRET_WORD}"
    assert "UTC" in result["time"]["content"][0]["text"]
    denied = structured(result["denied"])
    assert denied["code"] == "not_allowlisted" and "ev_echo" in denied["hint"]
    invalid = structured(result["invalid"])
    assert invalid["code"] == "invalid_arguments" and "message" in invalid["hint"]
    assert structured(result["pii"])["code"] == "pii_blocked"

    audit = [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")]
    outcomes = [(a["tool"], a["outcome"]) for a in audit if "outcome" in a]
    # A name outside the run's catalog is never written, only its digest (issue 17's audit rule).
    assert ("ev_echo", "ok") in outcomes and ("(unknown)", "not_allowlisted") in outcomes
    unknown = next(a for a in audit if a.get("tool") == "(unknown)")
    assert unknown["toolSha256"] == tool_digest("ev_get-sum") and "ev_get-sum" not in str(audit)
    assert ("ev_echo", "invalid_arguments") in outcomes and ("ev_echo", "pii_blocked") in outcomes
    refused = [a for a in audit if a.get("outcome") not in (None, "ok")]
    assert refused and all(a["attempts"] == 0 for a in refused), "a refusal reached its upstream"
    assert SECRET_WORD not in json.dumps(audit) and "alice@" not in json.dumps(audit)
    # Nothing the bridge printed (logs and audit) holds an argument value.
    bridge_output = [
        x for x in log.read_text().splitlines() if not x.startswith(("AGENT-RESULT ", "[pod]"))
    ]
    assert not [x for x in bridge_output if SECRET_WORD in x or "alice@" in x]
