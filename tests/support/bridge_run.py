"""The bridge as a process, for tests and benchmarks: a config file, ``mcp-operator bridge``.

:func:`bridge_config` builds a ``BridgeConfig`` document for upstream URLs;
:func:`run_bridge` writes it to a file, starts ``mcp-operator bridge`` on free ports, waits
until ``/readyz`` answers 200, and yields a :class:`RunningBridge` (its URLs, the file to
rewrite for a reload, and its standard output, where the audit lines go).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from mcp_operator.dev.cluster import stop_process_group
from tests.support.peers import free_port
from tests.support.waiting import eventually


def server_entry(
    name: str, url: str, prefix: str | None = None, **extra: Any
) -> dict[str, Any]:
    """One ``servers`` item: namespace ``default``, prefix = name unless given."""
    return {"name": name, "namespace": "default", "url": url, "prefix": prefix or name, **extra}


def bridge_config(
    servers: Sequence[Mapping[str, Any]], port: int, *, run: str = "agent-1"
) -> dict[str, Any]:
    return {
        "apiVersion": "mcp-operator.dev/v1alpha1",
        "kind": "BridgeConfig",
        "run": {"name": run, "namespace": "default"},
        "listen": {"host": "127.0.0.1", "port": port, "path": "/mcp"},
        "servers": list(servers),
    }


@dataclass
class RunningBridge:
    url: str
    health: str
    config_path: Path
    config: dict[str, Any]
    output: Path
    process: subprocess.Popen[bytes]

    def rewrite(self, config: Mapping[str, Any]) -> None:
        """Replace the file the way the kubelet does: a new file, renamed over the old."""
        fresh = self.config_path.with_suffix(".new")
        fresh.write_text(yaml.safe_dump(dict(config)))
        os.replace(fresh, self.config_path)
        self.config = dict(config)

    def audit_lines(self) -> list[dict[str, Any]]:
        """Every line of standard output that is a JSON object (the audit trail)."""
        lines = []
        for line in self.output.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                lines.append(json.loads(line))
        return lines

    def log(self) -> str:
        return self.output.read_text(errors="replace")


@contextlib.contextmanager
def run_bridge(
    servers: Sequence[Mapping[str, Any]],
    *,
    extra_args: Sequence[str] = (),
    timeout: float = 30.0,
    env: Mapping[str, str] | None = None,
) -> Iterator[RunningBridge]:
    port, health_port = free_port(), free_port()
    config = bridge_config(servers, port)
    with tempfile.TemporaryDirectory(prefix="mcp-bridge-") as tmp:
        config_path = Path(tmp) / "config.yaml"
        config_path.write_text(yaml.safe_dump(config))
        output = Path(tmp) / "stdout"
        with output.open("wb") as sink:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "mcp_operator",
                    "bridge",
                    f"--config={config_path}",
                    f"--health-port={health_port}",
                    "--reload-seconds=0.3",
                    *extra_args,
                ],
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, **(env or {})},
            )
        bridge = RunningBridge(
            url=f"http://127.0.0.1:{port}/mcp",
            health=f"http://127.0.0.1:{health_port}",
            config_path=config_path,
            config=config,
            output=output,
            process=process,
        )

        def ready() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"the bridge exited:\n{bridge.log()[-3000:]}")
            try:
                return httpx.get(f"{bridge.health}/readyz", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        try:
            eventually("the bridge ready", ready, timeout, interval=0.1, explain=bridge.log)
            yield bridge
        finally:
            stop_process_group(process, name="mcp-bridge")
