"""The chart's namespace-scoped mode on a real API server, run with exactly its identity.

``helm install`` renders Roles in the watched namespace and none at cluster scope; the
operator then runs here with the rendered arguments and a token of the chart's
ServiceAccount (as its Pod would authenticate), reconciles an MCPServer to Ready, holds its
Lease, and is refused what the mode does not grant. A control plane of its own, for the
reasons of ``test_install``: the session's admin operator would mask a missing permission.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_operator.dev.cluster import ControlPlane
from tests.support import needs, peers
from tests.support.cluster import CRDS, Cluster, operator_process
from tests.support.objects import condition, eventually

pytestmark = pytest.mark.e2e

CHART = Path(__file__).resolve().parents[2] / "charts" / "mcp-operator"
RELEASE, SYSTEM, WATCHED, OTHER = "mcpo", "ops", "team-a", "elsewhere"
ACCOUNT = f"system:serviceaccount:{SYSTEM}:{RELEASE}-mcp-operator"


@pytest.fixture(scope="module")
def plane() -> Iterator[Cluster]:
    with ControlPlane() as control_plane:
        yield Cluster(control_plane)


@contextlib.contextmanager
def operator(kubeconfig: Path, args: list[str], log_path: Path) -> Iterator[None]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_SERVICE")}
    # As the chart's Pod: its namespace (the Lease's) and its name (its identity).
    env.update(KUBECONFIG=str(kubeconfig), POD_NAMESPACE=SYSTEM, POD_NAME="mcpo-0")
    command, *flags = args  # the chart's container args: "run", then its flags
    assert command == "run", args
    with operator_process(*flags, "--liveness=none", "--metrics=none", env=env, log_path=log_path):
        yield


def can(cluster: Cluster, *args: str) -> bool:
    answer = cluster.kubectl("auth", "can-i", f"--as={ACCOUNT}", *args, check=False)
    return answer.stdout.strip() == "yes"


def test_the_namespace_scoped_chart_identity_reconciles_and_is_refused_the_rest(
    plane: Cluster, tmp_path: Path
) -> None:
    cluster = plane
    helm = needs.helm()
    for namespace in (SYSTEM, WATCHED, OTHER):
        cluster.kubectl("create", "namespace", namespace)
    # The mode's precondition: CRDs installed before the operator (it cannot watch them).
    cluster.kubectl("apply", "--server-side", "-f", str(CRDS))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRDS))
    env = {
        **os.environ,
        **{k: str(tmp_path / k) for k in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME")},
    }
    installed = subprocess.run(
        [
            helm,
            f"--kubeconfig={cluster.kubeconfig}",
            "--namespace",
            SYSTEM,
            "install",
            RELEASE,
            str(CHART),
            "--skip-crds",
            "--set",
            "namespaceScoped=true",
            "--set",
            f"watchNamespaces={{{WATCHED}}}",
            # The test server listens on loopback; a namespace-scoped identity cannot read
            # Namespace labels, so the opt-in is the operator-wide setting.
            "--set",
            "loopbackDestinations=allowed",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    assert cluster.kubectl("get", f"clusterrole/{RELEASE}-mcp-operator", check=False).returncode
    deployment = cluster.get_json(f"deployment/{RELEASE}-mcp-operator", "-n", SYSTEM)
    args: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace-scoped" in args

    # Refused what it does not need: other namespaces, cluster-scoped reads, other Leases.
    assert can(cluster, "get", "secrets", "-n", WATCHED)
    assert can(cluster, "update", "leases", "-n", SYSTEM)
    assert not can(cluster, "get", "secrets", "-n", OTHER)
    assert not can(cluster, "list", "mcpservers.mcp-operator.dev", "-n", OTHER)
    assert not can(cluster, "list", "customresourcedefinitions")
    assert not can(cluster, "list", "namespaces")
    assert not can(cluster, "update", "leases", "-n", WATCHED)

    log_path = tmp_path / "operator.log"
    with (
        peers.mcp_server_time() as url,
        operator(
            cluster.service_account_kubeconfig(SYSTEM, f"{RELEASE}-mcp-operator", tmp_path),
            args,
            log_path,
        ),
    ):
        for namespace in (WATCHED, OTHER):
            cluster.apply(
                namespace,
                {
                    "apiVersion": "mcp-operator.dev/v1alpha1",
                    "kind": "MCPServer",
                    "metadata": {"name": "time"},
                    "spec": {"mode": "external", "url": url},
                },
            )

        def ready() -> dict[str, Any] | None:
            found: dict[str, Any] = cluster.get_json("mcpserver/time", "-n", WATCHED)
            return found if condition(found, "Ready").get("status") == "True" else None

        server = eventually("the watched namespace's server Ready", ready, 60)
        # Not told of the chart's tenant policy (it could not read it): the labels alone.
        assert server["status"]["admission"] == "Labels"
        events = cluster.get_json("events", "-n", WATCHED)["items"]
        assert any(e["reason"] == "ToolsDiscovered" for e in events)
        lease = cluster.get_json(f"lease/{RELEASE}-mcp-operator", "-n", SYSTEM)
        assert lease["spec"]["holderIdentity"].startswith("mcpo-0_")
        untouched = cluster.get_json("mcpserver/time", "-n", OTHER)
        assert untouched["status"] == {"observedGeneration": 0}, "not watched, not touched"
    log = log_path.read_text(errors="replace")
    assert "Forbidden" not in log and " 403" not in log, log[-3000:]
