"""AgentRuns end to end on the real API server: resolution, ConfigMap, Pod, conditions.

The operator runs as ``mcp-operator run``; the referenced MCPServers are external
servers pointing at real MCP servers on loopback, so that they become Ready by a
real probe. No kubelet runs: the agent Pod stays Pending, which is what these
tests need (the Pod as written is the product here).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.support import peers
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.objects import condition, eventually

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def everything() -> Iterator[str]:
    with peers.server_everything() as url:
        yield url


@pytest.fixture(scope="module")
def time_server() -> Iterator[str]:
    with peers.mcp_server_time() as url:
        yield url


def mcpserver(name: str, url: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "mcp-operator.dev/v1alpha1",
        "kind": "MCPServer",
        "metadata": {"name": name},
        "spec": {"mode": "external", "url": url, **spec},
    }


def agentrun(name: str, *servers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "mcp-operator.dev/v1alpha1",
        "kind": "AgentRun",
        "metadata": {"name": name},
        "spec": {
            "mcpServers": list(servers),
            "agent": {"image": "registry.example/agent:1", "command": ["python", "-m", "agent"]},
            **spec,
        },
    }


def get(cluster: Cluster, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
    result = cluster.kubectl("-n", namespace, "get", "-o", "json", f"{kind}/{name}", check=False)
    if result.returncode != 0:
        return None
    obj: dict[str, Any] = json.loads(result.stdout)
    return obj


def has_condition(obj: dict[str, Any] | None, type_: str, status: str, reason: str) -> bool:
    found = condition(obj, type_)
    return found.get("status") == status and found.get("reason") == reason


def bridge_config(cluster: Cluster, namespace: str, run: str) -> dict[str, Any]:
    config_map = get(cluster, namespace, "configmap", f"{run}-bridge")
    assert config_map is not None
    config: dict[str, Any] = yaml.safe_load(config_map["data"]["config.yaml"])
    return config


def wait_ready_server(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    return eventually(
        f"MCPServer {name} Ready",
        lambda: (
            (obj := get(cluster, namespace, "mcpserver", name))
            and condition(obj, "Ready").get("status") == "True"
            and obj
        ),
        timeout=60,
    )


def test_a_run_with_two_servers_gets_its_configmap_and_pod_with_the_bridge_sidecar(
    cluster: Cluster, operator: OperatorProcess, namespace: str, everything: str, time_server: str
) -> None:
    cluster.apply(namespace, mcpserver("everything", everything, toolsAllow=["echo", "get-sum"]))
    cluster.apply(namespace, mcpserver("time", time_server, toolsPrefix="clock"))
    wait_ready_server(cluster, namespace, "everything")
    wait_ready_server(cluster, namespace, "time")
    cluster.apply(
        namespace,
        agentrun(
            "triage",
            {"name": "everything", "toolsDeny": ["get-sum"]},
            {"name": "time"},
            activeDeadlineSeconds=600,
        ),
    )
    run = eventually(
        "AgentRun triage resolved with a Pod",
        lambda: (
            (obj := get(cluster, namespace, "agentrun", "triage"))
            and has_condition(obj, "ServersResolved", "True", "Resolved")
            and obj.get("status", {}).get("podName")
            and obj
        ),
    )
    status = run["status"]
    assert status["configMapName"] == "triage-bridge"
    assert status["toolCount"] == 1 + 2  # echo, and mcp-server-time's two tools
    assert {(s["name"], s["ready"], s["prefix"]) for s in status["servers"]} == {
        ("everything", True, "everything"),
        ("time", True, "clock"),
    }
    assert has_condition(run, "Bridge", "True", "Enabled")
    assert has_condition(run, "Ready", "False", "PodPending")

    config = bridge_config(cluster, namespace, "triage")
    by_name = {s["name"]: s for s in config["servers"]}
    assert by_name["everything"]["url"] == everything
    assert by_name["everything"]["filters"] == [
        {"allow": ["echo", "get-sum"]},
        {"deny": ["get-sum"]},
    ]
    # The pins are original names (issue 17: keyed by server and original name).
    assert by_name["everything"]["tools"] == ["echo"]
    assert by_name["time"]["tools"] == ["convert_time", "get_current_time"]

    pod = get(cluster, namespace, "pod", "triage")
    assert pod is not None
    (bridge,) = pod["spec"]["initContainers"]
    assert bridge["name"] == "mcp-bridge" and bridge["restartPolicy"] == "Always"
    assert bridge["startupProbe"]["httpGet"]["path"] == "/readyz"
    (agent,) = pod["spec"]["containers"]
    assert {"name": "MCP_BRIDGE_URL", "value": "http://127.0.0.1:7800/mcp"} in agent["env"]
    assert pod["spec"]["activeDeadlineSeconds"] == 600
    owner = pod["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "AgentRun",
        run["metadata"]["uid"],
        True,
    )


def test_a_missing_required_server_holds_the_pod_until_the_server_is_ready(
    cluster: Cluster, operator: OperatorProcess, namespace: str, everything: str
) -> None:
    cluster.apply(namespace, agentrun("waits", {"name": "later"}))
    eventually(
        "ServerNotFound",
        lambda: has_condition(
            get(cluster, namespace, "agentrun", "waits"), "Ready", "False", "ServerNotFound"
        ),
    )
    assert get(cluster, namespace, "pod", "waits") is None
    assert get(cluster, namespace, "configmap", "waits-bridge") is None

    cluster.apply(namespace, mcpserver("later", everything))
    eventually("the Pod", lambda: get(cluster, namespace, "pod", "waits"), timeout=60)
    run = get(cluster, namespace, "agentrun", "waits")
    assert has_condition(run, "ServersResolved", "True", "Resolved")


def test_two_servers_offering_one_tool_name_collide_and_no_pod_is_made(
    cluster: Cluster, operator: OperatorProcess, namespace: str, everything: str
) -> None:
    cluster.apply(namespace, mcpserver("one", everything, toolsPrefix="ev", toolsAllow=["echo"]))
    cluster.apply(namespace, mcpserver("two", everything, toolsPrefix="ev", toolsAllow=["echo"]))
    wait_ready_server(cluster, namespace, "one")
    wait_ready_server(cluster, namespace, "two")
    cluster.apply(namespace, agentrun("clash", {"name": "one"}, {"name": "two"}))
    run = eventually(
        "ToolNameCollision",
        lambda: (
            (obj := get(cluster, namespace, "agentrun", "clash"))
            and has_condition(obj, "ServersResolved", "False", "ToolNameCollision")
            and obj
        ),
    )
    assert "ev_echo" in condition(run, "ServersResolved")["message"]
    assert get(cluster, namespace, "pod", "clash") is None


def test_a_change_of_a_servers_tools_reaches_the_configmap(
    cluster: Cluster, operator: OperatorProcess, namespace: str, everything: str
) -> None:
    cluster.apply(namespace, mcpserver("ev", everything, toolsAllow=["echo"]))
    wait_ready_server(cluster, namespace, "ev")
    cluster.apply(namespace, agentrun("follows", {"name": "ev"}))
    eventually("the Pod", lambda: get(cluster, namespace, "pod", "follows"))
    assert bridge_config(cluster, namespace, "follows")["servers"][0]["tools"] == ["echo"]

    cluster.apply(namespace, mcpserver("ev", everything, toolsAllow=["echo", "get-sum"]))
    eventually(
        "the new tool in the ConfigMap",
        lambda: (
            bridge_config(cluster, namespace, "follows")["servers"][0].get("tools")
            == ["echo", "get-sum"]
        ),
        timeout=60,
    )


def test_with_the_bridge_switched_off_the_pod_has_no_sidecar_and_the_status_says_so(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.apply(namespace, agentrun("plain", {"name": "absent"}, bridge={"enabled": False}))
    pod = eventually("the Pod", lambda: get(cluster, namespace, "pod", "plain"))
    assert "initContainers" not in pod["spec"]
    names = [var["name"] for var in pod["spec"]["containers"][0].get("env", [])]
    assert "MCP_BRIDGE_URL" not in names
    run = eventually(
        "Bridge Disabled",
        lambda: (
            (obj := get(cluster, namespace, "agentrun", "plain"))
            and has_condition(obj, "Bridge", "False", "Disabled")
            and obj
        ),
    )
    assert "spec.bridge.enabled is false" in condition(run, "Bridge")["message"]
    assert get(cluster, namespace, "configmap", "plain-bridge") is None


def test_a_server_in_another_namespace_is_used_only_where_it_permits_it(
    cluster: Cluster, operator: OperatorProcess, namespace: str, everything: str
) -> None:
    other = f"{namespace}-shared"
    cluster.kubectl("create", "namespace", other)
    try:
        cluster.apply(other, mcpserver("shared", everything, toolsAllow=["echo"]))
        wait_ready_server(cluster, other, "shared")
        cluster.apply(namespace, agentrun("borrow", {"name": "shared", "namespace": other}))
        eventually(
            "NotPermitted",
            lambda: has_condition(
                get(cluster, namespace, "agentrun", "borrow"), "Ready", "False", "NotPermitted"
            ),
        )
        cluster.apply(
            other,
            mcpserver(
                "shared", everything, toolsAllow=["echo"], access={"namespaces": [namespace]}
            ),
        )
        eventually("the Pod", lambda: get(cluster, namespace, "pod", "borrow"), timeout=60)
    finally:
        cluster.kubectl("delete", "namespace", other, "--wait=false", check=False)
