"""Managed stdio servers named by their image alone, read from a real local registry.

``crane registry serve`` holds the images, behind a token-auth front
(``tests/support/registry.py``); the operator reads each image's configuration
through it, as it would from a public or private registry. The first image is
what the GitHub MCP server image is like: no shell, no package manager, a static
binary (here the official Go SDK's hello server) started by its ENTRYPOINT with
``stdio``, and a non-root USER. That one is also pushed into the registry of the cluster
with a node, whose kubelet pulls it and runs the server container as that user, so the
wrapper really runs without a shell; the operator must become Ready and list the tool.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_operator.dev.processes import BIN_DIR
from tests.support import needs, pods, registry
from tests.support.cluster import Cluster
from tests.support.objects import condition, eventually

pytestmark = [pytest.mark.e2e, needs.mark(needs.image_tools_missing())]

SERVER_PATH = "/server/mcp-hello-server"
USER = "10001:10001"


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The registry with three images: public (a multi-arch index), private, and no tag."""
    workdir = tmp_path_factory.mktemp("registry")
    files = {SERVER_PATH: BIN_DIR / "mcp-hello-server"}
    with registry.running(workdir) as local:
        common = {"entrypoint": [SERVER_PATH], "cmd": ["stdio"], "user": USER, "workdir": workdir}
        manifest = local.push_image("tools/hello", "single", files, **common)
        index = local.index_of("tools/hello", "1", "single")
        private = local.push_image("private/hello", "1", files, **common)
        yield {
            "registry": local,
            "workdir": workdir,
            "public": f"{registry.FRONT_HOST}/tools/hello:1",
            "manifest": manifest,
            "index": index,
            "private": f"{registry.FRONT_HOST}/private/hello:1",
            "private_digest": private,
        }


def mcpserver(name: str, deployment: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "mcp-operator.dev/v1alpha1",
        "kind": "MCPServer",
        "metadata": {"name": name},
        "spec": {
            "mode": "managed",
            "deployment": deployment,
            "probe": {"intervalSeconds": 10, "timeoutSeconds": 5},
        },
    }


def server_container(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    deployment = eventually(
        "the Deployment",
        lambda: cluster.get_json(
            "-n", namespace, "deployments", "-l", f"mcp-operator.dev/server={name}"
        )["items"],
    )[0]
    spec = deployment["spec"]["template"]["spec"]
    return {"pod": spec, **next(c for c in spec["containers"] if c["name"] == "server")}


def ready_condition(cluster: Cluster, namespace: str, name: str, reason: str) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        ready = condition(cluster.get_json("-n", namespace, f"mcpserver/{name}"), "Ready")
        return ready if ready.get("reason") == reason else None

    return eventually(f"Ready reason {reason}", reached, timeout=60)


@pytest.mark.usefixtures("node_operator")
def test_an_image_without_a_shell_named_alone_is_served_and_lists_its_tools(
    node_cluster: Cluster, node_namespace: str, tmp_path: Path
) -> None:
    cluster, namespace = node_cluster, node_namespace
    # The node's registry: the one its containerd pulls from (plain HTTP on the bridge).
    local = registry.Registry(cluster.plane.registry)
    files = {SERVER_PATH: BIN_DIR / "mcp-hello-server"}
    common = {"entrypoint": [SERVER_PATH], "cmd": ["stdio"], "user": USER, "workdir": tmp_path}
    manifest = local.push_image("tools/hello", "single", files, **common)
    index = local.index_of("tools/hello", "1", "single")
    public = f"{local.backend}/tools/hello:1"
    cluster.apply(namespace, mcpserver("hello", {"image": public}))
    container = server_container(cluster, namespace, "hello")
    pinned = f"{public}@{index}"
    assert container["image"] == pinned, "the Pod runs exactly the image that was read"
    assert container["command"] == [
        "/run/mcp-exec/mcp-stdio-exec",
        "--fifo-dir=/run/mcp",
        "--",
        SERVER_PATH,
        "stdio",
    ]
    assert (
        container["securityContext"]["runAsUser"],
        container["securityContext"]["runAsGroup"],
    ) == (
        10001,
        10001,
    )

    root = tmp_path / "rootfs"
    local.extract(f"{local.backend}/tools/hello@{manifest}", root)
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == [
        "server",
        "server/mcp-hello-server",
    ], "the image holds the server and nothing else: no shell"

    def ready() -> dict[str, Any] | None:
        obj = cluster.get_json("-n", namespace, "mcpserver/hello")
        return obj if condition(obj, "Ready").get("status") == "True" else None

    pod = pods.only_pod(cluster, namespace, "mcp-operator.dev/server=hello")
    name = pod["metadata"]["name"]
    obj = eventually(
        "Ready", ready, timeout=120, explain=lambda: pods.describe(cluster, namespace, name)
    )
    pod = pods.wait_for_phase(cluster, namespace, name, "Running")
    running = pods.process_identity(pods.main_process(pod, "server"))
    assert (running.uid, running.gid) == (10001, 10001), "the kubelet ran it as the image's USER"
    assert [t["name"] for t in obj["status"]["tools"]] == ["hello_greet"]
    assert obj["status"]["serverInfo"]["name"] == "greeter"


@pytest.mark.usefixtures("operator")
def test_a_private_image_is_read_with_its_pull_secret_and_refused_without(
    cluster: Cluster, namespace: str, images: dict[str, Any]
) -> None:
    deployment = {"image": images["private"], "imagePullSecrets": [{"name": "pull"}]}
    cluster.apply(namespace, mcpserver("private", deployment))
    missing = ready_condition(cluster, namespace, "private", "SecretNotFound")
    assert f"Secret {namespace}/pull" in missing["message"]

    cluster.kubectl(
        "-n",
        namespace,
        "create",
        "secret",
        "docker-registry",
        "pull",
        f"--docker-server={registry.FRONT_HOST}",
        f"--docker-username={registry.USER}",
        "--docker-password=not-the-password",
    )
    refused = ready_condition(cluster, namespace, "private", "ImagePullUnauthorized")
    assert f"Secret {namespace}/pull" in refused["message"]
    assert "not-the-password" not in str(cluster.get_json("-n", namespace, "mcpserver/private"))

    cluster.kubectl("-n", namespace, "delete", "secret", "pull")
    cluster.kubectl(
        "-n",
        namespace,
        "create",
        "secret",
        "docker-registry",
        "pull",
        f"--docker-server={registry.FRONT_HOST}",
        f"--docker-username={registry.USER}",
        f"--docker-password={registry.PASSWORD}",
    )

    def pinned_private() -> dict[str, Any] | None:
        container = server_container(cluster, namespace, "private")
        return container if container["image"].endswith(images["private_digest"]) else None

    container = eventually("the Deployment of the private image", pinned_private, timeout=60)
    assert container["image"] == f"{images['private']}@{images['private_digest']}"
    assert container["pod"]["imagePullSecrets"] == [{"name": "pull"}]
    assert container["command"][3:] == [SERVER_PATH, "stdio"]


@pytest.mark.usefixtures("operator")
@pytest.mark.parametrize(
    ("image", "reason"),
    [
        ("tools/hello:no-such-tag", "ImageNotFound"),
        ("tools/no-such-image:1", "ImageNotFound"),
    ],
)
def test_an_unknown_image_or_tag_gives_its_condition_and_no_deployment(
    cluster: Cluster, namespace: str, images: dict[str, Any], image: str, reason: str
) -> None:
    name = "unknown"
    cluster.apply(namespace, mcpserver(name, {"image": f"{registry.FRONT_HOST}/{image}"}))
    ready = ready_condition(cluster, namespace, name, reason)
    assert ready["status"] == "False"
    obj = cluster.get_json("-n", namespace, f"mcpserver/{name}")
    assert condition(obj, "Deployed")["reason"] == reason
    assert image.split(":")[0] in ready["message"]
    deployments = cluster.get_json("-n", namespace, "deployments")["items"]
    assert deployments == [], "nothing is deployed on a guess"
