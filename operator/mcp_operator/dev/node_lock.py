"""The machine-wide node lock: one node per machine, and who holds it.

The kubelet, containerd's shims, kube-proxy and libcni use hard-coded host paths, so only one
node runs on a machine. This module owns the lock that says which: an exclusive ``flock`` on
:data:`LOCK_PATH`, held for the node's whole life (:meth:`mcp_operator.dev.node.Node.prepare`
takes it, :meth:`~mcp_operator.dev.node.Node.take_back_host` releases it).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from pathlib import Path

from mcp_operator.dev.addon import NodeError

logger = logging.getLogger(__name__)

LOCK_PATH = Path("/run/mcp-operator-node.lock")
"""Machine-wide: whoever holds an exclusive ``flock`` on it runs the one node."""
LOCK_TIMEOUT_SECONDS = float(os.environ.get("MCP_OPERATOR_NODE_LOCK_TIMEOUT", "900"))
"""How long a second node start waits for the first to stop before it gives up."""


class NodeLock:
    """The machine-wide node lock: an exclusive ``flock`` on :data:`LOCK_PATH`.

    The holder writes its pid into the file, so that a waiting start can name it. The lock
    goes with the file descriptor: when the holder's process dies, however it dies, the
    kernel releases it (the descriptor is close-on-exec, so no child keeps it).
    """

    def __init__(self, path: Path = LOCK_PATH) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def holder(self) -> str:
        """Who holds the lock, as well as the file says: ``pid N (command)``."""
        try:
            pid = int(self.path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return "an unknown process"
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            command = "?"
        return f"pid {pid} ({command.strip()[:120]})"

    def acquire(self, timeout: float = LOCK_TIMEOUT_SECONDS) -> None:
        """Take the lock, waiting up to ``timeout`` seconds for the holder to let go."""
        if self._fd is not None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        deadline = time.monotonic() + timeout
        waited = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise NodeError(
                        f"Another node runs on this machine: {self.path} is held by "
                        f"{self.holder()}; waited {timeout:.0f}s for it to stop (one node per "
                        "machine: the kubelet and containerd use hard-coded host paths)"
                    ) from None
                if not waited:
                    logger.info("Waiting for the node lock %s held by %s", self.path, self.holder())
                    waited = True
                time.sleep(0.5)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        logger.info("Took the node lock %s", self.path)

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        os.close(self._fd)  # releases the flock
        self._fd = None
