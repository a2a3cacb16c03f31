"""Fixtures for tests against the real local control plane.

One control plane per test session (etcd, kube-apiserver, kube-controller-manager
built by ``hack/build-control-plane.sh``); every test gets a namespace of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mcp_operator.dev.cluster import ControlPlane, free_port, kubectl_path, stop_process_group
from tests.support import registry

REPO = Path(__file__).resolve().parents[2]
CRDS = REPO / "crds"


@dataclass
class Cluster:
    """What a test needs of the control plane: a kubeconfig and kubectl."""

    plane: ControlPlane

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    @property
    def version(self) -> dict[str, Any]:
        return self.plane.version

    def env(self) -> dict[str, str]:
        return self.plane.env()

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [kubectl_path(), f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
            )
        return result

    def get_json(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", "-o", "json", *args).stdout)

    def apply(self, namespace: str, obj: dict[str, Any]) -> None:
        """Server-side apply of one object, as a user's GitOps pipeline would."""
        self.kubectl(
            "-n",
            namespace,
            "apply",
            "--server-side",
            "--field-manager=e2e",
            "-f",
            "-",
            input=json.dumps(obj),
        )


@dataclass
class OperatorProcess:
    """``mcp-operator run`` as a subprocess, logging to a file."""

    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    with ControlPlane() as plane:
        line = (
            f"Real control plane: kube-apiserver {plane.version.get('gitVersion')} "
            f"({plane.version.get('platform')}, go {plane.version.get('goVersion')}) "
            f"at {plane.server}"
        )
        # Straight to the terminal, so that the CI log shows it even with -q and capture on.
        capture = request.config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            print(f"\n{line}", flush=True)
        os.environ["KUBECONFIG"] = str(plane.kubeconfig)
        yield Cluster(plane)


@pytest.fixture(scope="session")
def crds(cluster: Cluster) -> None:
    cluster.kubectl("apply", "--server-side", "--field-manager=mcp-operator-tests", "-f", str(CRDS))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRDS))


@pytest.fixture(scope="session")
def operator(
    cluster: Cluster, crds: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """The operator, started once for the session, stopped (and its log shown) at the end."""
    log_path = tmp_path_factory.mktemp("operator") / "operator.log"
    port = free_port()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mcp_operator",
                "run",
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
                # Private addresses (the network namespaces some tests make) only for
                # Namespaces labelled mcp-operator.dev/private-destinations=allowed.
                "--private-destinations=labelled",
            ],
            env=cluster.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    running = OperatorProcess(process, log_path)
    try:
        yield running
    finally:
        stop_process_group(process, grace=20, name="operator")
        tail = "\n".join(running.log().splitlines()[-40:])
        print(f"\n--- operator log (last 40 lines) ---\n{tail}")


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
