"""The chart and the kustomize manifests installed for real: the operator runs in the cluster.

On the cluster with its node, the operator's image built from this checkout is installed
with Helm (the chart) and with ``kubectl apply -k`` (an overlay of ``deploy/`` that only
sets the image, the watched namespace and the node's registry, as a user's overlay
would). Then, for each:

- two replicas run (in a namespace that enforces the ``restricted`` Pod Security
  Standard) and one of them holds the Lease; when that Pod is deleted, the other takes
  the Lease over and reconciles the next change;
- a managed stdio server named by its image alone (server-everything) is read from the
  node's registry by the operator in the cluster, runs with the adapter and
  ``mcp-stdio-exec`` from the operator's own image (read from its Pod) and becomes Ready
  through the in-cluster probe, by its Service's DNS name;
- an AgentRun's Pod runs the bridge as a native sidecar from that same image, and its agent
  (the image's Python with the SDK client) lists and calls a tool through it: Succeeded.

The in-cluster operator watches only the test's namespace: other tests on the same node run
operators of their own. The CRDs are the session's (``node_crds``); neither installer's
removal takes them away.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_operator.dev import images
from tests.support import pods
from tests.support.cluster import REPO, Cluster
from tests.support.objects import agentrun, condition, eventually, python_agent

pytestmark = pytest.mark.e2e

CHART = REPO / "charts" / "mcp-operator"
DEPLOY = REPO / "deploy"
KUSTOMIZE_NAMESPACE = "mcp-operator-system"

AGENT = """
import asyncio, json, os
from mcp import Client

async def main():
    async with Client(os.environ["MCP_BRIDGE_URL"], mode="auto", cache=None) as client:
        tools = sorted(tool.name for tool in (await client.list_tools()).tools)
        echo = await client.call_tool("everything_echo", {"message": "in the cluster"})
    text = echo.model_dump(by_alias=True, exclude_none=True)["content"][0]["text"]
    print("AGENT-RESULT " + json.dumps({"tools": tools, "echo": text}), flush=True)

asyncio.run(main())
"""


@dataclass(frozen=True)
class Installed:
    """Where an installation put the operator, and which namespace it watches."""

    operator_namespace: str
    watched: str
    image: str
    """The operator's image as its Deployment names it."""


def repository_and_tag(reference: str) -> tuple[str, str]:
    """``host/name`` and the tag the image was pushed under (``node_images`` pins digests)."""
    host, _, path = reference.split("@", 1)[0].partition("/")
    name = path.split(":", 1)[0]
    repository = f"{host}/{name}"
    return repository, images.built([name])[name].tag


def restricted_namespace(cluster: Cluster, name: str) -> None:
    cluster.kubectl("create", "namespace", name)
    cluster.kubectl("label", "namespace", name, "pod-security.kubernetes.io/enforce=restricted")


@contextlib.contextmanager
def with_helm(cluster: Cluster, references: dict[str, str], tmp_path: Path) -> Iterator[Installed]:
    """The chart, released into a namespace of its own that it also watches."""
    namespace = f"chart-{uuid.uuid4().hex[:8]}"
    restricted_namespace(cluster, namespace)
    repository, tag = repository_and_tag(references["mcp-operator"])
    registry_host = cluster.plane.registry

    def run_helm(*args: str) -> None:
        cluster.helm(namespace, *args, home=tmp_path, timeout=300)

    values = [
        f"image.repository={repository}",
        f"image.tag={tag}",
        f"watchNamespaces={{{namespace}}}",
        # The node's registry speaks plain HTTP; images named alone are read there.
        f"insecureRegistries={{{registry_host}}}",
        f"allowedRegistries={{{registry_host}}}",
        "verbose=true",
    ]
    run_helm("install", "mcpo", str(CHART), *(f"--set={value}" for value in values))
    try:
        yield Installed(namespace, namespace, f"{repository}:{tag}")
    finally:
        run_helm("uninstall", "mcpo", "--wait", "--timeout=120s")
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


@contextlib.contextmanager
def with_kustomize(
    cluster: Cluster, references: dict[str, str], tmp_path: Path
) -> Iterator[Installed]:
    """``kubectl apply -k`` of an overlay of deploy/ (image, watched namespace, registry);
    the CRDs taken out of it, since the session's other tests live on them."""
    watched = f"kust-{uuid.uuid4().hex[:8]}"
    restricted_namespace(cluster, watched)
    repository, tag = repository_and_tag(references["mcp-operator"])
    registry_host = cluster.plane.registry
    extra_args = [
        f"--namespace={watched}",
        f"--insecure-registries={registry_host}",
        f"--allowed-registries={registry_host}",
        "--verbose",
    ]
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    base = os.path.relpath(DEPLOY, overlay)
    crd_removal = [
        {
            "target": {"kind": "CustomResourceDefinition", "name": name},
            "patch": yaml.safe_dump(
                {
                    "$patch": "delete",
                    "apiVersion": "apiextensions.k8s.io/v1",
                    "kind": "CustomResourceDefinition",
                    "metadata": {"name": name},
                }
            ),
        }
        for name in ("mcpservers.mcp-operator.dev", "agentruns.mcp-operator.dev")
    ]
    args_patch = [
        {"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": arg}
        for arg in extra_args
    ]
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [base],
        "images": [
            {"name": "ghcr.io/mcp-operator/mcp-operator", "newName": repository, "newTag": tag}
        ],
        "patches": [
            *crd_removal,
            {
                "target": {"kind": "Deployment", "name": "mcp-operator"},
                "patch": yaml.safe_dump(args_patch),
            },
        ],
    }
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    cluster.kubectl("apply", "--server-side", "-k", str(overlay), timeout=120)
    try:
        yield Installed(KUSTOMIZE_NAMESPACE, watched, f"{repository}:{tag}")
    finally:
        cluster.kubectl("delete", "-k", str(overlay), "--wait=false", check=False, timeout=120)
        cluster.kubectl("delete", "namespace", watched, "--wait=false", check=False)


INSTALLERS = {"helm": with_helm, "kustomize": with_kustomize}


def holder(cluster: Cluster, installed: Installed, names: set[str]) -> str:
    """The replica holding the operator's Lease ("" while none of ``names`` does)."""
    held = [
        # The holder identity is the Pod's name and a suffix of its own run.
        lease["spec"].get("holderIdentity", "").rsplit("_", 1)[0]
        for lease in cluster.get_json("-n", installed.operator_namespace, "leases")["items"]
    ]
    found = [name for name in held if name in names]
    assert len(found) <= 1, f"more than one replica holds a Lease: {found}"
    return found[0] if found else ""


def operator_pods(cluster: Cluster, installed: Installed) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = cluster.get_json(
        "-n", installed.operator_namespace, "pods", "-l", "app.kubernetes.io/component=operator"
    )["items"]
    return [p for p in found if "deletionTimestamp" not in p["metadata"]]


def operator_logs(cluster: Cluster, installed: Installed) -> str:
    return "\n".join(
        f"--- {p['metadata']['name']} ---\n"
        + cluster.kubectl(
            "-n",
            installed.operator_namespace,
            "logs",
            p["metadata"]["name"],
            "--tail=60",
            check=False,
        ).stdout
        for p in operator_pods(cluster, installed)
    )


@pytest.mark.parametrize("installer", sorted(INSTALLERS))
def test_the_installed_operator_runs_in_the_cluster_and_serves_a_managed_server_and_a_run(
    node_cluster: Cluster,
    node_images: dict[str, str],
    node_crds: None,
    tmp_path: Path,
    installer: str,
) -> None:
    cluster = node_cluster
    with INSTALLERS[installer](cluster, node_images, tmp_path) as installed:
        explain = lambda: operator_logs(cluster, installed)  # noqa: E731
        replicas = eventually(
            "two operator replicas Running",
            lambda: operator_pods(cluster, installed),
            180,
            until=lambda found: len(found) == 2 and all(pods.phase(p) == "Running" for p in found),
            explain=explain,
        )
        names = {p["metadata"]["name"] for p in replicas}
        for pod in replicas:
            assert pod["spec"]["containers"][0]["image"] == installed.image
        leader = eventually(
            "a replica holding the Lease", lambda: holder(cluster, installed, names)
        )

        namespace = installed.watched
        cluster.apply(
            namespace,
            {
                "apiVersion": "mcp-operator.dev/v1alpha1",
                "kind": "MCPServer",
                "metadata": {"name": "everything"},
                "spec": {
                    "mode": "managed",
                    "toolsAllow": ["echo", "get-sum"],
                    "deployment": {"image": node_images["server-everything"]},
                },
            },
        )
        server = eventually(
            "MCPServer everything Ready (probed from inside the cluster)",
            lambda: cluster.get_json("-n", namespace, "mcpserver/everything"),
            180,
            until=lambda obj: condition(obj, "Ready").get("status") == "True",
            explain=explain,
        )
        assert server["status"]["toolCount"] == 2
        server_pod = pods.only_pod(cluster, namespace, "mcp-operator.dev/server=everything")
        spec = server_pod["spec"]
        ours = {c["name"]: c["image"] for c in [*spec["initContainers"], *spec["containers"]]}
        # The adapter and both init containers from the operator's own image, read from its Pod
        # and pinned to the digest the node runs (the one that was pushed).
        own = f"{installed.image}@{node_images['mcp-operator'].split('@')[1]}"
        assert {ours[n] for n in ("fifos", "stdio-exec", "adapter")} == {own}
        assert ours["server"].startswith(node_images["server-everything"].split("@")[0])

        agent = python_agent(node_images["mcp-operator"], AGENT)
        cluster.apply(namespace, agentrun("agent", ["everything"], agent))
        pod = pods.wait_for_phase(cluster, namespace, "agent", "Succeeded", "Failed", timeout=180)
        bridge = next(c for c in pod["spec"]["initContainers"] if c["name"] == "mcp-bridge")
        assert bridge["image"] == own and bridge["restartPolicy"] == "Always"
        agent_log = pods.logs(cluster, namespace, "agent", "agent")
        assert pods.phase(pod) == "Succeeded", agent_log[-3000:]
        result = pods.marked(agent_log, "AGENT-RESULT")
        assert result == {
            "tools": ["everything_echo", "everything_get-sum"],
            "echo": "Echo: in the cluster",
        }
        eventually(
            "the run Succeeded",
            lambda: cluster.get_json("-n", namespace, "agentrun/agent"),
            60,
            until=lambda run: condition(run, "Succeeded").get("status") == "True",
        )

        # The leader goes (a node drain, a rollout): the other replica takes the Lease over
        # and goes on reconciling.
        cluster.kubectl("-n", installed.operator_namespace, "delete", "pod", leader)
        eventually(
            "another replica holding the Lease",
            lambda: holder(
                cluster,
                installed,
                {p["metadata"]["name"] for p in operator_pods(cluster, installed)} - {leader},
            ),
            60,
            explain=explain,
        )
        cluster.kubectl(
            "-n",
            namespace,
            "patch",
            "mcpserver/everything",
            "--type=merge",
            "-p",
            '{"spec": {"toolsAllow": ["echo"]}}',
        )
        eventually(
            "the new leader reconciling the change",
            lambda: cluster.get_json("-n", namespace, "mcpserver/everything"),
            90,
            until=lambda obj: (
                obj["status"].get("observedGeneration") == 2 and obj["status"].get("toolCount") == 1
            ),
            explain=explain,
        )
