"""Runs a planned Pod (see ``tests/support/kubelet.py``) inside its namespaces.

Started as ``ip netns exec NS unshare --mount --propagation private python
pod_runner.py PLAN.json``: mounts a tmpfs at every emptyDir mount path (in this
private mount namespace only), runs the init containers one after another,
then the other containers side by side, and on SIGTERM stops them all.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any


def main(plan_path: str) -> int:
    plan = json.loads(Path(plan_path).read_text())
    for mount in plan["mounts"]:
        os.makedirs(mount, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=8m,mode=1777", "tmpfs", mount], check=True
        )
    running: list[subprocess.Popen[bytes]] = []

    def stop(*_: Any) -> None:
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in running:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    for container in plan["containers"]:
        env = {"PATH": os.environ["PATH"], **container["env"]}
        print(f"[pod] starting {container['name']}: {container['argv']}", flush=True)
        if container["init"]:
            subprocess.run(container["argv"], env=env, check=True)
        else:
            running.append(subprocess.Popen(container["argv"], env=env, start_new_session=True))
    while running:
        pid, status = os.wait()
        for process in running:
            if process.pid == pid:
                print(f"[pod] container exited with status {status}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
