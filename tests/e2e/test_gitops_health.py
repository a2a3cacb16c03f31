"""GitOps health on a real API server: kstatus (the real library), Argo CD's Lua, kubectl wait.

The module starts a control plane of its own so that it can look at objects before any
operator has seen them (the session's operator would reconcile them at once), then starts
one operator and follows the same objects to Ready. No kubelet runs: the AgentRun's Pod is
moved to Running by patching its status as a kubelet would.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_operator.dev.cluster import ControlPlane
from tests.support import needs, peers
from tests.support.cluster import CRDS, Cluster, operator_process
from tests.support.gitops import argocd_health, kstatus, kstatus_missing
from tests.support.objects import condition, eventually

pytestmark = [pytest.mark.e2e, needs.mark(kstatus_missing())]

NAMESPACE = "gitops"


@pytest.fixture(scope="module")
def plane() -> Iterator[Cluster]:
    with ControlPlane() as control_plane:
        cluster = Cluster(control_plane)
        cluster.kubectl("apply", "--server-side", "-f", str(CRDS))
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRDS))
        cluster.kubectl("create", "namespace", NAMESPACE)
        yield cluster


@contextlib.contextmanager
def operator(cluster: Cluster, log_path: Path) -> Iterator[None]:
    with operator_process(
        "--liveness=none",
        "--metrics=none",
        "--no-leader-election",
        # The test server listens on loopback (refused unless the operator is told).
        "--loopback-destinations=allowed",
        env=cluster.env(),
        log_path=log_path,
    ):
        yield


def get(cluster: Cluster, kind: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = cluster.get_json("-n", NAMESPACE, f"{kind}/{name}")
    return found


def verdicts(obj: dict[str, Any]) -> tuple[str, str]:
    """(kstatus, Argo CD) of one object."""
    return kstatus(obj)["status"], argocd_health(obj)["status"]


def test_kstatus_and_argo_cd_say_in_progress_until_ready_and_current_after(
    plane: Cluster, tmp_path: Path
) -> None:
    cluster = plane
    with peers.mcp_server_time() as url:
        cluster.apply(
            NAMESPACE,
            {
                "apiVersion": "mcp-operator.dev/v1alpha1",
                "kind": "MCPServer",
                "metadata": {"name": "time"},
                "spec": {"mode": "external", "url": url},
            },
        )
        cluster.apply(
            NAMESPACE,
            {
                "apiVersion": "mcp-operator.dev/v1alpha1",
                "kind": "AgentRun",
                "metadata": {"name": "triage"},
                "spec": {
                    "mcpServers": [{"name": "time"}],
                    "agent": {"image": "registry.example/agent:1"},
                },
            },
        )
        # Nobody has seen them: the CRDs' default says so, and both tools read it.
        for kind, name in (("mcpserver", "time"), ("agentrun", "triage")):
            fresh = get(cluster, kind, name)
            assert fresh["status"] == {"observedGeneration": 0}, fresh.get("status")
            assert verdicts(fresh) == ("InProgress", "Progressing"), kind
            assert "generation" in kstatus(fresh)["message"]
        waited = cluster.kubectl(
            "-n",
            NAMESPACE,
            "wait",
            "--for=condition=Ready",
            "mcpserver/time",
            "--timeout=1s",
            check=False,
        )
        assert waited.returncode != 0, "kubectl wait must not pass before Ready"

        with operator(cluster, tmp_path / "operator.log"):
            started = time.monotonic()
            cluster.kubectl(
                "-n",
                NAMESPACE,
                "wait",
                "--for=condition=Ready",
                "mcpserver/time",
                "--timeout=60s",
            )
            print(f"\nkubectl wait returned {time.monotonic() - started:.1f} s after start")
            ready = get(cluster, "mcpserver", "time")
            assert condition(ready, "Ready")["observedGeneration"] == 1
            assert verdicts(ready) == ("Current", "Healthy")

            # The run's Pod is Pending (no kubelet): Ready=False PodPending is in progress.
            pending = eventually(
                "the run to wait for its Pod",
                lambda: get(cluster, "agentrun", "triage"),
                60,
                until=lambda run: condition(run, "Ready").get("reason") == "PodPending",
            )
            assert verdicts(pending) == ("InProgress", "Progressing")

            # A spec change not acted on yet is in progress again, whatever Ready says.
            cluster.kubectl(
                "-n",
                NAMESPACE,
                "patch",
                "mcpserver/time",
                "--type=merge",
                "-p",
                '{"spec": {"toolsAllow": ["get_*"]}}',
            )
            changed = get(cluster, "mcpserver", "time")
            if changed["status"]["observedGeneration"] != 2:
                assert verdicts(changed) == ("InProgress", "Progressing")
            cluster.kubectl(
                "-n",
                NAMESPACE,
                "wait",
                "--for=jsonpath={.status.observedGeneration}=2",
                "mcpserver/time",
                "--timeout=60s",
            )
            assert verdicts(get(cluster, "mcpserver", "time")) == ("Current", "Healthy")

            # The kubelet's part: the Pod runs, the run is Ready.
            pod = pending["status"]["podName"]
            cluster.kubectl(
                "-n",
                NAMESPACE,
                "patch",
                f"pod/{pod}",
                "--subresource=status",
                "--type=merge",
                "-p",
                '{"status": {"phase": "Running"}}',
            )
            cluster.kubectl(
                "-n",
                NAMESPACE,
                "wait",
                "--for=condition=Ready",
                "agentrun/triage",
                "--timeout=60s",
            )
            assert verdicts(get(cluster, "agentrun", "triage")) == ("Current", "Healthy")
