"""A managed server's access ConfigMap on the real API server: the cluster's own issuer and
keys (as the API server publishes them), who may call, ``status.access`` and the ``Auth``
column; a ConfigMap of that name that the server does not control is never written; the API
server refuses ``authentication: oidc`` without ``oidc`` (the CRD's CEL rule)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcp_operator.dev.cluster import DEV_IDENTITY
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.objects import condition, eventually

pytestmark = pytest.mark.e2e


def managed(name: str, **access: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "mode": "managed",
        "deployment": {"image": "registry.example/mcp/server:1", "command": ["server"]},
    }
    if access:
        spec["access"] = access
    return {
        "apiVersion": "mcp-operator.dev/v1alpha1",
        "kind": "MCPServer",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_the_operator_writes_the_clusters_issuer_keys_and_who_may_call(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.apply(namespace, managed("git", namespaces=["agents"], serviceAccounts=["robot"]))
    found = eventually(
        "the access ConfigMap",
        lambda: cluster.kubectl(
            "-n", namespace, "get", "configmap/git-access", "-o", "json", check=False
        ),
        60,
        until=lambda result: result.returncode == 0,
    )
    config_map = json.loads(found.stdout)
    document = json.loads(config_map["data"]["access.json"])
    discovery = json.loads(
        cluster.kubectl("get", "--raw", "/.well-known/openid-configuration").stdout
    )
    keys = json.loads(cluster.kubectl("get", "--raw", "/openid/v1/jwks").stdout)
    assert document["issuer"] == discovery["issuer"]
    assert document["jwks"] == keys and keys["keys"]
    assert document["audience"] == f"mcpserver.mcp-operator.dev/{namespace}/git"
    namespace_of, name_of = DEV_IDENTITY.split("/")
    assert document["allow"] == {
        "namespaces": sorted(["agents", namespace]),
        "serviceAccounts": [f"{namespace}/robot"],
        "operators": [f"system:serviceaccount:{namespace_of}:{name_of}"],
    }
    assert document["revokedPods"] == []
    (owner,) = config_map["metadata"]["ownerReferences"]
    server = cluster.get_json("-n", namespace, "mcpserver/git")
    assert owner["uid"] == server["metadata"]["uid"] and owner["controller"] is True
    eventually(
        "status.access",
        lambda: cluster.get_json("-n", namespace, "mcpserver/git")["status"].get("access"),
        60,
        until=lambda access: access == {"authentication": "kubernetes"},
    )
    table = cluster.kubectl("-n", namespace, "get", "mcpservers").stdout
    assert "AUTH" in table.splitlines()[0] and "kubernetes" in table
    deployment = cluster.get_json("-n", namespace, "deployment/git")
    (adapter,) = [
        c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "adapter"
    ]
    assert "--auth=kubernetes" in adapter["args"]


def test_none_is_shown_and_a_foreign_configmap_of_the_name_is_left_alone(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.apply(namespace, managed("open", authentication="none"))
    eventually(
        "status.access none",
        lambda: cluster.get_json("-n", namespace, "mcpserver/open")["status"].get("access"),
        60,
        until=lambda access: access == {"authentication": "none"},
    )
    assert "none" in cluster.kubectl("-n", namespace, "get", "mcpserver/open").stdout
    assert cluster.kubectl("-n", namespace, "get", "configmap/open-access", check=False).returncode

    # A tenant's ConfigMap named like the access configuration: never taken over.
    cluster.kubectl(
        "-n", namespace, "create", "configmap", "taken-access", "--from-literal=access.json={}"
    )
    cluster.apply(namespace, managed("taken"))

    def deployed() -> dict[str, Any] | None:
        obj = cluster.get_json("-n", namespace, "mcpserver/taken")
        found = condition(obj, "Deployed")
        return found if found.get("reason") == "NameConflict" else None

    conflict = eventually("Deployed=False NameConflict", deployed, 60)
    assert "taken-access" in conflict["message"]
    untouched = cluster.get_json("-n", namespace, "configmap/taken-access")
    assert untouched["data"] == {"access.json": "{}"}
    assert "ownerReferences" not in untouched["metadata"]


def test_the_api_server_refuses_oidc_without_its_issuer(cluster: Cluster, namespace: str) -> None:
    refused = cluster.kubectl(
        "-n", namespace, "apply", "--server-side", "--field-manager=e2e", "-f", "-",
        input=json.dumps(managed("idp", authentication="oidc")), check=False,
    )  # fmt: skip
    assert refused.returncode != 0
    assert "oidc must be set when authentication is oidc" in refused.stderr
    bad_account = cluster.kubectl(
        "-n", namespace, "apply", "--server-side", "--field-manager=e2e", "-f", "-",
        input=json.dumps(managed("bad", serviceAccounts=["a/b/c"])), check=False,
    )  # fmt: skip
    assert bad_account.returncode != 0
