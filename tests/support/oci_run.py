"""Run one of our images once, as a container, with runc and no node: for the image tests.

What a runtime would do with the image's configuration and nothing more: the image's
flattened filesystem (:meth:`Registry.extract`, from the registry it was pushed to) as a
**read-only** root, a tmpfs on ``/tmp``, the image's ``ENTRYPOINT``/``CMD``, ``Env``,
``WorkingDir`` and numeric ``USER``, every capability dropped, no new privileges, and
namespaces of its own (its own empty network namespace: no traffic leaves it). runc's state
lives in the test's folder. This checks what an image is; running Pods is the node's job
(``dev/node.py``), and no test runs a Pod this way.
"""

from __future__ import annotations

import itertools
import json
import os
import select
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.registry import Registry

_RUNS = itertools.count()
"""Numbers the containers of this process, so no two runs share a name (or a cgroup)."""


def runc_missing() -> str | None:
    """Why runc cannot run containers here, or ``None``."""
    if shutil.which("runc") is None:
        return "runc is not installed; run `make image-packages`"
    return None


@dataclass
class Bundle:
    """An OCI bundle of one image: its root filesystem and its configuration."""

    directory: Path
    config: dict[str, Any]
    """The image configuration's ``config`` object (User, Entrypoint, Cmd, Env, …)."""

    def run(
        self,
        args: list[str] | None = None,
        *,
        stdin: bytes = b"",
        until: bytes | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run the image's entrypoint (or ``args`` instead of entrypoint and command).

        ``stdin`` is written to it; its standard input is closed at once, or, with ``until``,
        once its standard output holds that. After ``timeout`` seconds it is killed; what it
        wrote is returned either way.
        """
        argv = args or [*(self.config.get("Entrypoint") or []), *(self.config.get("Cmd") or [])]
        spec = _spec(self.directory)
        uid, _, gid = str(self.config.get("User", "")).partition(":")
        process = spec["process"]
        process.update(
            terminal=False,
            args=argv,
            env=self.config.get("Env") or [],
            cwd=self.config.get("WorkingDir") or "/",
            user={"uid": int(uid), "gid": int(gid or uid)},
            noNewPrivileges=True,
        )
        process["capabilities"] = {key: [] for key in process.get("capabilities", {})}
        spec["root"] = {"path": "rootfs", "readonly": True}
        spec["mounts"].append(
            {
                "destination": "/tmp",
                "type": "tmpfs",
                "source": "tmpfs",
                "options": ["nosuid", "nodev", "mode=1777", "size=65536k"],
            }
        )
        (self.directory / "config.json").write_text(json.dumps(spec))
        name = f"image-test-{os.getpid()}-{next(_RUNS)}"
        runc = ["runc", "--root", str(self.directory / "runc-state")]
        child = subprocess.Popen(
            [*runc, "run", "--bundle", str(self.directory), name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + timeout
        try:
            try:
                early = b""
                if until is not None:
                    early = _read_until(child, stdin, until, deadline)
                    stdin = b""
                stdout, stderr = child.communicate(
                    stdin, timeout=max(0.1, deadline - time.monotonic())
                )
                stdout = early + stdout
            except subprocess.TimeoutExpired:
                # Still running (a server waiting for more): stopped, and what it said kept.
                subprocess.run([*runc, "kill", name, "KILL"], capture_output=True, check=False)
                stdout, stderr = child.communicate(timeout=30)
        finally:
            # A container that outlived the timeout goes with its state; nothing is left.
            subprocess.run([*runc, "delete", "--force", name], capture_output=True, check=False)
            if child.poll() is None:
                child.kill()
                child.wait()
        return subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)


def _read_until(
    child: subprocess.Popen[bytes], stdin: bytes, marker: bytes, deadline: float
) -> bytes:
    """Write ``stdin``, then read the child's output until it holds ``marker`` (or it ends)."""
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(stdin)
    child.stdin.flush()
    seen = b""
    while marker not in seen:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([child.stdout], [], [], left)[0]:
            raise subprocess.TimeoutExpired(child.args, 0)
        chunk = os.read(child.stdout.fileno(), 65536)
        if not chunk:
            break
        seen += chunk
    return seen


def _spec(directory: Path) -> dict[str, Any]:
    template = directory / "template.json"
    if not template.is_file():
        subprocess.run(["runc", "spec", "--bundle", str(directory)], check=True)
        (directory / "config.json").rename(template)
    spec: dict[str, Any] = json.loads(template.read_text())
    return spec


def bundle(registry: Registry, reference: str, directory: Path) -> Bundle:
    """The bundle of ``reference`` (pulled from ``registry``) in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    registry.extract(reference, directory / "rootfs")
    config = json.loads(registry.crane("config", reference))["config"]
    return Bundle(directory, config)
