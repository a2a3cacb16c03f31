"""The bridge as a process, for tests and benchmarks: a config file, ``mcp-operator bridge``.

:func:`bridge_config` builds a ``BridgeConfig`` document for upstream URLs;
:func:`run_bridge` writes it to a file, starts :data:`PROGRAM` (``mcp-operator bridge``
unless a test swaps it, as ``tests/protocol/test_dataplane_bridge.py`` does for the compiled
bridge) on free ports, waits until ``/readyz`` answers 200, and yields a
:class:`RunningBridge` (its URLs, the file to rewrite for a reload, and its standard output,
where the audit lines go).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from mcp_operator.dev.processes import stop_process_group
from tests.support.peers import free_port
from tests.support.waiting import eventually

PYTHON_PROGRAM: tuple[str, ...] = (sys.executable, "-m", "mcp_operator", "bridge")
"""The Python bridge's command line up to its flags."""

PROGRAM: list[str] = list(PYTHON_PROGRAM)
"""The bridge's command line up to its flags: the Python bridge unless a test swaps it
(``tests.support.dataplane.use_bridge``)."""

RELOAD_FLAGS: list[str] = ["--reload-seconds=0.3"]
"""Flags every started bridge gets, the Python and the compiled one alike: the configuration
file is checked often, so that a reload test does not wait."""


def server_entry(name: str, url: str, prefix: str | None = None, **extra: Any) -> dict[str, Any]:
    """One ``servers`` item: namespace ``default``, prefix = name unless given."""
    return {
        "name": name,
        "namespace": "default",
        "url": url,
        "prefix": name if prefix is None else prefix,
        **extra,
    }


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
    extra_config: Mapping[str, Any] | None = None,
) -> Iterator[RunningBridge]:
    port, health_port = free_port(), free_port()
    config = bridge_config(servers, port) | dict(extra_config or {})
    with tempfile.TemporaryDirectory(prefix="mcp-bridge-") as tmp:
        config_path = Path(tmp) / "config.yaml"
        config_path.write_text(yaml.safe_dump(config))
        output = Path(tmp) / "stdout"
        with output.open("wb") as sink:
            process = subprocess.Popen(
                [
                    *PROGRAM,
                    f"--config={config_path}",
                    f"--health-port={health_port}",
                    *RELOAD_FLAGS,
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


@contextlib.asynccontextmanager
async def bridge_of(servers: Sequence[dict[str, Any]]) -> AsyncIterator[RunningBridge]:
    """:func:`run_bridge` for async tests: the bridge process started and stopped off the
    event loop (upstreams served on that loop keep answering meanwhile)."""
    running = run_bridge(servers)
    bridge = await asyncio.to_thread(running.__enter__)
    try:
        yield bridge
    finally:
        await asyncio.to_thread(running.__exit__, None, None, None)


class CountingProxy:
    """A TCP proxy in front of an upstream that counts the ``tools/call`` requests through it.

    How a test proves that a refused call never reached the upstream. It runs its own event
    loop in a thread, so that it forwards while the test blocks.
    """

    MARK = b'"tools/call"'

    def __init__(self, upstream_url: str) -> None:
        parts = httpx.URL(upstream_url)
        self.target = (parts.host, parts.port or 80)
        self.port = free_port()
        self.url = str(parts.copy_with(port=self.port))
        self.calls = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, count: bool
    ) -> None:
        try:
            while chunk := await reader.read(65536):
                if count:
                    self.calls += chunk.count(self.MARK)
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(
            self._pipe(reader, up_writer, True), self._pipe(up_reader, writer, False)
        )

    def __enter__(self) -> CountingProxy:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._connection, "127.0.0.1", self.port), self._loop
        )
        self._server = future.result(10)
        return self

    def __exit__(self, *_: object) -> None:
        self._server.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
