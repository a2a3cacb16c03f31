"""Installing the operator on a real API server: kustomize, Helm, and RBAC that is enough.

The module starts a control plane of its own (the same binaries as the session's
``cluster`` fixture): the installation adds cluster-scoped objects (CRDs,
ClusterRoles), and the RBAC test must be sure that only the operator under test,
running with the ServiceAccount's token, reconciles its objects — the session's
operator (started as admin by other modules) would otherwise mask a missing
permission.

No kubelet runs on this plane: the operator's Pods are created (so they passed Pod
Security admission in a namespace that enforces "restricted") and stay Pending. The RBAC
test runs ``mcp-operator run`` from here with a token of the installed
ServiceAccount, exactly as the Pod would authenticate. The same installations running
the operator in a cluster with a node, from its image: ``test_install_in_cluster.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_operator.dev.cluster import ControlPlane
from mcp_operator.dev.processes import kubectl_path
from tests.support import peers
from tests.support.cluster import Cluster, operator_process
from tests.support.objects import condition, eventually

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
CHART = REPO / "charts" / "mcp-operator"
SYSTEM_NAMESPACE = "mcp-operator-system"
SERVICE_ACCOUNT = f"system:serviceaccount:{SYSTEM_NAMESPACE}:mcp-operator"


@pytest.fixture(scope="module")
def plane() -> Iterator[Cluster]:
    """A control plane for this module alone (see the module docstring for why)."""
    with ControlPlane() as control_plane:
        yield Cluster(control_plane)


@pytest.fixture(scope="module")
def installed(plane: Cluster) -> Cluster:
    """``kubectl apply --server-side -k deploy/``, as the install guide says."""
    plane.kubectl("apply", "--server-side", "-k", str(DEPLOY))
    plane.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/mcpservers.mcp-operator.dev",
        "crd/agentruns.mcp-operator.dev",
    )
    return plane


def wait_until(what: str, check: Callable[[], Any], timeout: float = 60) -> Any:
    return eventually(what, check, timeout, interval=0.3)


def pods(cluster: Cluster, namespace: str, selector: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cluster.get_json("pods", "-n", namespace, "-l", selector)["items"]
    return items


# -- kustomize --------------------------------------------------------------------------


def test_kubectl_apply_k_installs_an_operator_whose_pod_passes_restricted_admission(
    installed: Cluster,
) -> None:
    deployment = installed.get_json("deployment/mcp-operator", "-n", SYSTEM_NAMESPACE)
    # Two replicas electing a leader (tests/e2e/test_leader.py), kept by a disruption budget.
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    budget = installed.get_json("poddisruptionbudget/mcp-operator", "-n", SYSTEM_NAMESPACE)
    assert budget["spec"]["minAvailable"] == 1
    namespace = installed.get_json(f"namespace/{SYSTEM_NAMESPACE}")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    # The ReplicaSet controller could create the Pod: Pod Security admission let it in.

    def both_pods() -> list[dict[str, Any]] | None:
        found = pods(installed, SYSTEM_NAMESPACE, "app.kubernetes.io/component=operator")
        return found if len(found) == 2 else None

    created = wait_until("the operator's two Pods are created", both_pods)
    for pod in created:
        assert pod["status"]["phase"] == "Pending"  # no kubelet here
        assert pod["spec"]["serviceAccountName"] == "mcp-operator"
    # Applying again fails on nothing and changes nothing (GitOps re-syncs all the time).
    installed.kubectl("apply", "--server-side", "-k", str(DEPLOY))
    again = installed.get_json("deployment/mcp-operator", "-n", SYSTEM_NAMESPACE)
    assert again["metadata"]["generation"] == deployment["metadata"]["generation"]


# -- Helm -------------------------------------------------------------------------------


def test_helm_installs_upgrades_and_uninstalls_the_chart_in_another_namespace(
    plane: Cluster, tmp_path: Path
) -> None:
    namespace = f"helm-{uuid.uuid4().hex[:8]}"
    plane.kubectl("create", "namespace", namespace)
    plane.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")

    def run_helm(*args: str) -> str:
        return plane.helm(namespace, *args, home=tmp_path)

    run_helm("install", "mcpo", str(CHART), "--set", "watchNamespaces={team-a}")
    plane.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", "crd/mcpservers.mcp-operator.dev"
    )
    deployment = plane.get_json("deployment/mcpo-mcp-operator", "-n", namespace)
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace=team-a" in args
    selector = "app.kubernetes.io/instance=mcpo,app.kubernetes.io/component=operator"
    wait_until("the chart's operator Pod is created", lambda: pods(plane, namespace, selector))
    role = plane.get_json("clusterrole/mcpo-mcp-operator")
    deployed = yaml.safe_load_all((DEPLOY / "rbac.yaml").read_text())
    assert role["rules"] == next(d for d in deployed if d["kind"] == "ClusterRole")["rules"]

    run_helm("upgrade", "mcpo", str(CHART), "--set", "logFormat=text")
    deployment = plane.get_json("deployment/mcpo-mcp-operator", "-n", namespace)
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--log-format=text" in args and not any(a.startswith("--namespace") for a in args)

    run_helm("uninstall", "mcpo")
    gone = plane.kubectl("get", "clusterrole/mcpo-mcp-operator", check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr
    # Helm never deletes CRDs (and with them every MCPServer): that is the user's call.
    plane.kubectl("get", "crd/mcpservers.mcp-operator.dev")


# -- RBAC -------------------------------------------------------------------------------


@contextlib.contextmanager
def operator_as(kubeconfig: Path, log_path: Path, *args: str) -> Iterator[None]:
    """``mcp-operator run`` with ``kubeconfig`` in a process group of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_SERVICE")}
    env.update(KUBECONFIG=str(kubeconfig), HOSTNAME="rbac-test-operator")
    # Leader election stays on: the Role for the Lease is part of what is checked.
    with operator_process("--liveness=none", "--metrics=none", *args, env=env, log_path=log_path):
        yield


@pytest.mark.parametrize("scope", ["all-namespaces", "one-namespace"])
def test_the_service_accounts_permissions_are_enough_to_reconcile_without_a_403(
    installed: Cluster, tmp_path: Path, scope: str
) -> None:
    cluster = installed
    namespace = f"rbac-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", namespace)
    kubeconfig = cluster.service_account_kubeconfig(SYSTEM_NAMESPACE, "mcp-operator", tmp_path)
    log_path = tmp_path / "operator.log"
    args = ["--namespace", namespace] if scope == "one-namespace" else []
    # The loopback test server needs the Namespace's opt-in: the operator reads the label.
    args.append("--loopback-destinations=labelled")
    cluster.kubectl(
        "label", "namespace", namespace, "mcp-operator.dev/loopback-destinations=allowed"
    )
    cluster.apply(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "token", "labels": {"mcp-operator.dev/for-mcp-servers": "true"}},
            "stringData": {"header": "Bearer not-checked-by-server-everything"},
        },
    )
    secret_header = {
        "name": "Authorization",
        "valueFrom": {"secretKeyRef": {"name": "token", "key": "header"}},
    }
    with peers.server_everything() as url, operator_as(kubeconfig, log_path, *args):
        # External: watch MCPServers and Secrets, read a Secret, patch status, post Events.
        cluster.apply(
            namespace,
            {
                "apiVersion": "mcp-operator.dev/v1alpha1",
                "kind": "MCPServer",
                "metadata": {"name": "everything"},
                "spec": {"mode": "external", "url": url, "headers": [secret_header]},
            },
        )
        # Managed (not probed: nothing runs its Pod): server-side apply of a Deployment
        # and a Service, a Secret read for the Pod template checksum, Pods listed.
        cluster.apply(
            namespace,
            {
                "apiVersion": "mcp-operator.dev/v1alpha1",
                "kind": "MCPServer",
                "metadata": {"name": "managed"},
                "spec": {
                    "mode": "managed",
                    "transport": "streamable-http",
                    "deployment": {
                        "image": "registry.example/mcp/server:1",
                        "env": [{"name": "TOKEN", "valueFrom": secret_header["valueFrom"]}],
                    },
                    "probe": {"enabled": False},
                },
            },
        )

        def ready() -> dict[str, Any] | None:
            obj: dict[str, Any] = cluster.get_json("-n", namespace, "mcpserver/everything")
            return obj if condition(obj, "Ready").get("status") == "True" else None

        def deployed() -> dict[str, Any] | None:
            obj: dict[str, Any] = cluster.get_json("-n", namespace, "mcpserver/managed")
            return obj if condition(obj, "Deployed") else None

        try:
            everything = wait_until("mcpserver/everything is Ready", ready)
            managed = wait_until("mcpserver/managed has a Deployed condition", deployed)
            events = wait_until(
                "the operator posted Events",
                lambda: [
                    e
                    for e in cluster.get_json("events", "-n", namespace)["items"]
                    if e.get("reportingInstance") == "rbac-test-operator"
                ],
            )
        finally:
            log = log_path.read_text(errors="replace")
            print(f"\n--- operator log ({scope}) ---\n{log[-6000:]}")

    assert everything["status"]["toolCount"] > 0
    assert condition(managed, "Deployed")["reason"] in (
        "RolloutPending",
        "ReplicasUnavailable",
        "RolloutInProgress",
    )
    deployment = cluster.get_json("-n", namespace, "deployment/managed", "--show-managed-fields")
    assert {f["manager"] for f in deployment["metadata"]["managedFields"]} >= {"mcp-operator"}
    cluster.get_json("-n", namespace, "service/managed")
    assert {e["reason"] for e in events} >= {"ToolsDiscovered"}
    for sign in (r"\b403\b", "Forbidden", "forbidden", "Not enough permissions"):
        assert not re.search(sign, log), f"{sign!r} in the operator log"


# Verbs the operator has and needs (a sample), and verbs it must not have.
ALLOWED = [
    ("list", "mcpservers.mcp-operator.dev", None),
    ("get", "pods", None),
    ("patch", "mcpservers.mcp-operator.dev", "status"),
    ("patch", "deployments.apps", None),
    ("create", "services", None),
    ("get", "secrets", None),
    ("create", "events", None),
    ("watch", "customresourcedefinitions.apiextensions.k8s.io", None),
    ("create", "pods", None),
    ("create", "configmaps", None),
    # Every child is read before it is applied (an object the owner does not control is
    # never written: NameConflict).
    ("get", "configmaps", None),
    ("get", "services", None),
    ("get", "deployments.apps", None),
    ("delete", "agentruns.mcp-operator.dev", None),
    ("patch", "agentruns.mcp-operator.dev", "status"),
]
DENIED = [
    ("delete", "secrets", None),
    ("create", "secrets", None),
    ("update", "secrets", None),
    ("create", "clusterroles.rbac.authorization.k8s.io", None),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io", None),
    ("create", "rolebindings.rbac.authorization.k8s.io", None),
    ("delete", "mcpservers.mcp-operator.dev", None),
    ("update", "mcpservers.mcp-operator.dev", None),
    ("patch", "mcpservers.mcp-operator.dev", None),
    ("delete", "deployments.apps", None),
    ("delete", "pods", None),
    ("delete", "configmaps", None),
    ("update", "agentruns.mcp-operator.dev", None),
    ("patch", "agentruns.mcp-operator.dev", None),
    ("create", "pods", "exec"),
    ("get", "services", "proxy"),
    ("create", "serviceaccounts", "token"),
    ("get", "nodes", None),
    ("create", "namespaces", None),
    ("patch", "customresourcedefinitions.apiextensions.k8s.io", None),
    ("impersonate", "users", None),
]


def can_i(cluster: Cluster, verb: str, resource: str, sub: str | None) -> bool:
    args = ["auth", "can-i", verb, resource, f"--as={SERVICE_ACCOUNT}", "--all-namespaces"]
    if sub:
        args.append(f"--subresource={sub}")
    answer = cluster.kubectl(*args, check=False)
    assert answer.stdout.strip() in ("yes", "no"), answer.stderr
    return answer.stdout.strip() == "yes"


def test_the_service_account_has_the_permissions_it_needs_and_no_others(
    installed: Cluster,
) -> None:
    allowed = [(v, r, s) for v, r, s in ALLOWED if not can_i(installed, v, r, s)]
    assert allowed == [], "the operator lacks these permissions"
    denied = [(v, r, s) for v, r, s in DENIED if can_i(installed, v, r, s)]
    assert denied == [], "the operator has permissions it does not need"


def test_the_tokens_the_rbac_test_uses_are_the_service_accounts_and_are_refused_elsewhere(
    installed: Cluster, tmp_path: Path
) -> None:
    kubeconfig = installed.service_account_kubeconfig(SYSTEM_NAMESPACE, "mcp-operator", tmp_path)

    def kubectl_as_operator(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [kubectl_path(), f"--kubeconfig={kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    whoami = kubectl_as_operator("auth", "whoami", "-o", "json")
    assert whoami.returncode == 0, whoami.stderr
    assert json.loads(whoami.stdout)["status"]["userInfo"]["username"] == SERVICE_ACCOUNT
    refused = kubectl_as_operator("get", "clusterroles")
    assert refused.returncode != 0 and "Forbidden" in refused.stderr
