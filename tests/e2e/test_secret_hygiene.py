"""Secret hygiene: no value of a Secret the operator uses shows anywhere the project writes.

Servers get Secret-backed headers (an external one that echoes the header back into its
tool descriptions and serverInfo, in several encodings) and a Secret-backed environment (a
managed one), and an AgentRun uses the external server. Then everything the operator wrote
is searched for the values and their common encodings: the MCPServers' and the AgentRun's
status, Events, the bridge's ConfigMap, the Deployment, the Pod, and the operator's log.
(No kubelet runs here, so no adapter log exists; the adapter's own hygiene is tested with
its traffic.)
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import quote

import pytest

from tests.e2e.test_external import mcpserver, ready, wait_for
from tests.support import peers
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.objects import condition, eventually

pytestmark = pytest.mark.e2e

HEADER_VALUE = "Bearer hygiene-t0ken/Value+42"
ENV_VALUE = "env-s3cret-password-99"
OPT_IN = {"mcp-operator.dev/for-mcp-servers": "true"}


def forms(value: str) -> list[str]:
    token = value.split()[-1]
    return [
        form.lower()
        for text in (value, token)
        for form in (
            text,
            quote(text, safe=""),
            json.dumps(text)[1:-1],
            base64.b64encode(text.encode()).decode(),
        )
    ]


def secret(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "labels": OPT_IN},
        "stringData": data,
    }


def test_no_secret_value_shows_in_status_events_configmaps_pods_or_logs(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.apply(namespace, secret("api-token", {"header": HEADER_VALUE}))
    cluster.apply(namespace, secret("app-env", {"password": ENV_VALUE}))
    header = {
        "name": "Authorization",
        "valueFrom": {"secretKeyRef": {"name": "api-token", "key": "header"}},
    }
    with peers.hostile_server("echo") as url:
        cluster.apply(namespace, mcpserver("echo", url, headers=[header]))
        cluster.apply(
            namespace,
            {
                "apiVersion": "mcp-operator.dev/v1alpha1",
                "kind": "MCPServer",
                "metadata": {"name": "app"},
                "spec": {
                    "mode": "managed",
                    "transport": "streamable-http",
                    "headers": [header],
                    "deployment": {
                        "image": "example/app:1",
                        "env": [
                            {
                                "name": "DB_PASSWORD",
                                "valueFrom": {
                                    "secretKeyRef": {"name": "app-env", "key": "password"}
                                },
                            }
                        ],
                    },
                },
            },
        )
        echo = wait_for(cluster, namespace, "echo", ready, timeout=60)
        assert echo["status"]["toolCount"] == 7
        assert "***" in json.dumps(echo["status"])
        cluster.apply(
            namespace,
            {
                "apiVersion": "mcp-operator.dev/v1alpha1",
                "kind": "AgentRun",
                "metadata": {"name": "run"},
                "spec": {"mcpServers": [{"name": "echo"}], "agent": {"image": "agent:1"}},
            },
        )
        eventually(
            "the run's ConfigMap and Pod exist",
            lambda: cluster.get_json("-n", namespace, "agentrun/run"),
            60,
            until=lambda run: bool((run.get("status") or {}).get("podName")),
        )
        eventually(
            "the managed server's Deployment exists",
            lambda: condition(cluster.get_json("-n", namespace, "mcpserver/app"), "Deployed"),
            60,
            until=bool,
        )

    written = cluster.kubectl(
        "-n",
        namespace,
        "get",
        "mcpservers,agentruns,events,configmaps,deployments,services,pods",
        "-o",
        "json",
    ).stdout
    everything = (written + operator.log()).lower()
    assert "hygiene" not in everything
    for value in (HEADER_VALUE, ENV_VALUE):
        found = [form for form in forms(value) if form in everything]
        assert found == [], f"{value!r} shows as {found}"
    deployment = cluster.get_json("-n", namespace, "deployment/app")
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {
        "name": "DB_PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": "app-env", "key": "password"}},
    } in env
