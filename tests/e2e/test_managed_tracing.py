"""A managed MCPServer's spec.tracing on the real control plane and the real node: the
operator puts the standard OTEL_* variables on the adapter (never on the server's
container), turning it on rolls the Deployment, and on the node the adapter exports its
spans to the collector the field names. (The API server's refusals: tests/e2e/test_crds.py.)"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_managed import get, manifest, replica_sets
from tests.e2e.test_real_node import push_hello
from tests.support import pods
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.objects import eventually, mcpserver, ready
from tests.support.otlp_collector import Collector

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


def test_a_managed_servers_adapter_on_the_real_node_exports_its_spans_to_the_collector(
    node_cluster: Cluster,
    node_images: dict[str, str],
    node_operator: OperatorProcess,
    node_namespace: str,
    tmp_path: Path,
) -> None:
    """The adapter in the server's Pod, configured by spec.tracing alone, sends the spans of
    the operator's probe (its handshake and listing) to a collector on the node's bridge
    address, named as the adapter of that server in that namespace."""
    cluster, namespace = node_cluster, node_namespace
    image = push_hello(cluster, tmp_path, "65532")
    collector = Collector(host=cluster.plane.node.ip)
    try:
        tracing = {"endpoint": collector.url}
        server = mcpserver("hello", mode="managed", deployment={"image": image}, tracing=tracing)
        cluster.apply(namespace, server)
        pod = pods.only_pod(cluster, namespace, "mcp-operator.dev/server=hello")
        explain = functools.partial(pods.describe, cluster, namespace, pod["metadata"]["name"])
        ready(cluster, namespace, "mcpserver", "hello", explain=explain)

        def probed() -> list[dict[str, Any]]:
            return [
                span
                for span in collector.spans
                if span["service"] == "mcp-operator-adapter"
                and span["kind"] == "SERVER"
                and span["attributes"].get("mcp.method.name") == "tools/list"
            ]

        spans = eventually("the adapter's span of the probe's listing", probed, timeout=60)
    finally:
        collector.close()
    resource = spans[0]["resource"]
    assert resource["k8s.namespace.name"] == namespace
    assert resource["mcp_operator.mcp_server"] == "hello"
