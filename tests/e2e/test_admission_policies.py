"""The chart's ValidatingAdmissionPolicies on a real API server, and what the identity can do.

``helm install`` puts the chart (policies included) on a control plane of its own: the
tenant policy matches every MCPServer and AgentRun of the cluster, and the operator's
identity is checked with exactly the chart's RBAC. A tenant (the impersonated user
``alice``, who may manage MCPServers and AgentRuns in her namespace) is refused what
references a Secret she may not read or a ServiceAccount she may not impersonate, and the
message names it; once granted, the same object is admitted. The operator's identity
(impersonated, with its real ClusterRole) is refused by the guard rails for each shape it
must never write, and an operator really running as it reconciles under them. Last, what
the identity can do (``kubectl auth can-i --list``) in the cluster-wide and the
namespace-scoped install is compared with the table of docs/security.md.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_operator.dev.cluster import ControlPlane
from mcp_operator.dev.processes import stop_process_group
from tests.support import needs, peers
from tests.support.cluster import Cluster
from tests.support.objects import condition, eventually

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "mcp-operator"
SECURITY_DOC = REPO / "docs" / "security.md"
SYSTEM, TENANT, ELSEWHERE = "ops", "tenant", "elsewhere"
SCOPED_SYSTEM, SCOPED_WATCHED = "ops-scoped", "scoped"
OPERATOR = f"system:serviceaccount:{SYSTEM}:mcpo-mcp-operator"
SCOPED_OPERATOR = f"system:serviceaccount:{SCOPED_SYSTEM}:mcps-mcp-operator"
ALICE = "alice"
API = "mcp-operator.dev/v1alpha1"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A control plane with the chart installed twice: cluster-wide RBAC watching
    ``tenant`` (release ``mcpo``), and namespace-scoped for ``scoped`` (release ``mcps``)."""
    helm = needs.helm()
    with ControlPlane() as control_plane:
        plane = Cluster(control_plane)
        for namespace in (SYSTEM, TENANT, ELSEWHERE, SCOPED_SYSTEM, SCOPED_WATCHED):
            plane.kubectl("create", "namespace", namespace)
        home = tmp_path_factory.mktemp("helm")
        env = {
            **os.environ,
            **{k: str(home / k) for k in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME")},
        }
        for release, namespace, values in (
            ("mcpo", SYSTEM, ["--set", f"watchNamespaces={{{TENANT}}}"]),
            (
                "mcps",
                SCOPED_SYSTEM,
                [
                    "--skip-crds",
                    # Where cluster policies cannot be installed: what that mode cannot
                    # prevent is shown below, and reported by the Isolation condition.
                    "--set",
                    "admissionPolicies.bridgeKeys=false",
                    "--set",
                    "namespaceScoped=true",
                    "--set",
                    f"watchNamespaces={{{SCOPED_WATCHED}}}",
                ],
            ),
        ):
            installed = subprocess.run(
                [
                    helm,
                    f"--kubeconfig={plane.kubeconfig}",
                    "--namespace",
                    namespace,
                    "install",
                    release,
                    str(CHART),
                    *values,
                ],
                capture_output=True,
                text=True,
                timeout=120,
                env=env,
                check=False,
            )
            assert installed.returncode == 0, installed.stderr
        plane.kubectl(
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/mcpservers.mcp-operator.dev",
            "crd/agentruns.mcp-operator.dev",
        )
        tenant_setup(plane)
        yield plane


def tenant_setup(cluster: Cluster) -> None:
    """alice manages MCPServers and AgentRuns in ``tenant``; the grants the tests add later
    (the Secret, the ServiceAccount, Pods) exist as Roles without bindings."""
    documents = [
        role("mcp-tenant", [rule("mcp-operator.dev", ["mcpservers", "agentruns"], ALL_VERBS)]),
        binding("mcp-tenant"),
        role("read-db-pass", [rule("", ["secrets"], ["get"], names=["db-pass"])]),
        role("use-robot", [rule("", ["serviceaccounts"], ["impersonate"], names=["robot"])]),
        role("create-pods", [rule("", ["pods"], ["create"])]),
        role("mint-tokens", [rule("", ["serviceaccounts/token"], ["create"])]),
        role(
            "debug-pods",
            [
                rule("", ["pods"], ["get", "list", "patch", "update"]),
                rule("", ["pods/ephemeralcontainers"], ["get", "patch", "update"]),
                rule("", ["pods/exec", "pods/attach"], ["create", "get"]),
            ],
        ),
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "db-pass"},
            "stringData": {"password": "not-for-alice"},
        },
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}},
        role("read-most", [rule("", ["secrets"], ["get"], names=MANY[:15])]),
        role("read-last", [rule("", ["secrets"], ["get"], names=MANY[15:])]),
        *({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}} for name in MANY),
    ]
    for document in documents:
        cluster.apply(TENANT, document)
    for namespace in (TENANT, ELSEWHERE, "kube-system"):
        # The ServiceAccount admission plugin refuses Pods until `default` exists.
        eventually(f"ServiceAccount default in {namespace}", exists(cluster, namespace), 60)


def exists(cluster: Cluster, namespace: str, what: str = "serviceaccount/default") -> Any:
    def check() -> bool:
        return cluster.kubectl("get", what, "-n", namespace, check=False).returncode == 0

    return check


ALL_VERBS = ["get", "list", "watch", "create", "update", "patch", "delete"]
MANY = [f"s-{i}" for i in range(17)]
"""One Secret more than an object may reference where the tenant policy is installed."""


def rule(group: str, resources: list[str], verbs: list[str], names: list[str] | None = None) -> Any:
    found: dict[str, Any] = {"apiGroups": [group], "resources": resources, "verbs": verbs}
    if names:
        found["resourceNames"] = names
    return found


def role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": name},
        "rules": rules,
    }


def binding(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": ALICE}],
    }


GRANTS = {
    # Role: what alice can do once it is bound (how a test knows the binding took effect)
    "read-db-pass": ("get", "secrets/db-pass"),
    "use-robot": ("impersonate", "serviceaccounts/robot"),
    "create-pods": ("create", "pods"),
    "read-most": ("get", "secrets/s-0"),
    "read-last": ("get", "secrets/s-15"),
    "mint-tokens": ("create", "serviceaccounts", "--subresource=token"),
    "debug-pods": ("update", "pods", "--subresource=ephemeralcontainers"),
}


def alice_can(cluster: Cluster, name: str) -> bool:
    verb, resource, *extra = GRANTS[name]
    answer = cluster.kubectl(
        "auth", "can-i", verb, resource, *extra, f"--as={ALICE}", "-n", TENANT, check=False
    )
    return answer.stdout.strip() == "yes"


@contextlib.contextmanager
def granted(cluster: Cluster, name: str) -> Iterator[None]:
    """alice holds the Role ``name`` in ``tenant`` inside the block (the API server's
    authorizer, which the policy asks, has seen the binding come and go)."""
    cluster.apply(TENANT, binding(name))
    eventually(f"alice holds {name}", lambda: alice_can(cluster, name), 30)
    try:
        yield
    finally:
        cluster.kubectl("delete", "rolebinding", name, "-n", TENANT)
        eventually(f"alice no longer holds {name}", lambda: not alice_can(cluster, name), 30)


def create_as(
    cluster: Cluster, user: str, obj: dict[str, Any], *, namespace: str = TENANT, dry: bool = True
) -> subprocess.CompletedProcess[str]:
    """``kubectl create`` of ``obj`` as ``user`` (impersonated); a server-side dry run
    passes through every admission step, policies included, and stores nothing."""
    args = ["--as", user, "-n", namespace, "create", "-f", "-", "-o", "name"]
    if dry:
        args.append("--dry-run=server")
    return cluster.kubectl(*args, input=json.dumps(obj), check=False)


def refused(result: subprocess.CompletedProcess[str], *words: str) -> str:
    assert result.returncode != 0, f"admitted: {result.stdout}"
    assert "ValidatingAdmissionPolicy" in result.stderr, result.stderr
    for word in words:
        assert word in result.stderr, (word, result.stderr)
    return result.stderr


def admitted(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stderr


# -- tenants -------------------------------------------------------------------------------

SECRET_REF = {"secretKeyRef": {"name": "db-pass", "key": "password"}}
NO_PROBE = {"enabled": False}
"""For servers that the operator of the last tests must not try to reach (no network here)."""


def mcpserver(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "MCPServer", "metadata": {"name": name}, "spec": spec}


def managed(name: str, **deployment: Any) -> dict[str, Any]:
    return mcpserver(
        name,
        mode="managed",
        transport="streamable-http",
        deployment={"image": "registry.example/mcp/server:1", **deployment},
    )


def agentrun(name: str, **agent: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "AgentRun",
        "metadata": {"name": name},
        "spec": {
            "agent": {"image": "registry.example/agent:1", **agent},
            "mcpServers": [{"name": "time"}],
        },
    }


REFERENCING_THE_SECRET = {
    "MCPServer headers": mcpserver(
        "headers",
        mode="external",
        url="https://mcp.example/mcp",
        headers=[{"name": "Authorization", "valueFrom": SECRET_REF}],
        probe=NO_PROBE,
    ),
    "MCPServer deployment.env": managed("env", env=[{"name": "DB", "valueFrom": SECRET_REF}]),
    "MCPServer imagePullSecrets": managed("pull", imagePullSecrets=[{"name": "db-pass"}]),
    "AgentRun agent.env": agentrun("run-env", env=[{"name": "DB", "valueFrom": SECRET_REF}]),
    "AgentRun bridge.approval.webhook": {
        "apiVersion": API,
        "kind": "AgentRun",
        "metadata": {"name": "run-webhook"},
        "spec": {
            "agent": {"image": "registry.example/agent:1"},
            "mcpServers": [{"name": "time"}],
            "bridge": {
                "approval": {
                    "webhook": {
                        "url": "https://approve.example/hook",
                        "secretRef": {"name": "db-pass", "key": "password"},
                    }
                }
            },
        },
    },
}


@pytest.mark.parametrize("case", list(REFERENCING_THE_SECRET))
def test_a_tenant_without_get_on_a_secret_cannot_reference_it_until_granted(
    cluster: Cluster, case: str
) -> None:
    obj = REFERENCING_THE_SECRET[case]
    with granted(cluster, "create-pods"):  # what an AgentRun needs besides, not the point here
        message = refused(create_as(cluster, ALICE, obj), "Secret db-pass", "may not get")
        assert f"user {ALICE}" in message and "not-for-alice" not in message
        with granted(cluster, "read-db-pass"):
            admitted(create_as(cluster, ALICE, obj))


def test_a_tenant_creates_for_real_what_she_may_reference_and_the_policy_reads_no_value(
    cluster: Cluster,
) -> None:
    obj = copy.deepcopy(REFERENCING_THE_SECRET["MCPServer headers"])
    obj["metadata"]["name"] = "stored"
    with granted(cluster, "read-db-pass"):
        admitted(create_as(cluster, ALICE, obj, dry=False))
    stored = cluster.get_json("mcpserver/stored", "-n", TENANT)
    assert stored["spec"]["headers"][0]["valueFrom"] == SECRET_REF
    # Updates are checked like creates: without the grant she cannot change it any more.
    label = cluster.kubectl(
        "--as", ALICE, "-n", TENANT, "label", "mcpserver/stored", "team=a", check=False
    )
    refused(label, "Secret db-pass")


def test_every_secret_of_the_largest_object_is_checked_and_more_are_refused(
    cluster: Cluster,
) -> None:
    # 32 headers, 128 environment variables and 16 pull Secrets (the CRD's bounds), naming
    # 16 Secrets in all, each checked; the API server's budget for authorization checks
    # per request allows no more (docs/security.md).
    def ref(i: int) -> dict[str, Any]:
        return {"secretKeyRef": {"name": MANY[i % 16], "key": "k"}}

    largest = managed(
        "largest",
        env=[{"name": f"E{i}", "valueFrom": ref(i)} for i in range(128)],
        imagePullSecrets=[{"name": name} for name in MANY[:16]],
    )
    largest["spec"]["headers"] = [{"name": f"H{i}", "valueFrom": ref(i)} for i in range(32)]
    largest["spec"]["probe"] = NO_PROBE
    refused(create_as(cluster, ALICE, largest), "may not get Secret s-0 ")
    with granted(cluster, "read-most"):
        refused(create_as(cluster, ALICE, largest), "may not get Secret s-15 ")
        with granted(cluster, "read-last"):
            admitted(create_as(cluster, ALICE, largest))
            extra = {"secretKeyRef": {"name": "s-16", "key": "k"}}
            one_more = changed(largest, "spec.deployment.env.0.valueFrom", extra)
            refused(create_as(cluster, ALICE, one_more), "references 17 Secrets", "at most 16")


@pytest.mark.parametrize(
    "obj",
    [
        managed("as-robot", serviceAccountName="robot"),
        agentrun("run-robot", serviceAccountName="robot"),
    ],
    ids=["MCPServer", "AgentRun"],
)
def test_a_service_account_she_may_not_impersonate_is_refused_until_granted(
    cluster: Cluster, obj: dict[str, Any]
) -> None:
    with granted(cluster, "create-pods"):
        refused(create_as(cluster, ALICE, obj), "ServiceAccount robot", "may not impersonate")
        with granted(cluster, "use-robot"):
            admitted(create_as(cluster, ALICE, obj))


def test_an_agentrun_needs_the_tenant_to_create_pods_herself(cluster: Cluster) -> None:
    obj = agentrun("plain")
    refused(create_as(cluster, ALICE, obj), "may not create pods", f"namespace {TENANT}")
    with granted(cluster, "create-pods"):
        admitted(create_as(cluster, ALICE, obj))
    # An MCPServer that references nothing needs nothing more.
    admitted(
        create_as(cluster, ALICE, mcpserver("bare", mode="external", url="https://x.example/"))
    )


# -- guard rails on the operator's own identity --------------------------------------------


def owners(cluster: Cluster) -> dict[str, dict[str, Any]]:
    """A real AgentRun and MCPServer (as admin), for ownerReferences with their UIDs."""
    for obj in (
        agentrun("owner-run"),
        mcpserver("owner-server", mode="external", url="https://x.example/", probe=NO_PROBE),
    ):
        cluster.apply(TENANT, obj)
    found = {}
    for kind, name in (("AgentRun", "owner-run"), ("MCPServer", "owner-server")):
        meta = cluster.get_json(f"{kind.lower()}/{name}", "-n", TENANT)["metadata"]
        found[kind] = {
            "apiVersion": API,
            "kind": kind,
            "name": name,
            "uid": meta["uid"],
            "controller": True,
        }
    return found


def restricted_container(name: str = "agent") -> dict[str, Any]:
    return {
        "name": name,
        "image": "registry.example/agent:1",
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }


def agent_pod(owner: dict[str, Any]) -> dict[str, Any]:
    """The shape the operator renders for an AgentRun (controller/agentrun/render.py)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "shape-check",
            "labels": {
                "app.kubernetes.io/managed-by": "mcp-operator",
                "mcp-operator.dev/agent-run": owner["name"],
            },
            "ownerReferences": [owner],
        },
        "spec": {
            "automountServiceAccountToken": False,
            "restartPolicy": "Never",
            "containers": [restricted_container()],
        },
    }


def server_deployment(owner: dict[str, Any]) -> dict[str, Any]:
    labels = {
        "app.kubernetes.io/managed-by": "mcp-operator",
        "mcp-operator.dev/server": owner["name"],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": owner["name"], "labels": labels, "ownerReferences": [owner]},
        "spec": {
            "selector": {"matchLabels": {"mcp-operator.dev/server": owner["name"]}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "automountServiceAccountToken": False,
                    "containers": [restricted_container("server")],
                },
            },
        },
    }


def changed(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``obj`` with the dotted ``path`` set (``-`` deletes it)."""
    copied = copy.deepcopy(obj)
    *parents, last = path.split(".")
    node = copied
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value == "-":
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return copied


def test_the_operators_identity_may_write_the_shapes_it_renders(cluster: Cluster) -> None:
    found = owners(cluster)
    admitted(create_as(cluster, OPERATOR, agent_pod(found["AgentRun"])))
    admitted(create_as(cluster, OPERATOR, server_deployment(found["MCPServer"])))
    # The Pod's own securityContext counts for a container that says nothing itself.
    pod_level = agent_pod(found["AgentRun"])
    container = pod_level["spec"]["containers"][0]["securityContext"]
    del container["runAsNonRoot"], container["seccompProfile"]
    pod_level["spec"]["securityContext"] = {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    admitted(create_as(cluster, OPERATOR, pod_level))
    # Someone else (admin here) is not matched by the guard rails at all.
    bare = changed(agent_pod(found["AgentRun"]), "metadata.labels", {})
    admitted(
        cluster.kubectl(
            "-n",
            TENANT,
            "create",
            "--dry-run=server",
            "-f",
            "-",
            input=json.dumps(bare),
            check=False,
        )
    )


PRIVILEGED = {"privileged": True}


def set_label(value: str) -> Callable[[dict[str, Any]], None]:
    def change(pod: dict[str, Any]) -> None:
        pod["metadata"]["labels"]["mcp-operator.dev/agent-run"] = value

    return change


def set_path(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(pod: dict[str, Any]) -> None:
        pod.update(changed(pod, path, value))

    return change


FORBIDDEN_PODS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "without our labels": (set_path("metadata.labels", {}), "without the label"),
    "without an ownerReference": (
        set_path("metadata.ownerReferences", "-"),
        "controller ownerReference",
    ),
    "owned by another run than its label names": (
        set_label("someone-else"),
        "controller ownerReference",
    ),
    # (allowPrivilegeEscalation false contradicts privileged: the API server refuses that pair)
    "privileged": (set_path("spec.containers.0.securityContext", PRIVILEGED), "privileged"),
    "with an added capability": (
        set_path("spec.containers.0.securityContext.capabilities.add", ["NET_ADMIN"]),
        "adds capabilities",
    ),
    "on the host network": (set_path("spec.hostNetwork", True), "host network"),
    "in the host PID namespace": (set_path("spec.hostPID", True), "host network, PID or IPC"),
    "with a hostPath volume": (
        set_path("spec.volumes", [{"name": "root", "hostPath": {"path": "/"}}]),
        "hostPath",
    ),
    "with the default token": (
        set_path("spec.automountServiceAccountToken", True),
        "default ServiceAccount",
    ),
    # What the operator renders (the restricted Pod Security Standard), one field each.
    "with a container that may run as root": (
        set_path("spec.containers.0.securityContext.runAsNonRoot", False),
        "may run as root",
    ),
    "with a container that does not say it runs as non-root": (
        set_path("spec.containers.0.securityContext.runAsNonRoot", "-"),
        "may run as root",
    ),
    "with a container of user 0": (
        set_path("spec.containers.0.securityContext.runAsUser", 0),
        "may run as root",
    ),
    "with seccomp Unconfined": (
        set_path("spec.containers.0.securityContext.seccompProfile", {"type": "Unconfined"}),
        "seccomp profile is not RuntimeDefault",
    ),
    "without a seccomp profile": (
        set_path("spec.containers.0.securityContext.seccompProfile", "-"),
        "seccomp profile is not RuntimeDefault",
    ),
    "allowing privilege escalation": (
        set_path("spec.containers.0.securityContext.allowPrivilegeEscalation", True),
        "allows privilege escalation",
    ),
    "with capabilities not dropped": (
        set_path("spec.containers.0.securityContext.capabilities", {"drop": ["NET_RAW"]}),
        "does not drop all capabilities",
    ),
}


@pytest.mark.parametrize("shape", list(FORBIDDEN_PODS))
def test_the_operators_identity_is_refused_a_pod(cluster: Cluster, shape: str) -> None:
    change, words = FORBIDDEN_PODS[shape]
    pod = agent_pod(owners(cluster)["AgentRun"])
    change(pod)
    message = refused(create_as(cluster, OPERATOR, pod), "guard rail", words)
    assert f"Pod {TENANT}/shape-check" in message


@pytest.mark.parametrize(
    ("namespace", "words"),
    [(ELSEWHERE, "does not watch"), ("kube-system", "system namespace")],
)
def test_the_operators_identity_is_refused_pods_outside_its_namespaces(
    cluster: Cluster, namespace: str, words: str
) -> None:
    pod = agent_pod(owners(cluster)["AgentRun"])
    # Its ClusterRole would allow it: RBAC alone is not what refuses this.
    assert (
        cluster.kubectl(
            "auth", "can-i", "create", "pods", f"--as={OPERATOR}", "-n", namespace
        ).stdout.strip()
        == "yes"
    )
    refused(create_as(cluster, OPERATOR, pod, namespace=namespace), "guard rail", words)


def test_the_operators_identity_is_refused_deployments_not_of_its_servers(cluster: Cluster) -> None:
    deployment = server_deployment(owners(cluster)["MCPServer"])
    for path, value, words in (
        ("metadata.ownerReferences", "-", "controller ownerReference"),
        ("spec.template.spec.hostNetwork", True, "host network"),
        ("spec.template.spec.containers.0.securityContext", PRIVILEGED, "privileged"),
        ("spec.template.spec.volumes", [{"name": "r", "hostPath": {"path": "/"}}], "hostPath"),
    ):
        refused(create_as(cluster, OPERATOR, changed(deployment, path, value)), words)


def test_the_operators_identity_cannot_take_over_an_object_it_does_not_control(
    cluster: Cluster,
) -> None:
    owner = owners(cluster)["MCPServer"]
    cluster.apply(
        TENANT,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "db"},
            "spec": {"selector": {"app": "postgres"}, "ports": [{"name": "db", "port": 5432}]},
        },
    )
    takeover = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "db",
            "labels": {
                "app.kubernetes.io/managed-by": "mcp-operator",
                "mcp-operator.dev/server": owner["name"],
            },
            "ownerReferences": [owner],
        },
        "spec": {
            "selector": {"mcp-operator.dev/server": owner["name"]},
            "ports": [{"name": "db", "port": 5432}],
        },
    }
    result = cluster.kubectl(
        "--as", OPERATOR, "-n", TENANT, "apply", "--server-side", "--force-conflicts",
        "--field-manager=mcp-operator", "-f", "-", input=json.dumps(takeover), check=False,
    )  # fmt: skip
    refused(result, "guard rail", "not controlled by the same MCPServer")
    service = cluster.get_json("service/db", "-n", TENANT)
    assert service["spec"]["selector"] == {"app": "postgres"}
    assert not service["metadata"].get("ownerReferences")


# -- only a bridge holds a key to a managed server -----------------------------------------

SERVER_AUDIENCE = f"mcpserver.mcp-operator.dev/{TENANT}/tools"
RUN_LABEL = "mcp-operator.dev/agent-run"


def key_volume(audience: str = SERVER_AUDIENCE) -> dict[str, Any]:
    token = {"audience": audience, "expirationSeconds": 600, "path": "token"}
    return {"name": "key", "projected": {"sources": [{"serviceAccountToken": token}]}}


def tenant_pod(name: str, *, label: bool, audience: str | None) -> dict[str, Any]:
    """alice's own Pod, with the run label and a projected token of ``audience`` if asked."""
    container: dict[str, Any] = {"name": "alice", "image": "registry.example/curl:1"}
    spec: dict[str, Any] = {"containers": [container]}
    if audience is not None:
        spec["volumes"] = [key_volume(audience)]
        container["volumeMounts"] = [{"name": "key", "mountPath": "/key"}]
    labels = {RUN_LABEL: "fake"} if label else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": spec}  # fmt: skip


@pytest.mark.parametrize(
    ("label", "audience", "words"),
    [
        (True, SERVER_AUDIENCE, "projects a token of an MCP server's audience"),
        (False, SERVER_AUDIENCE, "projects a token of an MCP server's audience"),
        (True, None, "carries the label mcp-operator.dev/agent-run"),
    ],
    ids=["token and run label", "token", "run label"],
)
def test_a_tenant_who_may_create_pods_cannot_make_one_that_holds_a_bridges_key(
    cluster: Cluster, label: bool, audience: str | None, words: str
) -> None:
    # The attack of the review: alice may create Pods (an AgentRun needs it of her), so
    # she ran one of her own with a server's token and the run label, and called it.
    with granted(cluster, "create-pods"):
        pod = tenant_pod("alice-direct", label=label, audience=audience)
        message = refused(create_as(cluster, ALICE, pod), "only the operator may create", words)
        assert f"Pod {TENANT}/alice-direct" in message
        # Her own Pods stay hers: another audience, no run label.
        other = tenant_pod("alice-own", label=False, audience="https://vault.example")
        admitted(create_as(cluster, ALICE, other))
        admitted(create_as(cluster, ALICE, tenant_pod("alice-plain", label=False, audience=None)))
    # The operator creates run Pods (the guard rails judge their shape).
    run_pod = keyed_run_pod(owners(cluster)["AgentRun"], "shape-keys")
    admitted(create_as(cluster, OPERATOR, run_pod))


def test_a_token_of_a_servers_audience_is_minted_only_for_a_node_or_the_operator(
    cluster: Cluster,
) -> None:
    def token(user: str, namespace: str, account: str, audience: str) -> Any:
        return cluster.kubectl(
            "--as", user, "-n", namespace, "create", "token", account,
            f"--audience={audience}", check=False,
        )  # fmt: skip

    with granted(cluster, "mint-tokens"):
        # RBAC lets her; the policy refuses the audience, whichever ServiceAccount.
        for account in ("default", "robot"):
            message = refused(token(ALICE, TENANT, account, SERVER_AUDIENCE))
            assert "only a node or the operator may request a token" in message
            assert f"ServiceAccount {TENANT}/{account}" in message
        assert token(ALICE, TENANT, "default", "https://vault.example").returncode == 0
    # The operator's probe asks for its own token of a server's audience.
    own = token(OPERATOR, SYSTEM, "mcpo-mcp-operator", SERVER_AUDIENCE)
    assert own.returncode == 0, own.stderr


def keyed_run_pod(owner: dict[str, Any], name: str = "keyed-run") -> dict[str, Any]:
    """A run Pod as the operator renders it: the bridge, a native sidecar, holds the key."""
    pod = agent_pod(owner)
    pod["metadata"]["name"] = name
    bridge = restricted_container("mcp-bridge")
    bridge["restartPolicy"] = "Always"
    bridge["volumeMounts"] = [{"name": "key", "mountPath": "/var/run/mcp-operator/key"}]
    pod["spec"]["initContainers"] = [bridge]
    pod["spec"]["volumes"] = [key_volume()]
    return pod


@pytest.fixture(scope="module")
def run_pod(cluster: Cluster) -> str:
    """A run Pod really stored (created by the operator's identity); no node runs it here."""
    pod = keyed_run_pod(owners(cluster)["AgentRun"])
    admitted(create_as(cluster, OPERATOR, pod, dry=False))
    return str(pod["metadata"]["name"])


def test_no_ephemeral_container_joins_a_run_pod_but_the_operators(
    cluster: Cluster, run_pod: str, tmp_path: Path
) -> None:
    debugger = {
        "name": "debug",
        "image": "registry.example/busybox:1",
        # It mounts the bridge's token volume (sharing the bridge's processes by
        # targetContainerName would be the other way in).
        "targetContainerName": "agent",
        "volumeMounts": [{"name": "key", "mountPath": "/key"}],
    }

    def add_to(name: str) -> Any:
        pod = cluster.get_json(f"pod/{name}", "-n", TENANT)
        pod["spec"]["ephemeralContainers"] = [debugger if name == run_pod else
                                              {**debugger, "targetContainerName": "alice",
                                               "volumeMounts": []}]  # fmt: skip
        body = tmp_path / f"{name}.json"
        body.write_text(json.dumps(pod))
        path = f"/api/v1/namespaces/{TENANT}/pods/{name}/ephemeralcontainers"
        return cluster.kubectl("--as", ALICE, "replace", "--raw", path, "-f", str(body),
                               check=False)  # fmt: skip

    cluster.apply(TENANT, tenant_pod("alice-debuggable", label=False, audience=None))
    with granted(cluster, "debug-pods"):
        message = refused(add_to(run_pod), "only the operator may add an ephemeral container")
        assert f"Pod {TENANT}/{run_pod}" in message
        # RBAC alone decides for a Pod that holds no key.
        admitted(add_to("alice-debuggable"))
    stored = cluster.get_json(f"pod/{run_pod}", "-n", TENANT)
    assert not stored["spec"].get("ephemeralContainers")


def test_no_exec_or_attach_into_a_bridge_and_no_change_of_a_run_pod(
    cluster: Cluster, run_pod: str
) -> None:
    def as_alice(*args: str) -> Any:
        return cluster.kubectl("--as", ALICE, "-n", TENANT, *args, check=False, timeout=30)

    cluster.apply(TENANT, tenant_pod("alice-debuggable", label=False, audience=None))
    with granted(cluster, "debug-pods"):
        for verb, args in (
            ("exec", ("exec", run_pod, "-c", "mcp-bridge", "--", "cat", "/var/run/x")),
            ("attach", ("attach", run_pod, "-c", "mcp-bridge")),
        ):
            message = refused(as_alice(*args), f"only the operator may {verb} into container")
            assert "mcp-bridge" in message
        # The agent's container is not refused by the policy (no node runs it here: the
        # API server fails to reach a kubelet, after admission).
        agent = as_alice("exec", run_pod, "-c", "agent", "--", "true")
        assert agent.returncode != 0 and "ValidatingAdmissionPolicy" not in agent.stderr
        # Her own Pod cannot take the run label, nor the run Pod another bridge image.
        for value in ("fake", ""):  # an empty value is a label too (NetworkPolicy: Exists)
            refused(as_alice("label", "pod/alice-debuggable", f"{RUN_LABEL}={value}"),
                    "only the operator may change the run label or the spec")  # fmt: skip
        swap = {"spec": {"initContainers": [{"name": "mcp-bridge",
                                             "image": "registry.example/evil:1"}]}}  # fmt: skip
        refused(as_alice("patch", f"pod/{run_pod}", "-p", json.dumps(swap)),
                "only the operator may change the run label or the spec")  # fmt: skip
        refused(as_alice("label", f"pod/{run_pod}", f"{RUN_LABEL}=other", "--overwrite"),
                "only the operator may change the run label")  # fmt: skip
        # Labels that are not the run's stay hers to set, on the run Pod too.
        assert as_alice("label", f"pod/{run_pod}", "team=a").returncode == 0


# -- the operator itself, running as its ServiceAccount ------------------------------------


@contextlib.contextmanager
def operator_as(cluster: Cluster, release: str, system: str, tmp_path: Path) -> Iterator[list[str]]:
    """The chart's operator of ``release`` running here as its ServiceAccount, with the
    arguments its Deployment gives it; yields them."""
    deployment = cluster.get_json(f"deployment/{release}-mcp-operator", "-n", system)
    args: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    args = [a for a in args if not a.startswith(("--liveness", "--metrics", "--loopback"))]
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_SERVICE")}
    account = f"{release}-mcp-operator"
    env.update(
        KUBECONFIG=str(cluster.service_account_kubeconfig(system, account, tmp_path)),
        POD_NAMESPACE=system,
        POD_NAME=f"{release}-0",
    )
    log_path = tmp_path / f"operator-{release}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "mcp_operator", *args, "--liveness=none", "--metrics=none",
                "--loopback-destinations=allowed",
            ],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            yield args
        finally:
            stop_process_group(process, grace=20, name="operator")
            print("\n".join(log_path.read_text(errors="replace").splitlines()[-25:]))
    text = log_path.read_text(errors="replace")
    assert "guard rail" not in text, text[-3000:]


def isolation(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        server = cluster.get_json(f"mcpserver/{name}", "-n", namespace)
        wanted = condition(server, "Isolation")
        return wanted or None

    return dict(eventually(f"the Isolation condition of {name}", found, 60))


def test_the_operator_reconciles_under_the_guard_rails_and_reports_the_policy_layer(
    cluster: Cluster, tmp_path: Path
) -> None:
    with peers.mcp_server_time() as url, operator_as(cluster, "mcpo", SYSTEM, tmp_path) as args:
        assert "--tenant-admission-policy=mcpo-mcp-operator-tenants" in args
        assert "--bridge-key-policy=mcpo-mcp-operator-bridge-keys" in args
        cluster.apply(TENANT, mcpserver("time", mode="external", url=url))
        # A managed server: the operator applies its Deployment and Service, which the
        # guard rails admit (the shapes it renders are ours).
        cluster.apply(TENANT, changed(managed("served"), "spec.probe", NO_PROBE))

        def ready() -> dict[str, Any] | None:
            found: dict[str, Any] = cluster.get_json("mcpserver/time", "-n", TENANT)
            return found if condition(found, "Ready").get("status") == "True" else None

        server = eventually("the server Ready", ready, 60)
        eventually(
            "the managed server's Deployment", exists(cluster, TENANT, "deployment/served"), 60
        )
        cluster.get_json("service/served", "-n", TENANT)
        isolated = isolation(cluster, TENANT, "served")
        assert (isolated["status"], isolated["reason"]) == ("True", "BridgeOnly")
        assert "mcpo-mcp-operator-bridge-keys" in isolated["message"]
        # An AgentRun: its ConfigMap and its Pod, both admitted by the guard rails.
        cluster.apply(TENANT, agentrun("served-run"))

        def run_pod() -> dict[str, Any] | None:
            run: dict[str, Any] = cluster.get_json("agentrun/served-run", "-n", TENANT)
            name = run.get("status", {}).get("podName")
            return run if name and exists(cluster, TENANT, f"pod/{name}")() else None

        run = eventually("the AgentRun's Pod", run_pod, 60)
        cluster.get_json(f"configmap/{run['status']['configMapName']}", "-n", TENANT)
    assert server["status"]["admission"] == "PolicyAndLabels"
    assert run["status"]["admission"] == "PolicyAndLabels"
    assert condition(server, "Isolation") == {}, "an external server (not ours) has none"


def test_the_namespace_scoped_install_says_what_it_cannot_prevent(
    cluster: Cluster, tmp_path: Path
) -> None:
    # No bridge-key policy (a namespace-scoped install cannot install cluster policies):
    # a Pod of anyone who may create Pods there projects a server's token and is admitted.
    pods = role("create-pods", [rule("", ["pods"], ["create"])])
    cluster.apply(SCOPED_WATCHED, pods)
    cluster.apply(SCOPED_WATCHED, changed(binding("create-pods"), "subjects.0.name", "bob"))
    eventually(
        "bob may create Pods",
        lambda: (
            cluster.kubectl(
                "auth", "can-i", "create", "pods", "--as=bob", "-n", SCOPED_WATCHED, check=False
            ).stdout.strip()
            == "yes"
        ),
        30,
    )
    audience = f"mcpserver.mcp-operator.dev/{SCOPED_WATCHED}/served"
    attack = tenant_pod("direct", label=True, audience=audience)
    admitted(create_as(cluster, "bob", attack, namespace=SCOPED_WATCHED))
    with operator_as(cluster, "mcps", SCOPED_SYSTEM, tmp_path) as args:
        assert not [a for a in args if a.startswith("--bridge-key-policy")]
        cluster.apply(SCOPED_WATCHED, changed(managed("served"), "spec.probe", NO_PROBE))
        isolated = isolation(cluster, SCOPED_WATCHED, "served")
    assert (isolated["status"], isolated["reason"]) == ("False", "BridgeKeysUnguarded")
    message = isolated["message"]
    assert f"whoever may create Pods in {SCOPED_WATCHED}" in message
    assert "without a run's bridge" in message and "serviceaccounts/token" in message


# -- least privilege, measured --------------------------------------------------------------

COLUMNS = {
    # the column of docs/security.md's table: (identity, namespace)
    "cluster-wide, a watched namespace": (OPERATOR, TENANT),
    "cluster-wide, its own namespace": (OPERATOR, SYSTEM),
    "namespace-scoped, a watched namespace": (SCOPED_OPERATOR, SCOPED_WATCHED),
    "namespace-scoped, its own namespace": (SCOPED_OPERATOR, SCOPED_SYSTEM),
    "namespace-scoped, any other namespace": (SCOPED_OPERATOR, TENANT),
}
ROW = re.compile(r"^(\S+)\s+\[(.*?)\]\s+\[(.*?)\]\s+\[(.*?)\]\s*$")


def can_list(cluster: Cluster, user: str, namespace: str) -> dict[str, set[str]]:
    """``kubectl auth can-i --list``: verbs by resource (names kept when a rule has them)."""
    answer = cluster.kubectl("auth", "can-i", "--list", f"--as={user}", "-n", namespace)
    found: dict[str, set[str]] = {}
    for line in answer.stdout.splitlines()[1:]:
        match = ROW.match(line)
        if not match or not match.group(1) or match.group(2):
            continue  # non-resource URLs
        resource, names, verbs = match.group(1), match.group(3), match.group(4)
        if names == user.rsplit(":", 1)[-1]:
            names = "its own"  # a rule on the identity's own ServiceAccount (resourceNames)
        key = f"{resource} ({names})" if names else resource
        found.setdefault(key, set()).update(verbs.split())
    return found


def documented() -> dict[str, dict[str, set[str]]]:
    """The table under "What the operator's identity can do" of docs/security.md."""
    text = SECURITY_DOC.read_text()
    section = text.split("### What the operator's identity can do", 1)[1]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    table: dict[str, dict[str, set[str]]] = {column: {} for column in header[1:]}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if not cells[0].startswith("`"):
            break
        resource = cells[0].strip("`")
        for column, cell in zip(header[1:], cells[1:], strict=True):
            verbs = {v.strip() for v in cell.replace("—", "").split(",") if v.strip()}
            if verbs:
                table[column][resource] = verbs
    return table


def test_what_the_identity_can_do_is_the_table_of_the_security_doc(cluster: Cluster) -> None:
    table = documented()
    assert set(table) == set(COLUMNS)
    # What every authenticated identity may do (discovery, self reviews) is not the chart's.
    everyone = can_list(cluster, f"system:serviceaccount:{SYSTEM}:nobody", TENANT)
    for column, (user, namespace) in COLUMNS.items():
        measured = {
            resource: verbs - everyone.get(resource, set())
            for resource, verbs in can_list(cluster, user, namespace).items()
        }
        measured = {resource: verbs for resource, verbs in measured.items() if verbs}
        assert measured == table[column], column
