"""What e2e tests hold of the real control plane and of the operator they start.

- :class:`Cluster`: a kubeconfig and kubectl against a :class:`ControlPlane`
  (``mcp_operator.dev.cluster`` starts it; ``tests/e2e/conftest.py`` makes the
  session's one, and tests that need a plane of their own make another);
- :func:`operator_process`: ``python -m mcp_operator run FLAGS`` as a subprocess,
  the one way every test starts the operator, stopped and its log shown at the end.

The flags are always the caller's: each test says which settings it runs the
operator with (and why, in a comment), so none hides in a default here.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mcp_operator.dev.cluster import ControlPlane
from mcp_operator.dev.processes import kubectl_path, stop_process_group
from tests.support import needs

REPO = Path(__file__).resolve().parents[2]
CRDS = REPO / "crds"
LOG_TAIL = 40
"""How many of the operator's last log lines a test prints when it stops the operator."""


@dataclass
class Cluster:
    """What a test needs of the control plane: a kubeconfig and kubectl."""

    plane: ControlPlane

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    @property
    def version(self) -> dict[str, Any]:
        return self.plane.version

    def env(self) -> dict[str, str]:
        return self.plane.env()

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [kubectl_path(), f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
            )
        return result

    def get_json(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", "-o", "json", *args).stdout)

    def apply(self, namespace: str, obj: dict[str, Any]) -> None:
        """Server-side apply of one object, as a user's GitOps pipeline would."""
        self.kubectl(
            "-n",
            namespace,
            "apply",
            "--server-side",
            "--field-manager=e2e",
            "-f",
            "-",
            input=json.dumps(obj),
        )

    def helm(self, namespace: str, *args: str, home: Path, timeout: float = 120) -> str:
        """Run helm against this cluster in ``namespace``, its cache, config and data under
        ``home`` (never the user's); fails the test with helm's output unless it succeeds."""
        env = {
            **os.environ,
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }
        result = subprocess.run(
            [needs.helm(), f"--kubeconfig={self.kubeconfig}", "--namespace", namespace, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )
        assert result.returncode == 0, f"helm {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
        return result.stdout

    def service_account_kubeconfig(self, namespace: str, account: str, directory: Path) -> Path:
        """A kubeconfig in ``directory`` that authenticates as ServiceAccount
        ``namespace/account`` (a bound token for an hour), against this cluster."""
        token = self.kubectl(
            "create", "token", account, "-n", namespace, "--duration=1h"
        ).stdout.strip()
        admin = yaml.safe_load(self.kubeconfig.read_text())
        user = f"{namespace}-{account}"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": admin["clusters"],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [
                {"name": user, "context": {"cluster": admin["clusters"][0]["name"], "user": user}}
            ],
            "current-context": user,
        }
        path = directory / f"kubeconfig-{user}"
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path


@dataclass
class OperatorProcess:
    """``mcp-operator run`` as a subprocess, logging to a file."""

    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextlib.contextmanager
def operator_process(
    *flags: str, env: Mapping[str, str], log_path: Path, name: str = "operator"
) -> Iterator[OperatorProcess]:
    """``python -m mcp_operator run FLAGS`` with ``env``, stdout and stderr into ``log_path``.

    It runs in a process group of its own; on leaving, the group gets SIGTERM, SIGKILL
    after 20 seconds (a process that already ended is only reaped), and the last
    :data:`LOG_TAIL` lines of the log are printed under ``name``: pytest shows them
    with a failing test's output.
    """
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "mcp_operator", "run", *flags],
            env=dict(env),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    running = OperatorProcess(process, log_path)
    try:
        yield running
    finally:
        stop_process_group(process, grace=20, name=name)
        tail = "\n".join(running.log().splitlines()[-LOG_TAIL:])
        print(f"\n--- {name} log (last {LOG_TAIL} lines) ---\n{tail}")
