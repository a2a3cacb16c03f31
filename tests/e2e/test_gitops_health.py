"""GitOps health on a real API server: kstatus (the real library), Argo CD's Lua, kubectl wait.

The test looks at objects before any operator has seen them (on the cluster with a node,
whose operators watch only their own test's namespace), then starts one operator and
follows the same objects to Ready. The node is cordoned meanwhile, so that the AgentRun's
Pod really is Pending (unschedulable); once it is uncordoned the kubelet runs the Pod and
the run becomes Ready.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import needs, peers
from tests.support.cluster import Cluster, operator_process
from tests.support.gitops import argocd_health, kstatus, kstatus_missing
from tests.support.objects import condition, eventually

pytestmark = [pytest.mark.e2e, needs.mark(kstatus_missing())]

AGENT = ["python", "-c", "import time; time.sleep(600)"]
"""An agent that keeps its Pod running (the operator image's Python)."""


@contextlib.contextmanager
def operator(
    cluster: Cluster, namespace: str, images: dict[str, str], log_path: Path
) -> Iterator[None]:
    with operator_process(
        "--liveness=none",
        "--metrics=none",
        "--no-leader-election",
        # Only this test's namespace (the node's cluster is shared by the session).
        f"--namespace={namespace}",
        # The bridge sidecar from the image built from this checkout (no Pod to read it from).
        f"--adapter-image={images['mcp-operator']}",
        # The test server listens on loopback (refused unless the operator is told).
        "--loopback-destinations=allowed",
        env=cluster.env(),
        log_path=log_path,
    ):
        yield


@contextlib.contextmanager
def cordoned(cluster: Cluster) -> Iterator[None]:
    """The node takes no new Pods (uncordoned on leaving, whatever happened)."""
    node = cluster.plane.node.name
    cluster.kubectl("cordon", node)
    try:
        yield
    finally:
        cluster.kubectl("uncordon", node)


def get(cluster: Cluster, namespace: str, kind: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = cluster.get_json("-n", namespace, f"{kind}/{name}")
    return found


def verdicts(obj: dict[str, Any]) -> tuple[str, str]:
    """(kstatus, Argo CD) of one object."""
    return kstatus(obj)["status"], argocd_health(obj)["status"]


def test_kstatus_and_argo_cd_say_in_progress_until_ready_and_current_after(
    node_cluster: Cluster, node_images: dict[str, str], node_namespace: str, tmp_path: Path
) -> None:
    cluster, namespace = node_cluster, node_namespace
    with peers.mcp_server_time() as url, cordoned(cluster):
        cluster.apply(
            namespace,
            {
                "apiVersion": "mcp-operator.dev/v1alpha1",
                "kind": "MCPServer",
                "metadata": {"name": "time"},
                "spec": {"mode": "external", "url": url},
            },
        )
        cluster.apply(
            namespace,
            {
                "apiVersion": "mcp-operator.dev/v1alpha1",
                "kind": "AgentRun",
                "metadata": {"name": "triage"},
                "spec": {
                    "mcpServers": [{"name": "time"}],
                    "agent": {"image": node_images["mcp-operator"], "command": AGENT},
                },
            },
        )
        # Nobody has seen them: the CRDs' default says so, and both tools read it.
        for kind, name in (("mcpserver", "time"), ("agentrun", "triage")):
            fresh = get(cluster, namespace, kind, name)
            assert fresh["status"] == {"observedGeneration": 0}, fresh.get("status")
            assert verdicts(fresh) == ("InProgress", "Progressing"), kind
            assert "generation" in kstatus(fresh)["message"]
        waited = cluster.kubectl(
            "-n",
            namespace,
            "wait",
            "--for=condition=Ready",
            "mcpserver/time",
            "--timeout=1s",
            check=False,
        )
        assert waited.returncode != 0, "kubectl wait must not pass before Ready"

        with operator(cluster, namespace, node_images, tmp_path / "operator.log"):
            started = time.monotonic()
            cluster.kubectl(
                "-n",
                namespace,
                "wait",
                "--for=condition=Ready",
                "mcpserver/time",
                "--timeout=60s",
            )
            print(f"\nkubectl wait returned {time.monotonic() - started:.1f} s after start")
            ready = get(cluster, namespace, "mcpserver", "time")
            assert condition(ready, "Ready")["observedGeneration"] == 1
            assert verdicts(ready) == ("Current", "Healthy")

            # The run's Pod is Pending (the node is cordoned): Ready=False PodPending is in
            # progress.
            pending = eventually(
                "the run to wait for its Pod",
                lambda: get(cluster, namespace, "agentrun", "triage"),
                60,
                until=lambda run: condition(run, "Ready").get("reason") == "PodPending",
            )
            assert verdicts(pending) == ("InProgress", "Progressing")

            # A spec change not acted on yet is in progress again, whatever Ready says.
            cluster.kubectl(
                "-n",
                namespace,
                "patch",
                "mcpserver/time",
                "--type=merge",
                "-p",
                '{"spec": {"toolsAllow": ["get_*"]}}',
            )
            changed = get(cluster, namespace, "mcpserver", "time")
            if changed["status"]["observedGeneration"] != 2:
                assert verdicts(changed) == ("InProgress", "Progressing")
            cluster.kubectl(
                "-n",
                namespace,
                "wait",
                "--for=jsonpath={.status.observedGeneration}=2",
                "mcpserver/time",
                "--timeout=60s",
            )
            assert verdicts(get(cluster, namespace, "mcpserver", "time")) == ("Current", "Healthy")

            # The kubelet's part: the node takes the Pod, runs it, the run is Ready.
            cluster.kubectl("uncordon", cluster.plane.node.name)
            cluster.kubectl(
                "-n",
                namespace,
                "wait",
                "--for=condition=Ready",
                "agentrun/triage",
                "--timeout=120s",
            )
            assert verdicts(get(cluster, namespace, "agentrun", "triage")) == ("Current", "Healthy")
