"""The local control plane leaves nothing behind, even when its owner is killed outright."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

OWNER = """
import json, sys, time
from pathlib import Path
from mcp_operator.dev.cluster import ControlPlane
with ControlPlane(directory=Path(sys.argv[1])) as plane:
    print(json.dumps({"pids": plane.pids, "version": plane.version["gitVersion"]}), flush=True)
    time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead but still listed until reaped; /proc says which.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split()[2] != "Z"


def test_killing_the_owner_with_sigkill_stops_etcd_apiserver_and_controller_manager(
    tmp_path: Path,
) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path / "cluster")], stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    started = json.loads(owner.stdout.readline())
    pids = started["pids"]
    assert len(pids) == 3 and all(alive(pid) for pid in pids)
    assert started["version"].startswith("v1.")
    owner.send_signal(signal.SIGKILL)  # no cleanup code runs: only the parent-death signal
    owner.wait()
    eventually(
        "the control plane's processes ending",
        lambda: [pid for pid in pids if alive(pid)],
        10,
        until=lambda living: not living,
        interval=0.1,
    )
    assert [pid for pid in pids if alive(pid)] == []
