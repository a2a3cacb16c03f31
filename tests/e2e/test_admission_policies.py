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
}


def alice_can(cluster: Cluster, name: str) -> bool:
    verb, resource = GRANTS[name]
    answer = cluster.kubectl(
        "auth", "can-i", verb, resource, f"--as={ALICE}", "-n", TENANT, check=False
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


# -- the operator itself, running as its ServiceAccount ------------------------------------


def test_the_operator_reconciles_under_the_guard_rails_and_reports_the_policy_layer(
    cluster: Cluster, tmp_path: Path
) -> None:
    deployment = cluster.get_json("deployment/mcpo-mcp-operator", "-n", SYSTEM)
    args: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--tenant-admission-policy=mcpo-mcp-operator-tenants" in args
    args = [a for a in args if not a.startswith(("--liveness", "--metrics", "--loopback"))]
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_SERVICE")}
    env.update(
        KUBECONFIG=str(cluster.service_account_kubeconfig(SYSTEM, "mcpo-mcp-operator", tmp_path)),
        POD_NAMESPACE=SYSTEM,
        POD_NAME="mcpo-0",
    )
    log_path = tmp_path / "operator.log"
    with peers.mcp_server_time() as url, log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "mcp_operator", *args, "--liveness=none", "--metrics=none",
                "--loopback-destinations=allowed",
            ],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
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
            # An AgentRun: its ConfigMap and its Pod, both admitted by the guard rails.
            cluster.apply(TENANT, agentrun("served-run"))

            def run_pod() -> dict[str, Any] | None:
                run: dict[str, Any] = cluster.get_json("agentrun/served-run", "-n", TENANT)
                name = run.get("status", {}).get("podName")
                return run if name and exists(cluster, TENANT, f"pod/{name}")() else None

            run = eventually("the AgentRun's Pod", run_pod, 60)
            cluster.get_json(f"configmap/{run['status']['configMapName']}", "-n", TENANT)
        finally:
            stop_process_group(process, grace=20, name="operator")
            print("\n".join(log_path.read_text(errors="replace").splitlines()[-25:]))
    assert server["status"]["admission"] == "PolicyAndLabels"
    assert run["status"]["admission"] == "PolicyAndLabels"
    log = log_path.read_text(errors="replace")
    assert "guard rail" not in log, log[-3000:]


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
