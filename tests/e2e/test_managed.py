"""Managed MCPServers on the real control plane: children, rollouts, garbage collection.

No kubelet runs here, so Pods stay Pending; the ``Deployed`` condition must
say exactly that. Traffic to a managed server is tested in
``test_managed_traffic.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_operator.api import MCPServer
from mcp_operator.controller.mcpserver import render
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.objects import condition, eventually

OPT_IN = "mcp-operator.dev/for-mcp-servers=true"
"""The label that lets MCPServers of the namespace use a Secret."""

pytestmark = pytest.mark.e2e

SPEC: dict[str, Any] = {
    "mode": "managed",
    "deployment": {
        "image": "node:22-alpine",
        "command": ["npx", "-y", "@modelcontextprotocol/server-everything"],
        "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "t"}}}],
        "replicas": 2,
    },
    "toolsDeny": ["get-env"],
}


def manifest(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "mcp-operator.dev/v1alpha1",
        "kind": "MCPServer",
        "metadata": {"name": name},
        "spec": spec,
    }


def contains(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Where ``actual`` lacks something of ``expected`` (the API server may add defaults)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: expected an object, got {actual!r}"]
        problems = []
        for key, value in expected.items():
            if key not in actual:
                problems.append(f"{path}.{key}: missing")
            else:
                problems += contains(value, actual[key], f"{path}.{key}")
        return problems
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(expected) != len(actual):
            return [f"{path}: expected {len(expected)} items, got {actual!r}"]
        return [
            p
            for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            for p in contains(e, a, f"{path}[{i}]")
        ]
    return [] if expected == actual else [f"{path}: expected {expected!r}, got {actual!r}"]


def get(cluster: Cluster, namespace: str, what: str) -> dict[str, Any] | None:
    result = cluster.kubectl("-n", namespace, "get", what, "-o", "json", check=False)
    if result.returncode != 0:
        return None
    import json

    return dict(json.loads(result.stdout))


def replica_sets(cluster: Cluster, namespace: str, name: str) -> set[str]:
    listing = cluster.get_json(
        "-n", namespace, "replicasets", "-l", f"mcp-operator.dev/server={name}"
    )
    return {item["metadata"]["name"] for item in listing["items"]}


def test_a_managed_server_gets_exactly_its_deployment_and_service_and_honest_status(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.kubectl(
        "-n", namespace, "create", "secret", "generic", "creds", "--from-literal=t=s3cr3t-one"
    )
    cluster.kubectl("-n", namespace, "label", "secret", "creds", OPT_IN)
    cluster.apply(namespace, manifest("everything", SPEC))
    obj = eventually(
        "the server got status",
        lambda: (
            condition(get(cluster, namespace, "mcpserver/everything"), "Deployed")
            .get("message", "")
            .count("Pending")
            and get(cluster, namespace, "mcpserver/everything")
        ),
    )
    server = MCPServer.model_validate(obj)

    deployment = get(cluster, namespace, "deployment/everything")
    service = get(cluster, namespace, "service/everything")
    assert deployment is not None and service is not None
    expected_deployment = render.deployment(server, render.RenderSettings())
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    expected_deployment["spec"]["template"]["metadata"]["annotations"] = {
        "mcp-operator.dev/secrets-version": annotations["mcp-operator.dev/secrets-version"]
    }
    assert contains(expected_deployment, deployment) == []
    assert contains(render.service(server), service) == []
    owner = deployment["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "MCPServer",
        obj["metadata"]["uid"],
        True,
    )

    deployed = condition(obj, "Deployed")
    assert deployed["status"] == "False" and deployed["reason"] == "ReplicasUnavailable"
    assert "0 of 2 replicas available" in deployed["message"]
    assert "2 Pending (no node has started them yet)" in deployed["message"]
    assert condition(obj, "Ready")["status"] == "False"
    assert obj["status"]["url"] == f"http://everything.{namespace}.svc.cluster.local:8080/mcp"
    assert "s3cr3t-one" not in str(deployment), (
        "the Secret's value is never copied into the Deployment"
    )


def test_a_spec_change_and_a_secret_change_each_roll_the_deployment(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.kubectl(
        "-n", namespace, "create", "secret", "generic", "creds", "--from-literal=t=s3cr3t-one"
    )
    cluster.kubectl("-n", namespace, "label", "secret", "creds", OPT_IN)
    cluster.apply(namespace, manifest("roll", SPEC))
    first = eventually("a ReplicaSet", lambda: replica_sets(cluster, namespace, "roll"))
    assert len(first) == 1

    changed = {**SPEC, "deployment": {**SPEC["deployment"], "args": ["stdio"]}}
    cluster.apply(namespace, manifest("roll", changed))
    second = eventually(
        "a second ReplicaSet",
        lambda: (
            len(replica_sets(cluster, namespace, "roll")) == 2
            and replica_sets(cluster, namespace, "roll")
        ),
    )
    deployment = get(cluster, namespace, "deployment/roll")
    assert deployment is not None
    assert deployment["spec"]["template"]["spec"]["containers"][0]["command"][-1] == "stdio"

    cluster.kubectl(
        "-n", namespace, "patch", "secret", "creds", "-p", '{"stringData": {"t": "s3cr3t-two"}}'
    )
    third = eventually(
        "a third ReplicaSet",
        lambda: (
            len(replica_sets(cluster, namespace, "roll")) == 3
            and replica_sets(cluster, namespace, "roll")
        ),
    )
    assert second < third


def test_deleting_the_server_garbage_collects_its_children(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.kubectl(
        "-n", namespace, "create", "secret", "generic", "creds", "--from-literal=t=s3cr3t-one"
    )
    cluster.kubectl("-n", namespace, "label", "secret", "creds", OPT_IN)
    cluster.apply(namespace, manifest("gone", SPEC))
    eventually("the Deployment", lambda: get(cluster, namespace, "deployment/gone"))
    eventually("the Service", lambda: get(cluster, namespace, "service/gone"))
    cluster.kubectl("-n", namespace, "delete", "mcpserver", "gone")
    # kube-controller-manager's garbage collector re-reads API discovery every 30 s, so
    # it may take that long to learn the MCPServer kind when the CRDs were just installed.
    eventually(
        "the Deployment to be collected",
        lambda: get(cluster, namespace, "deployment/gone") is None,
        timeout=75,
    )
    eventually(
        "the Service to be collected", lambda: get(cluster, namespace, "service/gone") is None
    )
    eventually(
        "the Pods to be collected",
        lambda: (
            not cluster.get_json("-n", namespace, "pods", "-l", "mcp-operator.dev/server=gone")[
                "items"
            ]
        ),
    )


def test_suspending_a_managed_server_scales_it_to_zero_and_stops_probing(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.kubectl("-n", namespace, "create", "secret", "generic", "creds", "--from-literal=t=x")
    cluster.kubectl("-n", namespace, "label", "secret", "creds", OPT_IN)
    cluster.apply(namespace, manifest("paused", {**SPEC, "suspend": True}))

    def scaled_to_zero() -> dict[str, Any] | None:
        obj = get(cluster, namespace, "mcpserver/paused")
        deployed = condition(obj, "Deployed")
        return obj if deployed.get("reason") == "ScaledToZero" else None

    obj = eventually("the server to be scaled to zero", scaled_to_zero)
    deployment = get(cluster, namespace, "deployment/paused")
    assert deployment is not None and deployment["spec"]["replicas"] == 0
    assert (condition(obj, "Ready")["status"], condition(obj, "Ready")["reason"]) == (
        "False",
        "Suspended",
    )
    assert condition(obj, "Probed")["reason"] == "Suspended"


def test_a_refused_apply_is_reported_in_status_not_only_in_the_log(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    # A quota that allows no Service: the API server refuses the operator's apply.
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-services"},
        "spec": {"hard": {"services": "0"}},
    }
    cluster.apply(namespace, quota)
    cluster.kubectl("-n", namespace, "create", "secret", "generic", "creds", "--from-literal=t=x")
    cluster.kubectl("-n", namespace, "label", "secret", "creds", OPT_IN)
    cluster.apply(namespace, manifest("refused", SPEC))

    def refused() -> dict[str, Any] | None:
        obj = get(cluster, namespace, "mcpserver/refused")
        return obj if condition(obj, "Deployed").get("reason") == "ApplyFailed" else None

    obj = eventually("the refusal to show in status", refused)
    assert condition(obj, "Ready")["status"] == "False"
    assert condition(obj, "Ready")["reason"] == "ApplyFailed"
    assert "exceeded quota" in condition(obj, "Deployed")["message"]
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
