"""The local control plane leaves nothing behind, even when its owner is killed outright, and
stops on SIGTERM alone when its owner stops it."""

from __future__ import annotations

import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from mcp_operator.dev.cluster import ControlPlane
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


def open_watch(plane: ControlPlane) -> http.client.HTTPSConnection:
    """A watch of ConfigMaps held open, as an operator's or a kubelet's is; its answer's head
    read (the API server has registered it)."""
    assert plane.directory is not None
    context = ssl.create_default_context(cafile=str(plane.directory / "ca.crt"))
    server = urlsplit(plane.server)
    assert server.hostname is not None
    connection = http.client.HTTPSConnection(server.hostname, server.port, context=context)
    connection.request(
        "GET",
        "/api/v1/configmaps?watch=true",
        headers={"Authorization": f"Bearer {plane.token}"},
    )
    answer = connection.getresponse()
    assert answer.status == 200, answer.read()
    return connection


def test_stopping_the_control_plane_ends_every_process_on_sigterm(tmp_path: Path) -> None:
    """``make demo`` ended with "Killed kube-apiserver after 5s without exiting": on SIGTERM
    the API server left its open watches (its own informers' and its clients') to its HTTP
    server's shutdown, which waits up to a minute for them. It now closes them itself."""
    with ControlPlane(directory=tmp_path / "cluster") as plane:
        watch = open_watch(plane)
        started = time.monotonic()  # the end of the block stops the plane
    took = time.monotonic() - started
    watch.close()
    assert plane.killed == [], f"stopped only by SIGKILL: {plane.killed}"
    log = (tmp_path / "cluster" / "kube-apiserver.log").read_text()
    assert "[graceful-termination]" in log  # it did stop its own way
    print(f"\nThe control plane stopped on SIGTERM in {took:.1f}s")
