"""The adapter's FIFO mode, as a managed Pod runs it: server and adapter as separate processes.

The server process is started exactly as the Pod's ``server`` container starts
it (through the static ``mcp-stdio-exec`` helper, no shell), the FIFOs exactly as the
init container makes them; a restart of the server (the kubelet's job in a
Pod) is picked up by the adapter without restarting it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client

from mcp_operator.controller.mcpserver import containers
from mcp_operator.dev.processes import BIN_DIR
from tests.protocol import test_adapter
from tests.support import needs
from tests.support.peers import free_port
from tests.support.waiting import eventually


def adapter_command() -> list[str]:
    """The adapter these tests start (``test_adapter.PROGRAM``), without authentication."""
    return [*test_adapter.PROGRAM, "--auth=none"]


TIME_SERVER = str(Path(sys.executable).with_name("mcp-server-time"))


pytestmark = needs.mark(needs.image_tools_missing())


def start_server(fifo_dir: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(BIN_DIR / containers.EXEC_HELPER), f"--fifo-dir={fifo_dir}", "--", TIME_SERVER],
        start_new_session=True,
    )


def wait_status(url: str, code: int, timeout: float = 15) -> None:
    eventually(
        f"{url} answering {code}",
        lambda: httpx.get(url, timeout=2).status_code,
        timeout,
        until=lambda status: status == code,
        interval=0.1,
        ignoring=(httpx.HTTPError,),
    )


async def tool_names(url: str) -> list[str]:
    async with Client(url, mode="legacy", cache=None) as client:
        return sorted(tool.name for tool in (await client.list_tools()).tools)


@pytest.fixture
def adapter(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    fifo_dir = tmp_path / "fifos"
    made = subprocess.run(
        [*adapter_command(), f"--stdio-fifo-dir={fifo_dir}", "--make-fifos"], check=False
    )
    assert made.returncode == 0
    assert sorted(p.name for p in fifo_dir.iterdir()) == ["stdin", "stdout"]
    port = free_port()
    process = subprocess.Popen(
        [*adapter_command(), f"--port={port}", f"--stdio-fifo-dir={fifo_dir}"],
        start_new_session=True,
    )
    try:
        yield f"http://127.0.0.1:{port}", fifo_dir
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)


def test_the_adapter_serves_a_server_in_another_process_and_survives_its_restart(
    adapter: tuple[str, Path],
) -> None:
    base, fifo_dir = adapter
    wait_status(f"{base}/readyz", 503)  # no server yet: not ready, and honest about it
    server = start_server(fifo_dir)
    try:
        wait_status(f"{base}/readyz", 200)
        assert anyio.run(tool_names, f"{base}/mcp") == ["convert_time", "get_current_time"]
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
        wait_status(f"{base}/healthz", 503)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
    restarted = start_server(fifo_dir)
    try:
        wait_status(f"{base}/healthz", 200)
        wait_status(f"{base}/readyz", 200)
        assert anyio.run(tool_names, f"{base}/mcp") == ["convert_time", "get_current_time"]
    finally:
        os.killpg(restarted.pid, signal.SIGKILL)
        restarted.wait()


def test_fifo_mode_and_a_command_are_exclusive() -> None:
    result = subprocess.run(
        [*adapter_command(), "--stdio-fifo-dir=/tmp/x", "--", "true"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "either --stdio-fifo-dir or a server command" in result.stderr


def test_the_helper_exits_127_naming_a_program_it_cannot_find(tmp_path: Path) -> None:
    helper = str(BIN_DIR / containers.EXEC_HELPER)
    ran = subprocess.run(
        [helper, f"--fifo-dir={tmp_path}", "--", "no-such-mcp-server"],
        capture_output=True,
        text=True,
        env={"PATH": str(tmp_path)},
        check=False,
        timeout=10,
    )
    assert ran.returncode == 127
    assert '"no-such-mcp-server"' in ran.stderr
    assert subprocess.run([helper], capture_output=True, check=False).returncode == 2


def test_the_helper_installs_a_copy_of_itself_that_every_user_may_run(tmp_path: Path) -> None:
    helper = BIN_DIR / containers.EXEC_HELPER
    subprocess.run([str(helper), f"--install={tmp_path}"], check=True, timeout=10)
    copied = tmp_path / containers.EXEC_HELPER
    assert copied.read_bytes() == helper.read_bytes()
    assert copied.stat().st_mode & 0o777 == 0o555
    assert [p.name for p in tmp_path.iterdir()] == [containers.EXEC_HELPER]  # no temporary left
