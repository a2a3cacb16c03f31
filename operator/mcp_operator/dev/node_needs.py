"""What a node needs on this machine, and the command that supplies each.

This module owns the check run before a node starts (and before tests that need one): root,
the binaries ``make node`` builds, crane, the host tools ``make node-packages`` installs, a
cgroup v1 memory controller, and the add-ons' own prerequisites.
"""

from __future__ import annotations

import os
import shutil

from mcp_operator.dev import node_addons, node_host
from mcp_operator.dev.processes import BIN_DIR, CACHE_DIR

CNI_BIN_DIR = CACHE_DIR / "cni" / "bin"
NODE_BINARIES = (
    "kubelet",
    "kube-proxy",
    "kube-scheduler",
    "containerd",
    "containerd-shim-runc-v2",
    "mcp-node-pause",
)
"""What ``make node`` (``hack/build-node.sh``) builds into the cache's bin folder."""
CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap")
HOST_TOOLS = ("runc", "nft", "ip", "umount")
"""What ``make node-packages`` (``hack/install-node-packages.sh``) installs."""


def missing() -> str | None:
    """Why a node cannot start on this machine, with the command that fixes it, or ``None``."""
    if os.geteuid() != 0:
        return "the local cluster's node needs root (containers, mounts, cgroups, nftables)"
    absent = [name for name in NODE_BINARIES if not os.access(BIN_DIR / name, os.X_OK)]
    absent += [
        f"cni/bin/{name}" for name in CNI_PLUGINS if not os.access(CNI_BIN_DIR / name, os.X_OK)
    ]
    if absent:
        return f"{', '.join(absent)} not built in {CACHE_DIR}; run `make node`"
    if not os.access(BIN_DIR / "crane", os.X_OK):
        return f"crane not built in {BIN_DIR}; run `make image-tools`"
    tools = [name for name in HOST_TOOLS if shutil.which(name) is None]
    if tools:
        return f"{', '.join(tools)} not installed; run `make node-packages`"
    if not (node_host.CGROUP_ROOT / "memory").is_dir():
        return "no cgroup v1 memory controller at /sys/fs/cgroup/memory (the node needs cgroup v1)"
    return node_addons.missing()  # the add-ons' own prerequisites
