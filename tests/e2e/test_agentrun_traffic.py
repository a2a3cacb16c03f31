"""An AgentRun end to end with real traffic: the Pods the operator wrote, run by the node.

The operator resolves two MCPServers of different protocol eras: a managed stdio
server-everything behind our adapter (legacy), from its image named alone, and an external
mcp-server-time on the SDK (2026-07-28); it writes the bridge configuration and the agent's
Pod. The node's kubelet runs both Pods: the managed server's as its Deployment made it (the
operator probes it through the API server's service proxy), then the agent's — the
``mcp-bridge`` native sidecar exactly as rendered (its command, its startup probe), reading
the ConfigMap as the kubelet mounted it and reaching the managed server by its Service name
(cluster DNS answers it), then the agent container: a program on the official Python SDK
client (the operator image's Python) that lists the tools behind ``$MCP_BRIDGE_URL`` and
calls them. mcp-server-time listens on this machine on the node's bridge address, so no
traffic leaves the machine. It runs twice: with the Python adapter and bridge, and with the
compiled data plane's (``--dataplane-image``: the operator renders it for the adapter and
for the run's bridge), the same assertions.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from mcp_operator.bridge.audit import tool_digest
from tests.support import peers, pods
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.objects import agentrun, condition, eventually, get, mcpserver, python_agent

pytestmark = pytest.mark.e2e

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


def the_agent(image: str) -> dict[str, Any]:
    """The run: it names no bridge image, the operator chooses."""
    bridge: dict[str, Any] = {"policy": {"pii": {"arguments": "block"}}}
    return agentrun(
        "agent",
        [{"name": "ev", "toolsDeny": ["get-sum"]}, "clock"],
        python_agent(image, AGENT, env=[{"name": "WORD", "value": SECRET_WORD}]),
        bridge=bridge,
    )


DATA_PLANES = {"python": "operator", "compiled": "dataplane"}
"""The image each data plane's adapter runs from: ``mcp-<this>``."""


def served_by(cluster: Cluster, namespace: str, server: str, image: str) -> None:
    """The server's adapter and init steps run ``image``, and its running adapter is that
    image's: with the compiled data plane, no shell starts in it (`kubectl exec` finds none)."""
    pod = pods.only_pod(cluster, namespace, f"mcp-operator.dev/server={server}")
    spec = pod["spec"]
    ours = [c for c in [*spec["initContainers"], *spec["containers"]] if c["name"] != "server"]
    assert {c["name"]: c["image"] for c in ours} == {
        "fifos": image,
        "stdio-exec": image,
        "adapter": image,
    }
    shell = cluster.kubectl(
        "exec",
        "-n",
        namespace,
        pod["metadata"]["name"],
        "-c",
        "adapter",
        "--",
        "sh",
        "-c",
        "id",
        check=False,
    )
    assert (shell.returncode == 0) == image.split("@")[0].endswith("/mcp-operator"), shell


def structured(result: dict[str, Any]) -> dict[str, Any]:
    assert result.get("isError") is True, result
    content: dict[str, Any] = result["structuredContent"]
    return content


@pytest.mark.parametrize("data_plane", ["python", "compiled"])
def test_an_agent_reaches_two_servers_of_both_eras_through_the_bridge_sidecar(
    node_cluster: Cluster,
    node_images: dict[str, str],
    node_operator: OperatorProcess,
    node_namespace: str,
    data_plane: str,
) -> None:
    cluster, namespace = node_cluster, node_namespace

    def ready(name: str) -> bool:
        return (
            condition(get(cluster, namespace, "mcpserver", name), "Ready").get("status") == "True"
        )

    with peers.mcp_server_time(host=cluster.plane.node.ip) as clock_url:
        cluster.apply(
            namespace,
            mcpserver(
                "ev",
                mode="managed",
                toolsAllow=["echo", "get-sum"],
                deployment={"image": node_images["server-everything"]},
            ),
        )
        # The clock listens on a private address (the node's bridge): the Namespace opts
        # in, as a platform team would for in-cluster servers.
        cluster.kubectl(
            "label", "namespace", namespace, "mcp-operator.dev/private-destinations=allowed"
        )
        cluster.apply(namespace, mcpserver("clock", mode="external", url=clock_url))
        for name in ("ev", "clock"):
            eventually(f"MCPServer {name} Ready", lambda n=name: ready(n), timeout=120)
        served_by(cluster, namespace, "ev", node_images[f"mcp-{DATA_PLANES[data_plane]}"])

        # The run names no bridge image: with --dataplane-image the operator renders the
        # compiled bridge, else its own image's Python one.
        cluster.apply(namespace, the_agent(node_images["mcp-operator"]))
        eventually("the agent Pod", lambda: get(cluster, namespace, "pod", "agent"))
        sidecar = next(
            c
            for c in get(cluster, namespace, "pod", "agent")["spec"]["initContainers"]
            if c["name"] == "mcp-bridge"
        )
        assert sidecar["image"] == node_images[f"mcp-{DATA_PLANES[data_plane]}"]
        service = f"ev.{namespace}.svc.cluster.local"
        config_map = get(cluster, namespace, "configmap", "agent-bridge")
        assert config_map is not None
        config = yaml.safe_load(config_map["data"]["config.yaml"])
        urls = {server["name"]: server["url"] for server in config["servers"]}
        assert urls == {"ev": f"http://{service}:8080/mcp", "clock": clock_url}
        finished = pods.finished_run(cluster, namespace, "agent")
        pod, agent_log, bridge_log = finished.pod, finished.agent_log, finished.bridge_log
        print(finished.show())
        assert pods.phase(pod) == "Succeeded"
        eventually(
            "the run Succeeded",
            lambda: (
                condition(get(cluster, namespace, "agentrun", "agent"), "Succeeded").get("status")
                == "True"
            ),
        )
    line = next(x for x in agent_log.splitlines() if x.startswith("AGENT-RESULT "))
    result = json.loads(line.removeprefix("AGENT-RESULT "))
    assert result["tools"] == ["clock_convert_time", "clock_get_current_time", "ev_echo"]
    assert result["echo"]["content"][0]["text"] == f"Echo: {SECRET_WORD}"
    assert "UTC" in result["time"]["content"][0]["text"]
    denied = structured(result["denied"])
    assert denied["code"] == "not_allowlisted" and "ev_echo" in denied["hint"]
    invalid = structured(result["invalid"])
    assert invalid["code"] == "invalid_arguments" and "message" in invalid["hint"]
    assert structured(result["pii"])["code"] == "pii_blocked"

    audit = [json.loads(x) for x in bridge_log.splitlines() if x.startswith("{")]
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
    assert not [x for x in bridge_log.splitlines() if SECRET_WORD in x or "alice@" in x]
