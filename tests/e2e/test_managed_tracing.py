"""A managed MCPServer's spec.tracing on the real control plane: the operator puts the
standard OTEL_* variables on the adapter (never on the server's container), and turning it
on rolls the Deployment. (The API server's refusals: tests/e2e/test_crds.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_managed import get, manifest, replica_sets
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.objects import eventually

pytestmark = pytest.mark.e2e

SPEC: dict[str, Any] = {
    "mode": "managed",
    "deployment": {
        "image": "node:22-alpine",
        "command": ["npx", "-y", "@modelcontextprotocol/server-everything"],
    },
}
TRACING = {"endpoint": "http://otel-collector.observability:4318", "samplePercent": 20}


def otel(container: dict[str, Any]) -> dict[str, str]:
    env = container.get("env", [])
    return {var["name"]: var.get("value", "") for var in env if var["name"].startswith("OTEL_")}


def containers(cluster: Cluster, namespace: str, name: str) -> dict[str, dict[str, Any]]:
    deployment = get(cluster, namespace, f"deployment/{name}")
    assert deployment is not None
    return {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}


def test_turning_tracing_on_rolls_the_deployment_and_configures_the_adapter_only(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.apply(namespace, manifest("traced", SPEC))
    first = eventually("a ReplicaSet", lambda: replica_sets(cluster, namespace, "traced"))
    assert not otel(containers(cluster, namespace, "traced")["adapter"])

    cluster.apply(namespace, manifest("traced", {**SPEC, "tracing": TRACING}))
    eventually("a rollout", lambda: replica_sets(cluster, namespace, "traced") > first)
    pod = containers(cluster, namespace, "traced")
    resource = f"k8s.namespace.name={namespace},mcp_operator.mcp_server=traced"
    assert otel(pod["adapter"]) == {
        "OTEL_EXPORTER_OTLP_ENDPOINT": TRACING["endpoint"],
        "OTEL_SERVICE_NAME": "mcp-operator-adapter",
        "OTEL_RESOURCE_ATTRIBUTES": resource,
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "0.2",
    }
    assert otel(pod["server"]) == {}
