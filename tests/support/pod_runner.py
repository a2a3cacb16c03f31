"""Runs a planned Pod (see ``tests/support/kubelet.py``) inside its namespaces.

Started as ``ip netns exec NS unshare --mount --propagation private python
pod_runner.py PLAN.json``: mounts a tmpfs at every emptyDir mount path and at
every configMap/secret mount path (holding the object's keys as files), and the
Pod's own /etc/hosts when the plan names hosts, in this private mount namespace
only; runs the init containers one after another, starts the native sidecars
and waits for their startup probe, then runs the other containers side by side.
A container with a ``root`` (an image's extracted filesystem) runs chrooted there,
as its ``uid``/``gid``, with every emptyDir mount bound into it and the PATH of an
image that sets none.
When those have exited it stops the sidecars; on SIGTERM it stops them all.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""The PATH a runtime gives a container whose image sets none."""


def main(plan_path: str) -> int:
    plan = json.loads(Path(plan_path).read_text())
    for mount in plan["mounts"]:
        os.makedirs(mount, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=8m,mode=1777", "tmpfs", mount], check=True
        )
    for mount, files in plan.get("files", {}).items():
        os.makedirs(mount, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", mount], check=True
        )
        for name, content in files.items():
            Path(mount, name).write_text(content)
    if plan.get("hosts"):
        # The Pod's own /etc/hosts, in this private mount namespace only: what cluster DNS
        # would answer for the names given (a kubelet's hostAliases work the same way).
        hosts = Path(plan_path).with_suffix(".hosts")
        lines = ["127.0.0.1 localhost"] + [f"{ip} {name}" for name, ip in plan["hosts"].items()]
        hosts.write_text("\n".join(lines) + "\n")
        subprocess.run(["mount", "--bind", str(hosts), "/etc/hosts"], check=True)
    for root in {c["root"] for c in plan["containers"] if c.get("root")}:
        for mount in plan["mounts"]:
            inside = Path(root + mount)
            inside.mkdir(parents=True, exist_ok=True)
            subprocess.run(["mount", "--bind", mount, str(inside)], check=True)
        Path(root, "tmp").mkdir(mode=0o1777, exist_ok=True)
        os.chmod(Path(root, "tmp"), 0o1777)
    running: list[subprocess.Popen[bytes]] = []
    sidecars: list[subprocess.Popen[bytes]] = []

    def stop(*_: Any) -> None:
        for process in [*running, *sidecars]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in [*running, *sidecars]:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    for container in plan["containers"]:
        path = IMAGE_PATH if container.get("root") else os.environ["PATH"]
        env = {"PATH": path, **container["env"]}
        enter = confinement(container)
        print(f"[pod] starting {container['name']}: {container['argv']}", flush=True)
        if container["init"]:
            subprocess.run(container["argv"], env=env, check=True, preexec_fn=enter)
        elif container.get("sidecar"):
            sidecars.append(
                subprocess.Popen(
                    container["argv"], env=env, start_new_session=True, preexec_fn=enter
                )
            )
            if container.get("ready_url"):
                wait_ready(container["name"], container["ready_url"])
        else:
            running.append(
                subprocess.Popen(
                    container["argv"], env=env, start_new_session=True, preexec_fn=enter
                )
            )
    waiting = {process.pid: process for process in running}
    while waiting:
        pid, status = os.wait()
        if waiting.pop(pid, None) is not None:
            print(
                f"[pod] container exited with status {os.waitstatus_to_exitcode(status)}",
                flush=True,
            )
    for process in sidecars:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    for process in sidecars:
        process.wait(timeout=30)
        print(f"[pod] sidecar exited with status {process.returncode}", flush=True)
    return 0


def confinement(container: dict[str, Any]) -> Callable[[], None] | None:
    """What the forked child does before exec: chroot into the image, then drop to its user
    (in this order: only root may chroot)."""
    root = container.get("root")
    if root is None:
        return None
    uid, gid = container.get("uid"), container.get("gid")

    def enter() -> None:
        os.chroot(root)
        os.chdir("/")
        if gid is not None or uid is not None:
            os.setgroups([])
        if gid is not None:
            os.setgid(gid)
        if uid is not None:
            os.setuid(uid)

    return enter


def wait_ready(name: str, url: str, timeout: float = 60) -> None:
    """Poll a sidecar's startup probe until it answers 2xx, as the kubelet would."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if 200 <= answer.status < 300:
                    print(f"[pod] {name} passed its startup probe", flush=True)
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"[pod] {name} did not pass its startup probe at {url}")
        time.sleep(0.2)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
