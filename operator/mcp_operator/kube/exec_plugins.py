"""Stopping the exec plugin of a credential load that outlived its time limit.

The ``kubernetes`` package runs a kubeconfig's exec plugin with ``subprocess`` and waits for it
without a limit, and keeps the process to itself. A plugin that hangs (a cloud login waiting on
a network that is gone) would hold the load's thread, and with it the one-load-at-a-time lock
of :mod:`mcp_operator.kube.credentials`, for as long as it lives: every later load would time
out behind it. So the caller notes this process's children before a load (:func:`children`),
and when the load is given up stops the ones it started and theirs (:func:`stop_since`): the
library's wait then returns, its thread ends, and the next load runs.

Read from Linux's ``/proc`` (where the operator runs); elsewhere nothing is found and nothing
stopped. The operator process starts no other programs, and loads run one at a time, so a
child that was not there before the load is the load's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from pathlib import Path

logger = logging.getLogger(__name__)

PROC = Path("/proc")


def _parents() -> dict[int, int]:
    """Every visible process → its parent (``/proc/<pid>/stat``; the name may hold spaces or
    parentheses, so the fields are read after its last ``)``)."""
    found: dict[int, int] = {}
    with contextlib.suppress(OSError):
        for entry in PROC.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # it ended meanwhile
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            if len(fields) > 1 and fields[1].isdigit():
                found[int(entry.name)] = int(fields[1])
    return found


def children(parent: int | None = None) -> frozenset[int]:
    """The processes ``parent`` (this one by default) started that are still there."""
    parent = os.getpid() if parent is None else parent
    return frozenset(pid for pid, ppid in _parents().items() if ppid == parent)


def stop_since(before: frozenset[int]) -> list[int]:
    """Kill this process's children that are not in ``before``, with all their descendants
    (a plugin that is a shell script waits on its own children, which hold its output open).
    Returns the processes signalled."""
    parents = _parents()
    own = os.getpid()
    doomed = [pid for pid, ppid in parents.items() if ppid == own and pid not in before]
    index = 0
    while index < len(doomed):  # breadth-first over the descendants
        doomed.extend(pid for pid, ppid in parents.items() if ppid == doomed[index])
        index += 1
    for pid in doomed:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    if doomed:
        logger.warning(
            "Stopped the exec plugin that outlived its time limit (%d processes)", len(doomed)
        )
    return doomed
