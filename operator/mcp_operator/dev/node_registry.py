"""The node's image registry: the sandbox image in it, and how the cluster publishes it.

The node serves a plain-HTTP registry on the bridge address (``crane registry serve``; it is
started with the node's other processes, :meth:`mcp_operator.dev.node.Node.start`), which
containerd on the host and Pods alike reach by one name. This module owns what goes into it
first (the Pod sandbox image, built from our static ``mcp-node-pause``) and the ConfigMap
``kube-public/local-registry-hosting`` by which tools (the demo) find it from a kubeconfig
alone, as KEP-1755 says.
"""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

import yaml

from mcp_operator.dev.node_host import run
from mcp_operator.dev.processes import BIN_DIR

SANDBOX_REPOSITORY = "mcp-operator/pause"
KEP_1755 = (
    "https://github.com/kubernetes/enhancements/tree/master/keps/sig-cluster-lifecycle/"
    "generic/1755-communicating-a-local-registry"
)


def push_sandbox_image(directory: Path, registry: str) -> str:
    """The Pod sandbox ("pause") image, our static binary alone, pushed into ``registry``;
    its reference."""
    layer = directory / "pause-layer.tar"
    with tarfile.open(layer, "w") as tar:
        info = tar.gettarinfo(str(BIN_DIR / "mcp-node-pause"), arcname="pause")
        info.mode, info.uid, info.gid, info.uname, info.gname = 0o755, 0, 0, "", ""
        with (BIN_DIR / "mcp-node-pause").open("rb") as handle:
            tar.addfile(info, handle)
    reference = f"{registry}/{SANDBOX_REPOSITORY}:1"
    crane = [str(BIN_DIR / "crane"), "--insecure"]
    run(*crane, "append", "--new_layer", str(layer), "--new_tag", reference)
    run(
        *crane,
        "mutate",
        reference,
        "--set-platform=linux/amd64",
        "--entrypoint=/pause",
        "--user=65535",
        "-t",
        reference,
    )
    return reference


def hosting_config_map(registry: str) -> dict[str, Any]:
    """The ConfigMap ``kube-public/local-registry-hosting`` that names ``registry``."""
    hosting = yaml.safe_dump({"host": registry, "help": KEP_1755})
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "local-registry-hosting", "namespace": "kube-public"},
        "data": {"localRegistryHosting.v1": hosting},
    }
