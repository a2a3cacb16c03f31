"""The local cluster's real node: containerd 2.x, the kubelet and kube-proxy of v1.36.

What only a real kubelet and container runtime can answer: the node registers Ready on
the cluster bridge, a Pod's image is pulled from the node's registry and run to
``Succeeded``, a read-only root filesystem refuses writes (and an emptyDir does not),
``runAsNonRoot`` is met by an image's numeric ``USER`` (and refused for root), the
kubelet's API refuses an anonymous client (and serves the API server's certificate).
Tests marked ``own_node`` start a node of their own (before the session's, see
``conftest.py``): a stopped node leaves nothing on the host, and the next start takes
back what a killed one left. The test image is Debian's static busybox alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_operator.dev import node_host
from mcp_operator.dev.cluster import ControlPlane
from mcp_operator.dev.node import NODE_DIR
from mcp_operator.dev.node_config import KUBELET_PORT, NODE_IP
from tests.support import needs
from tests.support.cluster import Cluster
from tests.support.registry import Registry
from tests.support.waiting import eventually

BUSYBOX = Path("/bin/busybox")
NONROOT_UID = 65532

pytestmark = [
    pytest.mark.e2e,
    needs.mark(needs.real_node_missing()),
    needs.mark(None if BUSYBOX.is_file() else "busybox-static missing: `make node-packages`"),
]


# ---------------------------------------------------------------- helpers


def push_busybox(registry: str, tmp_path: Path, user: str) -> str:
    """An image of busybox alone, run as ``user``; its pullable reference by digest."""
    digest = Registry(backend=registry).push_image(
        "e2e/busybox",
        f"user-{user}",
        {"/bin/busybox": BUSYBOX},
        entrypoint=["/bin/busybox"],
        cmd=[],
        user=user,
        workdir=tmp_path,
    )
    return f"{registry}/e2e/busybox@{digest}"


def pod(name: str, image: str, script: str, **security: Any) -> dict[str, Any]:
    """A Pod as we make them (non-root, read-only root, no capabilities, RuntimeDefault)
    that runs ``script`` in busybox's shell once; ``security`` overrides container fields."""
    context: dict[str, Any] = {
        "runAsNonRoot": True,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    context.update(security)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "command": ["/bin/busybox", "sh", "-c", script],
                    "securityContext": context,
                    "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                }
            ],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        },
    }


def finished(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    """The Pod once it has ended (``Succeeded`` or ``Failed``)."""
    found: dict[str, Any] = eventually(
        f"Pod {name} to finish",
        lambda: cluster.get_json("-n", namespace, "pod", name),
        timeout=90,
        until=lambda p: p.get("status", {}).get("phase") in ("Succeeded", "Failed"),
    )
    return found


def logs(cluster: Cluster, namespace: str, name: str) -> str:
    """The container's log, read as kubectl reads it: API server -> kubelet API."""
    return cluster.kubectl("-n", namespace, "logs", name).stdout


@pytest.fixture
def node_namespace(node_cluster: Cluster) -> Iterator[str]:
    name = f"n-{uuid.uuid4().hex[:10]}"
    node_cluster.kubectl("create", "namespace", name)
    # Pods may start once the namespace's default ServiceAccount exists.
    eventually(
        "the default ServiceAccount",
        lambda: (
            node_cluster.kubectl("-n", name, "get", "sa", "default", check=False).returncode == 0
        ),
    )
    yield name
    node_cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def nonroot_image(node_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> str:
    return push_busybox(
        node_cluster.plane.registry, tmp_path_factory.mktemp("busybox"), str(NONROOT_UID)
    )


# ---------------------------------------------------------------- on the session's node


def test_the_node_registers_ready_on_the_cluster_bridge(node_cluster: Cluster) -> None:
    node = node_cluster.plane.node
    assert node is not None
    found = node_cluster.get_json("node", node.name)
    conditions = {c["type"]: c["status"] for c in found["status"]["conditions"]}
    assert conditions["Ready"] == "True"
    addresses = {a["type"]: a["address"] for a in found["status"]["addresses"]}
    assert addresses["InternalIP"] == NODE_IP
    info = found["status"]["nodeInfo"]
    assert info["kubeletVersion"] == node_cluster.version["gitVersion"]
    assert info["containerRuntimeVersion"].startswith("containerd://2.")
    assert found["spec"]["podCIDR"] == node.pod_cidr
    # Schedulable: the node-lifecycle controller removed the not-ready taint.
    assert not [t for t in found["spec"].get("taints", []) if "not-ready" in t["key"]]
    # The start was measured (target: under 10 s on an idle machine once built).
    assert 0 < node_cluster.plane.started_seconds < 60


def test_a_pod_pulled_from_the_nodes_registry_runs_to_succeeded(
    node_cluster: Cluster, node_namespace: str, nonroot_image: str
) -> None:
    node_cluster.apply(node_namespace, pod("hello", nonroot_image, "echo hello from the node"))
    ended = finished(node_cluster, node_namespace, "hello")
    assert ended["status"]["phase"] == "Succeeded", ended["status"]
    assert ended["spec"]["nodeName"] == "mcp-operator-node"
    assert ended["status"]["podIP"].startswith("10.244.0.")
    assert logs(node_cluster, node_namespace, "hello").strip() == "hello from the node"


def test_a_read_only_root_filesystem_refuses_writes_and_an_empty_dir_takes_them(
    node_cluster: Cluster, node_namespace: str, nonroot_image: str
) -> None:
    script = "/bin/busybox touch /written 2>&1; echo root=$?; echo x > /scratch/written && echo ok"
    node_cluster.apply(node_namespace, pod("readonly", nonroot_image, script))
    assert finished(node_cluster, node_namespace, "readonly")["status"]["phase"] == "Succeeded"
    assert logs(node_cluster, node_namespace, "readonly").splitlines() == [
        "touch: /written: Read-only file system",
        "root=1",
        "ok",
    ]
    # The other side: the same write with a writable root succeeds (as root: only root may
    # write to the image's / even then).
    writable = pod(
        "writable",
        nonroot_image,
        script,
        readOnlyRootFilesystem=False,
        runAsNonRoot=False,
        runAsUser=0,
    )
    node_cluster.apply(node_namespace, writable)
    finished(node_cluster, node_namespace, "writable")
    assert logs(node_cluster, node_namespace, "writable").splitlines() == ["root=0", "ok"]


def test_run_as_non_root_is_met_by_the_images_numeric_user_and_refused_for_root(
    node_cluster: Cluster, node_namespace: str, nonroot_image: str, tmp_path: Path
) -> None:
    node_cluster.apply(node_namespace, pod("nonroot", nonroot_image, "id -u; id -g"))
    assert finished(node_cluster, node_namespace, "nonroot")["status"]["phase"] == "Succeeded"
    assert logs(node_cluster, node_namespace, "nonroot").split()[0] == str(NONROOT_UID)

    root_image = push_busybox(node_cluster.plane.registry, tmp_path, "0")
    node_cluster.apply(node_namespace, pod("root", root_image, "id -u"))

    def waiting_reason() -> str:
        status = node_cluster.get_json("-n", node_namespace, "pod", "root").get("status", {})
        for container in status.get("containerStatuses", []):
            waiting = container.get("state", {}).get("waiting", {})
            if "runAsNonRoot" in waiting.get("message", ""):
                return str(waiting.get("reason"))
        return ""

    assert eventually("the kubelet to refuse the root image", waiting_reason, timeout=60) == (
        "CreateContainerConfigError"
    )


def test_the_kubelet_api_refuses_anonymous_requests_and_serves_the_api_server(
    node_cluster: Cluster,
) -> None:
    url = f"https://{NODE_IP}:{KUBELET_PORT}/pods"
    directory = node_cluster.plane.directory
    assert directory is not None
    anonymous = ssl.create_default_context(cafile=str(directory / "ca.crt"))
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url, timeout=5, context=anonymous)
    assert refused.value.code == 401

    api_server = ssl.create_default_context(cafile=str(directory / "ca.crt"))
    api_server.load_cert_chain(
        directory / "apiserver-kubelet-client.crt", directory / "apiserver-kubelet-client.key"
    )
    with urllib.request.urlopen(url, timeout=5, context=api_server) as answer:
        assert json.loads(answer.read())["kind"] == "PodList"

    # That certificate opens the kubelet API and nothing else: it is no cluster admin.
    with pytest.raises(urllib.error.HTTPError) as forbidden:
        urllib.request.urlopen(
            f"{node_cluster.plane.server}/api/v1/secrets", timeout=5, context=api_server
        )
    assert forbidden.value.code == 403


def test_the_machine_has_its_own_kernel_settings_back_while_the_node_runs(
    node_cluster: Cluster,
) -> None:
    # The kubelet sets panic-on-oops, reboot-after-panic and overcommit as it starts; an oops
    # elsewhere on the machine must not reboot it because a test node runs.
    state = node_host.NodeState.load()
    assert state is not None
    recorded = {k: v for k, v in state.sysctls.items() if k in node_host.KUBELET_SYSCTLS}
    assert recorded, "the kernel settings were recorded before the node started"
    now = node_host.read_sysctls(node_host.KUBELET_SYSCTLS)
    assert now == recorded


def test_the_folders_with_keys_and_tokens_are_the_owners_alone(node_cluster: Cluster) -> None:
    directory = node_cluster.plane.directory
    assert directory is not None
    for folder in (directory, NODE_DIR):
        assert folder.stat().st_mode & 0o077 == 0, f"{folder} is open to others"


def test_the_registry_is_published_as_a_local_registry_should_be(node_cluster: Cluster) -> None:
    assert _registry_of(node_cluster) == node_cluster.plane.registry


# ---------------------------------------------------------------- with a node of its own


@pytest.mark.own_node
def test_a_stopped_node_leaves_nothing_on_the_host(tmp_path: Path) -> None:
    with ControlPlane(node=True) as plane:
        cluster = Cluster(plane)
        image = push_busybox(plane.registry, tmp_path, str(NONROOT_UID))
        cluster.apply("default", pod("sleeper", image, "sleep 600"))
        eventually(
            "the Pod to run",
            lambda: cluster.get_json("-n", "default", "pod", "sleeper")["status"].get("phase"),
            timeout=60,
            until=lambda phase: phase == "Running",
        )
        # The other side: while the node runs, what the stop must remove is there.
        present = "\n".join(node_host.leftovers(NODE_DIR))
        for expected in (
            "nft table ip kube-proxy",
            "cgroup ",
            "link ",
            f"bridge {node_host.BRIDGE}",
        ):
            assert expected in present, present
        assert node_host.read_sysctls()["net.ipv4.ip_forward"] == "1"
    # Read by the stop itself before it let go of the node lock (another node may start
    # the moment it does): the host as it was, kernel settings included.
    assert plane.node is not None
    assert plane.node.left_behind == []
    # Every process ended on SIGTERM: the API server, which listens on the node's bridge,
    # stopped before the bridge went (its own clean-up hung on the vanished address, and
    # `make demo` ended with "Killed kube-apiserver after 5s without exiting").
    assert plane.killed == []


@pytest.mark.own_node
def test_the_next_start_takes_back_what_a_killed_node_left(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    up = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mcp_operator",
            "dev",
            "cluster",
            "up",
            "--node",
            f"--dir={directory}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        assert up.stdout is not None
        said = []
        for line in up.stdout:
            said.append(line)
            if "Press Ctrl-C" in line:
                break
        else:
            pytest.fail(f"dev cluster up --node did not start (rc {up.wait()}):\n{''.join(said)}")
        cluster = Cluster(ControlPlane(directory=directory, keep_directory=True))
        image = push_busybox(_registry_of(cluster), tmp_path, str(NONROOT_UID))
        cluster.apply("default", pod("sleeper", image, "sleep 600"))
        eventually(
            "the Pod to run",
            lambda: cluster.get_json("-n", "default", "pod", "sleeper")["status"].get("phase"),
            timeout=60,
            until=lambda phase: phase == "Running",
        )
    finally:
        # Killed, as a test run is killed: no stop runs, the parent-death signal ends its
        # children, and the Pod, its shim, mounts, cgroups and rules stay.
        with contextlib.suppress(ProcessLookupError):
            os.kill(up.pid, signal.SIGKILL)
        up.wait(timeout=10)
    # Left: the Pod's cgroups, kube-proxy's rules, the bridge (no stop ran).
    left = "\n".join(node_host.leftovers(NODE_DIR))
    for expected in ("cgroup ", "nft table ip kube-proxy", f"bridge {node_host.BRIDGE}"):
        assert expected in left, left

    with ControlPlane(node=True) as plane:
        assert plane.node is not None
        # The start found what the killed node left (under the lock, before it made anything)
        # and took it back; the killed node's Pod did not come back with it.
        taken_back = "\n".join(plane.node.taken_back)
        for expected in ("cgroup ", "nft table ip kube-proxy", "process "):
            assert expected in taken_back, taken_back
        assert "sleeper" not in Cluster(plane).kubectl("get", "pods", "-A").stdout
    assert plane.node.left_behind == []


def _registry_of(cluster: Cluster) -> str:
    found = cluster.get_json("-n", "kube-public", "configmap", "local-registry-hosting")
    return str(yaml.safe_load(found["data"]["localRegistryHosting.v1"])["host"])
