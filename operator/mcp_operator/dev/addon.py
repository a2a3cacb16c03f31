"""What the node and its add-ons agree on, so that neither imports the other's module.

- :class:`AddOn`: a part of the node started after it is Ready and stopped before it stops
  (:mod:`mcp_operator.dev.node_addons` has the default ones);
- :class:`NodeHandle`: what an add-on may use of the node (:class:`mcp_operator.dev.node.Node`
  is one): its addresses, its folder, its API access and :meth:`~NodeHandle.spawn`;
- :class:`NodeError`: the node could not start, raised by both.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Protocol

from mcp_operator.dev.processes import ControlPlaneError


class NodeError(ControlPlaneError):
    """The node could not start (or wait for the lock); the message says why and the fix."""


class NodeHandle(Protocol):
    """The node as an add-on sees it."""

    name: str
    directory: Path
    ip: str
    """The node's InternalIP: the cluster bridge's address."""
    cluster_cidr: str
    service_cidr: str
    server: str
    """The API server's URL."""
    ca_cert: Path
    admin_kubeconfig: Path

    def spawn(
        self, name: str, argv: list[str], env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start a process of the node: recorded for crash cleanup, stopped with the node."""
        ...

    def log(self, name: str) -> Path:
        """The log file of the node's process ``name``."""
        ...


class AddOn(Protocol):
    """A part of the node started after it is Ready and stopped before it stops.

    An add-on starts its processes with :meth:`NodeHandle.spawn`, so that they are recorded
    for crash cleanup and stopped with the node even if :meth:`stop` is never called.
    """

    name: str

    def kubelet_settings(self) -> dict[str, Any]:
        """KubeletConfiguration fields this add-on needs (e.g. ``clusterDNS``), or ``{}``."""
        ...

    def clean_leftovers(self, node: NodeHandle) -> None:
        """Remove what a crashed earlier run of this add-on left on the host (lock held;
        the earlier node's processes are already killed)."""
        ...

    def start(self, node: NodeHandle) -> None:
        """Start; return once working. Raise :class:`NodeError` to fail the node's start."""
        ...

    def stop(self, node: NodeHandle) -> None:
        """Stop and remove what ``start`` made on the host; must not raise."""
        ...
