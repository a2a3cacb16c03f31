"""A tenant gets nothing through the operator that RBAC does not give her, on the real API server.

``alice`` (impersonated) may manage only MCPServers and AgentRuns in her namespace. The
attacks of the review, each reproduced and now harmless:

- her MCPServer ``db`` would have re-pointed the administrator's Service ``db`` and her
  AgentRun ``app`` rewritten the ConfigMap ``app-bridge``; deleting her objects would have
  garbage-collected theirs. Now: ``NameConflict``, and the administrator's objects are
  byte-identical (spec, ownerReferences, managedFields, resourceVersion) after she deletes
  hers and the garbage collector has processed the deletion;
- her AgentRun would have mounted an unlabelled Secret, run as a ServiceAccount not opted in,
  or replaced the bridge by an image of hers. Now each is refused with its reason and no Pod,
  and the allowed paths (labelled Secret and account, the operator's own bridge image) run;
- the two races of a read-then-write: a name taken between the operator's read and its
  create, and an own object replaced by someone else's in between, are both refused by the
  API server and read again, never merged or overwritten.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcp_operator.controller.settings import AgentRenderSettings
from mcp_operator.kube import CONFIGMAPS, KubeClient, NameConflict
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.objects import condition, eventually

pytestmark = pytest.mark.e2e

TENANT = "alice"
OPT_IN = "mcp-operator.dev/for-mcp-servers=true"
GROUP_VERSION = "mcp-operator.dev/v1alpha1"


@pytest.fixture
def tenant(cluster: Cluster, namespace: str) -> str:
    """``alice`` may do anything with MCPServers and AgentRuns in ``namespace``, nothing else."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "mcp-tenant"},
        "rules": [
            {
                "apiGroups": ["mcp-operator.dev"],
                "resources": ["mcpservers", "agentruns"],
                "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
            }
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "mcp-tenant"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "mcp-tenant"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": TENANT}],
    }
    cluster.apply(namespace, role)
    cluster.apply(namespace, binding)

    def can(verb: str, what: str) -> str:
        args = ("auth", "can-i", verb, what, f"--as={TENANT}", "-n", namespace)
        return cluster.kubectl(*args, check=False).stdout.strip()

    assert can("create", "mcpservers.mcp-operator.dev") == "yes"
    for verb, what in (("patch", "services"), ("update", "configmaps"), ("create", "pods")):
        assert can(verb, what) == "no", f"alice must not {verb} {what} herself"
    return TENANT


def as_tenant(cluster: Cluster, namespace: str, obj: dict[str, Any]) -> None:
    cluster.kubectl(
        f"--as={TENANT}",
        "-n",
        namespace,
        "apply",
        "--server-side",
        f"--field-manager={TENANT}",
        "-f",
        "-",
        input=json.dumps(obj),
    )


def get(cluster: Cluster, namespace: str, what: str) -> dict[str, Any] | None:
    result = cluster.kubectl("-n", namespace, "get", what, "-o", "json", check=False)
    return dict(json.loads(result.stdout)) if result.returncode == 0 else None


def reason(obj: dict[str, Any] | None, type_: str = "Ready") -> str | None:
    return condition(obj, type_).get("reason")


def warning_events(cluster: Cluster, namespace: str, name: str, why: str) -> list[dict[str, Any]]:
    listing = cluster.get_json(
        "-n",
        namespace,
        "events",
        f"--field-selector=involvedObject.name={name},reason={why},type=Warning",
    )
    return list(listing["items"])


def owned_sentinel(cluster: Cluster, namespace: str, owner: dict[str, Any]) -> str:
    """A ConfigMap the administrator gives ``owner`` as owner: its collection shows that the
    garbage collector has processed the owner's deletion."""
    name = f"sentinel-{owner['metadata']['name']}"
    reference = {
        "apiVersion": GROUP_VERSION,
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
    }
    sentinel = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "ownerReferences": [reference]},
    }
    cluster.apply(namespace, sentinel)
    return name


def delete_and_wait_for_collection(
    cluster: Cluster, namespace: str, what: str, sentinel: str
) -> None:
    cluster.kubectl(f"--as={TENANT}", "-n", namespace, "delete", what)
    # kube-controller-manager's garbage collector re-reads API discovery every 30 s, so it
    # may take that long to learn our kinds when the CRDs were just installed.
    eventually(
        "the garbage collector to process the deletion",
        lambda: get(cluster, namespace, f"configmap/{sentinel}") is None,
        timeout=75,
    )


ADMIN_SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "db", "labels": {"app": "postgres"}},
    "spec": {"selector": {"app": "postgres"}, "ports": [{"port": 5432, "targetPort": 5432}]},
}


def test_a_tenants_mcpserver_cannot_take_over_an_admins_service_of_its_name(
    cluster: Cluster, operator: OperatorProcess, namespace: str, tenant: str
) -> None:
    cluster.apply(namespace, ADMIN_SERVICE)
    before = get(cluster, namespace, "service/db")
    server = {
        "apiVersion": GROUP_VERSION,
        "kind": "MCPServer",
        "metadata": {"name": "db"},
        "spec": {
            "mode": "managed",
            "transport": "streamable-http",
            "deployment": {"image": "registry.example/db-tools:1", "port": 5432},
        },
    }
    as_tenant(cluster, namespace, server)
    refused = eventually(
        "NameConflict",
        lambda: (
            (obj := get(cluster, namespace, "mcpserver/db"))
            and reason(obj) == "NameConflict"
            and obj
        ),
        timeout=60,
    )
    assert reason(refused, "Deployed") == "NameConflict"
    message = condition(refused, "Ready")["message"]
    assert f"Service {namespace}/db" in message and "MCPServer/db" in message
    assert "its controller: no controller" in message and "e2e" in message
    assert eventually(
        "a Warning Event", lambda: warning_events(cluster, namespace, "db", "NameConflict")
    )
    assert get(cluster, namespace, "deployment/db") is None
    assert get(cluster, namespace, "service/db") == before

    sentinel = owned_sentinel(cluster, namespace, refused)
    delete_and_wait_for_collection(cluster, namespace, "mcpserver/db", sentinel)
    after = get(cluster, namespace, "service/db")
    assert after == before, "spec, ownerReferences, managedFields and resourceVersion unchanged"


def agentrun(name: str, **spec: Any) -> dict[str, Any]:
    agent = {"image": "registry.example/agent:1", **spec.pop("agent", {})}
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "AgentRun",
        "metadata": {"name": name},
        # An optional server that does not exist: the run resolves and may start at once.
        "spec": {"mcpServers": [{"name": "none", "optional": True}], "agent": agent, **spec},
    }


def refused_with(cluster: Cluster, namespace: str, name: str, why: str) -> dict[str, Any]:
    run: dict[str, Any] = eventually(
        f"AgentRun {name} refused with {why}",
        lambda: (obj := get(cluster, namespace, f"agentrun/{name}")) and reason(obj) == why and obj,
        timeout=60,
    )
    assert get(cluster, namespace, f"pod/{name}") is None
    assert get(cluster, namespace, f"configmap/{name}-bridge") is None or why == "NameConflict"
    return run


def test_a_tenants_agentrun_cannot_take_over_an_admins_configmap_of_its_bridge_name(
    cluster: Cluster, operator: OperatorProcess, namespace: str, tenant: str
) -> None:
    admin_config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "app-bridge"},
        "data": {"database": "postgres://db:5432/app"},
    }
    cluster.apply(namespace, admin_config)
    before = get(cluster, namespace, "configmap/app-bridge")
    as_tenant(cluster, namespace, agentrun("app"))
    run = refused_with(cluster, namespace, "app", "NameConflict")
    message = condition(run, "Ready")["message"]
    assert f"ConfigMap {namespace}/app-bridge" in message and "AgentRun/app" in message
    assert eventually(
        "a Warning Event", lambda: warning_events(cluster, namespace, "app", "NameConflict")
    )
    assert get(cluster, namespace, "configmap/app-bridge") == before

    sentinel = owned_sentinel(cluster, namespace, run)
    delete_and_wait_for_collection(cluster, namespace, "agentrun/app", sentinel)
    assert get(cluster, namespace, "configmap/app-bridge") == before


def test_a_tenants_agentrun_borrows_no_secret_no_identity_and_no_bridge_image(
    cluster: Cluster, operator: OperatorProcess, namespace: str, tenant: str
) -> None:
    cluster.kubectl(
        "-n", namespace, "create", "secret", "generic", "db", "--from-literal=pw=hunter2-admin"
    )
    cluster.kubectl("-n", namespace, "create", "serviceaccount", "admin")
    env = [{"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}}]
    foreign_bridge = "registry.example/alice/bridge:1"
    as_tenant(cluster, namespace, agentrun("env", agent={"env": env}))
    as_tenant(cluster, namespace, agentrun("identity", agent={"serviceAccountName": "admin"}))
    as_tenant(cluster, namespace, agentrun("bridge", bridge={"image": foreign_bridge}))

    secret_run = refused_with(cluster, namespace, "env", "SecretNotOptedIn")
    assert f"Secret {namespace}/db" in condition(secret_run, "Ready")["message"]
    identity = refused_with(cluster, namespace, "identity", "ServiceAccountNotOptedIn")
    assert f"ServiceAccount {namespace}/admin" in condition(identity, "Ready")["message"]
    bridge = refused_with(cluster, namespace, "bridge", "BridgeImageNotAllowed")
    assert foreign_bridge in condition(bridge, "Ready")["message"]
    written = cluster.kubectl("-n", namespace, "get", "agentruns,events", "-o", "json").stdout
    assert "hunter2" not in written + operator.log()

    # The allowed paths: the owners opt the Secret and the account in; the operator's own
    # bridge image, named explicitly, is its own choice.
    cluster.kubectl("-n", namespace, "label", "secret", "db", OPT_IN)
    cluster.kubectl("-n", namespace, "label", "serviceaccount", "admin", OPT_IN)
    own_bridge = {"image": AgentRenderSettings().bridge_image}
    as_tenant(cluster, namespace, agentrun("own-bridge", bridge=own_bridge))
    pods = {
        name: eventually(
            f"the Pod of {name}", lambda name=name: get(cluster, namespace, f"pod/{name}"), 60
        )
        for name in ("env", "identity", "own-bridge")
    }
    assert env[0] in pods["env"]["spec"]["containers"][0]["env"]
    assert pods["identity"]["spec"]["serviceAccountName"] == "admin"
    assert pods["own-bridge"]["spec"]["initContainers"][0]["image"] == own_bridge["image"]
    assert get(cluster, namespace, "pod/bridge") is None


async def test_an_object_created_between_the_read_and_the_write_is_refused_not_merged(
    cluster: Cluster, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race: the name is free when the operator reads and taken when it writes."""
    cluster.apply(
        namespace,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}, "data": {"a": "1"}},
    )
    before = get(cluster, namespace, "configmap/late")
    child = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "late",
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": GROUP_VERSION,
                    "kind": "AgentRun",
                    "name": "late",
                    "uid": "6c1d0f0e-0000-4000-8000-000000000001",
                    "controller": True,
                }
            ],
        },
        "data": {"b": "2"},
    }
    kube = KubeClient.connect(str(cluster.kubeconfig))
    reads: list[str] = []
    real_get = KubeClient.get

    async def first_read_misses(self: KubeClient, *args: Any) -> Any:
        reads.append(args[-1])
        return None if len(reads) == 1 else await real_get(self, *args)

    monkeypatch.setattr(KubeClient, "get", first_read_misses)
    try:
        with pytest.raises(NameConflict, match=f"ConfigMap {namespace}/late already exists"):
            await kube.apply(CONFIGMAPS, child)
    finally:
        await kube.close()
    assert reads == ["late", "late"], "the 409 of the create-only write made it read again"
    assert get(cluster, namespace, "configmap/late") == before


async def test_an_own_object_replaced_by_someone_elses_in_between_is_refused_not_overwritten(
    cluster: Cluster, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other race: the operator read its own object, someone else's took its place."""
    owner = {
        "apiVersion": GROUP_VERSION,
        "kind": "AgentRun",
        "name": "swap",
        "uid": "6c1d0f0e-0000-4000-8000-000000000002",
        "controller": True,
    }
    cluster.apply(
        namespace,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "swap"}, "data": {"a": "1"}},
    )
    before = get(cluster, namespace, "configmap/swap")
    assert before is not None
    stale = {**before, "metadata": {**before["metadata"], "ownerReferences": [owner]}}
    stale["metadata"]["uid"] = "6c1d0f0e-0000-4000-8000-0000000000ff"  # the one deleted since
    child = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "swap", "namespace": namespace, "ownerReferences": [owner]},
        "data": {"b": "2"},
    }
    kube = KubeClient.connect(str(cluster.kubeconfig))
    reads: list[str] = []
    real_get = KubeClient.get

    async def first_read_is_stale(self: KubeClient, *args: Any) -> Any:
        reads.append(args[-1])
        return stale if len(reads) == 1 else await real_get(self, *args)

    monkeypatch.setattr(KubeClient, "get", first_read_is_stale)
    try:
        with pytest.raises(NameConflict, match=f"ConfigMap {namespace}/swap already exists"):
            await kube.apply(CONFIGMAPS, child)
    finally:
        await kube.close()
    assert reads == ["swap", "swap"], "the refused write made it read again"
    assert get(cluster, namespace, "configmap/swap") == before
