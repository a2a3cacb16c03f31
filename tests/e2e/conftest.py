"""Fixtures for tests against the real local control plane.

One control plane per test session (etcd, kube-apiserver, kube-controller-manager
built by ``hack/build-control-plane.sh``), one operator started for the session, and a
namespace of its own for every test. Tests that need a running Pod use ``node_cluster``
instead: a second control plane with the machine's one real node
(``ControlPlane(node=True)``, started only when a test asks for it) and ``node_images``,
the project's images pushed into that node's registry, with a namespace
(``node_namespace``) and an operator of their own (``node_operator``, on this machine,
watching only that namespace); what they read of the Pods is in ``tests/support/pods.py``.
Tests that only need the API server keep the node-less ``cluster``: it starts in seconds.
Only one node may run on a machine, so tests marked ``own_node`` (which start a node of
their own) run first, before the session's node exists. What the fixtures hand out
(``Cluster``, ``OperatorProcess``, ``operator_process``) lives in
``tests/support/cluster.py``.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_operator.dev.cluster import DEV_IDENTITY, ControlPlane
from mcp_operator.dev.processes import free_port
from tests.support import needs, registry, scraper
from tests.support.cluster import CRDS, Cluster, OperatorProcess, operator_process


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    with ControlPlane() as plane:
        line = (
            f"Real control plane: kube-apiserver {plane.version.get('gitVersion')} "
            f"({plane.version.get('platform')}, go {plane.version.get('goVersion')}) "
            f"at {plane.server}"
        )
        _announce(request, line)
        os.environ["KUBECONFIG"] = str(plane.kubeconfig)
        yield Cluster(plane)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests with a node of their own before every other e2e test: once a test has asked
    for ``node_cluster``, the session's node holds the machine's node lock to the end."""
    here = Path(__file__).parent
    own = [item for item in items if item.get_closest_marker("own_node") is not None]
    if not own:
        return
    rest = [item for item in items if item.get_closest_marker("own_node") is None]
    first_e2e = next((i for i, item in enumerate(rest) if here in item.path.parents), len(rest))
    items[:] = rest[:first_e2e] + own + rest[first_e2e:]


def _announce(request: pytest.FixtureRequest, line: str) -> None:
    # Straight to the terminal, so that the CI log shows it even with -q and capture on.
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print(f"\n{line}", flush=True)


@pytest.fixture(scope="session")
def node_cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """A control plane with the real node (containerd, kubelet, kube-proxy, a registry),
    for tests whose Pods must run. Its kubeconfig is not made the session's KUBECONFIG."""
    needs.require(needs.real_node_missing())
    with ControlPlane(node=True) as plane:
        assert plane.node is not None
        _announce(
            request,
            f"Real node: {plane.node.name} at {plane.node.ip}, registry {plane.registry}; "
            f"control plane with node up in {plane.started_seconds:.1f}s",
        )
        yield Cluster(plane)


@pytest.fixture(scope="session")
def node_images(node_cluster: Cluster) -> dict[str, str]:
    """The project's images (``make images``) pushed into the node's registry: name ->
    pullable reference ``10.244.0.1:PORT/name@sha256:...``."""
    try:
        images = importlib.import_module("mcp_operator.dev.images")
    except ModuleNotFoundError:
        needs.require("mcp_operator.dev.images is not in this checkout yet (the images branch)")
        raise
    try:
        # The node's registry is on its bridge address, in plain HTTP.
        pushed: dict[str, str] = images.push(node_cluster.plane.registry, insecure=True)
    except images.ImagesNotBuiltError as error:
        needs.require(str(error))
        raise
    return pushed


def install_crds(cluster: Cluster) -> None:
    cluster.kubectl("apply", "--server-side", "--field-manager=mcp-operator-tests", "-f", str(CRDS))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRDS))


@pytest.fixture(scope="session")
def crds(cluster: Cluster) -> None:
    install_crds(cluster)


@pytest.fixture(scope="session")
def operator(
    cluster: Cluster, crds: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """The operator, started once for the session, stopped (and its log shown) at the end."""
    log_path = tmp_path_factory.mktemp("operator") / "operator.log"
    port = free_port()
    with operator_process(
        "--verbose",
        f"--liveness=http://127.0.0.1:{port}/healthz",
        # The tests' local registry (tests/support/registry.py) speaks plain HTTP.
        f"--insecure-registries={registry.FRONT_HOST}",
        # Samples name public images: the operator must not try to reach them.
        f"--allowed-registries={registry.FRONT_HOST}",
        # One operator for the session (no Lease namespace here); tests of the
        # election start their own (tests/e2e/test_leader.py).
        "--no-leader-election",
        "--metrics=none",
        # The test servers listen on loopback, which the egress policy refuses unless
        # the operator is told otherwise (as only development setups should be).
        "--loopback-destinations=allowed",
        # Private addresses only for Namespaces labelled
        # mcp-operator.dev/private-destinations=allowed (tests/e2e/test_external.py).
        "--private-destinations=labelled",
        # Whose tokens the probe presents to managed servers (the plane makes the account).
        f"--identity={DEV_IDENTITY}",
        env=cluster.env(),
        log_path=log_path,
    ) as running:
        yield running


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


# -- the cluster with its real node ---------------------------------------------------------


@pytest.fixture(scope="session")
def node_crds(node_cluster: Cluster) -> None:
    install_crds(node_cluster)


@pytest.fixture
def node_namespace(node_cluster: Cluster, node_crds: None) -> Iterator[str]:
    """A namespace of the test's own on the cluster with a node (whose Pods go with it)."""
    name = f"n-{uuid.uuid4().hex[:10]}"
    node_cluster.kubectl("create", "namespace", name)
    yield name
    node_cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def data_plane() -> str:
    """Which data plane the node operator renders into managed servers' and runs' Pods:
    ``python`` (the operator image's) or ``compiled`` (``--dataplane-image``, the
    mcp-dataplane image). A test parametrizes this name to run with both."""
    return "python"


@pytest.fixture
def node_operator(
    node_cluster: Cluster,
    node_images: dict[str, str],
    node_namespace: str,
    data_plane: str,
    tmp_path: Path,
) -> Iterator[OperatorProcess]:
    """The operator on this machine against the cluster with a node, for one test."""
    registry_host = node_cluster.plane.registry
    scraper.ensure(node_cluster)
    # The compiled data plane: the adapter of managed servers and the bridge of runs.
    compiled = [f"--dataplane-image={node_images['mcp-dataplane']}"]
    with operator_process(
        *(compiled if data_plane == "compiled" else []),
        "--verbose",
        # Only the test's namespace: the node's cluster is shared by the session, and two
        # operators must never reconcile one object (the install test runs one in the cluster).
        f"--namespace={node_namespace}",
        # Not in a Pod, the operator cannot read its own image from one: the adapter and the
        # bridge sidecars run the image built from this checkout.
        f"--adapter-image={node_images['mcp-operator']}",
        # The node's registry speaks plain HTTP on the bridge; images named alone are read there.
        f"--insecure-registries={registry_host}",
        f"--allowed-registries={registry_host}",
        "--no-leader-election",
        "--metrics=none",
        "--liveness=none",
        # Test servers on the host listen on the node's bridge address, a private one: only
        # for Namespaces labelled mcp-operator.dev/private-destinations=allowed.
        "--private-destinations=labelled",
        # Whose tokens the probe presents to managed servers (the plane makes the account).
        f"--identity={DEV_IDENTITY}",
        # Who may read /metrics of the bridges and adapters (tests.support.scraper).
        scraper.FLAG,
        env=node_cluster.env(),
        log_path=tmp_path / "operator.log",
    ) as running:
        yield running
