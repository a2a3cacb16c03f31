"""Real MCP servers that nobody here wrote, started on loopback for tests and tools.

Each helper is a context manager that starts one server on a free
``127.0.0.1`` port in its own process group, waits until it accepts
connections, yields its URL, and always kills the whole process group on exit.
They are plain functions, usable from pytest fixtures and from other code.

- :func:`server_everything` — npm ``@modelcontextprotocol/server-everything``
  (installed by ``make node-tools`` under ``hack/node-tools``), with its own
  Streamable HTTP transport (``streamableHttp``, port from ``PORT``) or its
  legacy HTTP+SSE transport (``sse``). It speaks the legacy era (2025-11-25).
- :func:`mcp_server_time` — PyPI ``mcp-server-time``. Its command line serves
  stdio only, so this runs the package's own server object
  (``mcp_server_time.server.create_server``, the one its CLI runs) with the
  SDK's Streamable HTTP transport (``MCPServer.run("streamable-http")``), which
  serves both eras; no tool or handler of ours is involved.
- :func:`hostile_server` — our own misbehaving server, ``tests/support/hostile_server.py``.
- :func:`rug_pull_server` — our own server for the bridge's policies (a rug pull among them),
  ``tests/support/policy_server.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from mcp_operator.dev.processes import stop_process_group
from tests.support.waiting import eventually

REPO = Path(__file__).resolve().parents[2]
NODE_TOOLS = REPO / "hack" / "node-tools" / "node_modules"
SERVER_EVERYTHING = NODE_TOOLS / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
INSPECTOR = NODE_TOOLS / "@modelcontextprotocol/inspector/clients/launcher/build/index.js"
"""The official inspector's CLI (``--cli``), installed by ``make node-tools`` too."""
HOSTILE_SERVER = Path(__file__).resolve().parent / "hostile_server.py"
POLICY_SERVER = Path(__file__).resolve().parent / "policy_server.py"
START_TIMEOUT = 30.0

_TIME_SERVER = """\
import sys
from mcp_server_time.server import create_server
create_server("UTC").run("streamable-http", host=sys.argv[2], port=int(sys.argv[1]))
"""

_CHANGING_SERVER = """\
import sys
from mcp.server.mcpserver import Context, MCPServer
server = MCPServer("changing")
def added() -> str:
    \"\"\"Appears once grow was called.\"\"\"
    return "added"
@server.tool()
async def grow(ctx: Context) -> str:
    \"\"\"Adds the tool added and announces the change.\"\"\"
    server.add_tool(added)
    await ctx.notify_tools_changed()
    return "grown"
server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
"""


class PeerError(RuntimeError):
    """A peer is not installed or did not start."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _accepts(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


@contextlib.contextmanager
def run_server(
    argv: Sequence[str],
    port: int,
    *,
    env: Mapping[str, str] | None = None,
    name: str = "server",
    timeout: float = START_TIMEOUT,
    host: str = "127.0.0.1",
    ready: str | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``argv`` in a new process group until it accepts connections on ``host:port`` and,
    with ``ready`` (a path such as the adapter's ``/readyz``, which is 503 until its child has
    answered the handshake), until a GET of that path answers 200."""
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            list(argv),
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

        def tail() -> str:
            log.seek(0)
            return log.read()[-2000:].decode(errors="replace")

        def listening() -> bool:
            if process.poll() is not None:
                raise PeerError(f"{name} exited (port {port}):\n{tail()}")
            return _accepts(port, host)

        try:
            eventually(
                f"{name} listening on port {port}", listening, timeout, interval=0.05, explain=tail
            )
            if ready is not None:

                def answers() -> bool:
                    listening()  # still running
                    return _get_status(host, port, ready) == 200

                eventually(f"{name} ready ({ready})", answers, timeout, interval=0.05, explain=tail)
            yield process
        finally:
            stop_process_group(process, name=name)


def _get_status(host: str, port: int, path: str) -> int | None:
    """The status of a plain GET of ``path`` (None when the connection failed)."""
    try:
        with socket.create_connection((host, port), timeout=2) as sock:
            sock.sendall(
                f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
            )
            head = sock.recv(64)
    except OSError:
        return None
    parts = head.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        raise PeerError("node is not on PATH; server-everything needs Node.js")
    if not SERVER_EVERYTHING.exists():
        raise PeerError(f"{SERVER_EVERYTHING} is missing; run `make node-tools`")
    return node


@contextlib.contextmanager
def server_everything(transport: str = "streamableHttp", port: int | None = None) -> Iterator[str]:
    """server-everything over ``streamableHttp`` (yields ``.../mcp``) or ``sse`` (``.../sse``);
    on ``port`` when given (a test restarts a server where it was)."""
    if transport not in ("streamableHttp", "sse"):
        raise ValueError(f"server-everything has no HTTP transport {transport!r}")
    port = port or free_port()
    argv = [_node(), str(SERVER_EVERYTHING), transport]
    with run_server(argv, port, env={"PORT": str(port)}, name="server-everything"):
        path = "/mcp" if transport == "streamableHttp" else "/sse"
        yield f"http://127.0.0.1:{port}{path}"


def inspector_lists_and_calls(
    url: str, home: Path, tool: str, message: str
) -> tuple[set[str], str]:
    """The official inspector's CLI (:data:`INSPECTOR`) against the Streamable HTTP endpoint
    ``url``: the tool names its ``tools/list`` printed, and the text of its ``tools/call`` of
    ``tool`` with ``message`` (each run must exit 0). ``home``: a HOME of the test's own."""
    base = ["node", str(INSPECTOR), "--cli", url, "--transport", "http"]
    env = {**os.environ, "HOME": str(home)}

    def run(*args: str) -> Any:
        done = subprocess.run([*base, *args], capture_output=True, timeout=60, env=env)
        assert done.returncode == 0, done.stderr.decode()
        return json.loads(done.stdout)

    listed = run("--method", "tools/list")
    called = run("--method", "tools/call", "--tool-name", tool, "--tool-arg", f"message={message}")
    return {item["name"] for item in listed["tools"]}, str(called["content"][0]["text"])


@contextlib.contextmanager
def mcp_server_time(port: int | None = None, host: str = "127.0.0.1") -> Iterator[str]:
    """mcp-server-time over the SDK's Streamable HTTP transport (yields ``.../mcp``); on
    ``port`` when given (a test restarts a server where it was), listening on ``host``
    (loopback, or the node's bridge address, where the node's Pods reach this machine)."""
    port = port or free_port()
    argv = [sys.executable, "-c", _TIME_SERVER, str(port), host]
    with run_server(argv, port, name="mcp-server-time", host=host):
        yield f"http://{host}:{port}/mcp"


@contextlib.contextmanager
def sdk_changing_server() -> Iterator[str]:
    """A server on the official SDK (serving 2026-07-28 and the legacy revisions) whose tool
    ``grow`` adds the tool ``added`` and announces the change (yields ``.../mcp``)."""
    port = free_port()
    with run_server([sys.executable, "-c", _CHANGING_SERVER, str(port)], port, name="changing"):
        yield f"http://127.0.0.1:{port}/mcp"


@contextlib.contextmanager
def rug_pull_server(host: str = "127.0.0.1") -> Iterator[str]:
    """``tests/support/policy_server.py`` listening on ``host``: ``lookup`` (read-only),
    ``wipe`` (destructive, recorded; ``wiped`` tells), ``change``, which rewrites ``lookup``'s
    description and announces it, and ``change_quietly``, which rewrites it without a word
    (yields ``.../mcp``)."""
    port = free_port()
    argv = [sys.executable, str(POLICY_SERVER), str(port), host]
    with run_server(argv, port, name="policy server", host=host):
        yield f"http://{host}:{port}/mcp"


@contextlib.contextmanager
def hostile_server(mode: str, *args: str, host: str = "127.0.0.1") -> Iterator[str]:
    """``tests/support/hostile_server.py --mode MODE [args]`` listening on ``host`` (yields
    ``.../mcp``)."""
    port = free_port()
    argv = [sys.executable, str(HOSTILE_SERVER), "--port", str(port), "--mode", mode]
    argv += ["--host", host, *args]
    with run_server(argv, port, name=f"hostile server ({mode})", host=host):
        yield f"http://{host}:{port}/mcp"
