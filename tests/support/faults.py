"""Faults for e2e tests: restart one process of a running local control plane.

:func:`restart` stops one of the control plane's processes (etcd or kube-apiserver)
with the signal a fault would send and starts it again with the same command line,
data directory and log, then waits until it serves again. The new process takes the
old one's place in the control plane, so the plane's own ``stop`` ends it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

from mcp_operator.dev.cluster import ControlPlane
from mcp_operator.dev.processes import die_with_parent, stop_process_group
from tests.support.waiting import eventually


def restart(
    plane: ControlPlane, name: str, *, sig: int = signal.SIGKILL, down: float = 0.0
) -> float:
    """Kill ``name`` with ``sig``, keep it down ``down`` seconds, start it again; returns the
    seconds until the API server answered ``/readyz`` again."""
    processes = plane._processes
    index = next(i for i, (each, _) in enumerate(processes) if each == name)
    old = processes[index][1]
    argv = [str(arg) for arg in old.args]  # type: ignore[union-attr]
    if sig == signal.SIGKILL:
        os.killpg(old.pid, signal.SIGKILL)
        old.wait()
    else:
        stop_process_group(old, name=name)
    started = time.monotonic()
    time.sleep(down)
    assert plane.directory is not None
    with (plane.directory / f"{name}.log").open("ab") as log:
        new = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )
    processes[index] = (name, new)
    ca = plane.directory / "ca.crt"

    def ready() -> bool:
        try:
            return plane._get(f"{plane.server}/readyz", ca=ca if ca.exists() else None) == "ok"
        except OSError:
            return False

    eventually(f"{name} serving again", ready, 90, interval=0.2)
    return time.monotonic() - started
