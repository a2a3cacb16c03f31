"""The stdio→HTTP adapter as a real process, in front of real stdio servers, with real clients.

Each test starts ``python -m mcp_operator adapter`` on a free loopback port in
front of npm ``server-everything`` or PyPI ``mcp-server-time`` over stdio (or
a small fake stdio server written here for the failure cases), and talks to
it with the official SDK client, plain HTTP, and the inspector CLI.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from mcp import Client

from tests.support import needs, wire
from tests.support.peers import SERVER_EVERYTHING, free_port, inspector_lists_and_calls
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(180)

REPO = Path(__file__).resolve().parents[2]
TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"
EVERYTHING = ("node", str(SERVER_EVERYTHING), "stdio")
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INIT = wire.initialize()

needs_node = needs.mark(needs.node_missing())

PROGRAM: list[str] = [sys.executable, "-m", "mcp_operator", "adapter"]
"""The adapter these tests start; tests/protocol/test_dataplane_adapter.py runs them again
against the compiled one (``tests.support.dataplane``)."""

# A stdio server that is wrong on purpose: `silent` never answers; `noisy`
# prints lines that are not JSON around every answer.
FAKE_SERVER = r"""
import json, sys
mode = sys.argv[1]
print("starting up, not json", flush=True)
for raw in sys.stdin:
    msg = json.loads(raw)
    if mode == "silent" or "id" not in msg:
        continue
    print("log: got " + msg["method"], flush=True)
    print("[1, 2, 3]", flush=True)
    if msg["method"] == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "fake", "version": "0"}}
    elif msg["method"] == "tools/call":
        result = {"content": [{"type": "text", "text": msg["params"]["arguments"]["message"]}]}
    else:
        result = {"tools": []}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"""


@dataclass
class Adapter:
    process: subprocess.Popen[bytes]
    url: str
    base: str
    log: Path

    def health(self, path: str = "/healthz") -> httpx.Response:
        return httpx.get(self.base + path, timeout=5)

    def child_pid(self) -> int:
        pid = self.health().json()["child"]["pid"]
        assert isinstance(pid, int)
        return pid

    def wait_for(self, path: str, status: int, timeout: float = 30) -> None:
        eventually(
            f"{path} answering {status}",
            lambda: self.health(path).status_code,
            timeout,
            until=lambda code: code == status,
            interval=0.05,
            ignoring=(httpx.HTTPError,),
            explain=lambda: f"log:\n{self.log.read_text()}",
        )

    def logs(self) -> str:
        return self.log.read_text()


@contextlib.contextmanager
def adapter(
    command: Sequence[str], tmp_path: Path, *flags: str, ready: bool = True, port: int = 0
) -> Iterator[Adapter]:
    port = port or free_port()
    log = tmp_path / f"adapter-{port}.log"
    argv = [*PROGRAM, "--port", str(port), *flags]
    if not any(flag.startswith("--auth") for flag in flags):
        argv.append("--auth=none")  # auth is tested in test_adapter_auth.py
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*argv, "--", *command], stdout=out, stderr=subprocess.STDOUT, cwd=REPO
        )
    running = Adapter(process, f"http://127.0.0.1:{port}/mcp", f"http://127.0.0.1:{port}", log)
    try:
        running.wait_for("/readyz" if ready else "/healthz", 200)
        yield running
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def everything(tmp_path: Path) -> Iterator[Adapter]:
    needs.require(needs.node_missing())
    with adapter(EVERYTHING, tmp_path) as running:
        yield running


def initialize(url: str, client: httpx.Client) -> str:
    response = client.post(url, json=INIT, headers=ACCEPT)
    assert response.status_code == 200, response.text
    return response.headers["mcp-session-id"]


# ------------------------------------------------------------------ both eras, official SDK client


@needs_node
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_sdk_client_lists_and_calls_server_everything_in_both_eras(
    everything: Adapter, mode: str
) -> None:
    async with Client(everything.url, mode=mode) as client:
        tools = await client.list_tools()
        assert "echo" in {tool.name for tool in tools.tools}
        result = await client.call_tool("echo", {"message": f"hello {mode}"})
    assert result.content[0].text == f"Echo: hello {mode}"  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_sdk_client_calls_mcp_server_time_in_both_eras(tmp_path: Path, mode: str) -> None:
    with adapter((str(TIME_SERVER),), tmp_path) as running:
        async with Client(running.url, mode=mode) as client:
            tools = await client.list_tools()
            assert "get_current_time" in {tool.name for tool in tools.tools}
            result = await client.call_tool("get_current_time", {"timezone": "UTC"})
    assert '"timezone": "UTC"' in result.content[0].text  # type: ignore[union-attr]


@needs_node
def test_the_2026_era_is_stateless_and_checks_its_headers(everything: Adapter) -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    body["params"] = {"name": "echo", "arguments": {"message": "m"}, "_meta": meta}
    headers = {**ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call"}
    with httpx.Client(timeout=10) as http:
        good = http.post(everything.url, json=body, headers={**headers, "mcp-name": "echo"})
        assert good.status_code == 200 and "mcp-session-id" not in good.headers
        result = good.json()["result"]
        assert result["content"][0]["text"] == "Echo: m" and result["resultType"] == "complete"
        assert "io.modelcontextprotocol/serverInfo" in result["_meta"]
        mismatch = http.post(everything.url, json=body, headers={**headers, "mcp-name": "other"})
        assert mismatch.status_code == 400 and mismatch.json()["error"]["code"] == -32020
        discover = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "server/discover",
            "params": {"_meta": meta},
        }
        discover_headers = {**headers, "mcp-method": "server/discover"}
        found = http.post(everything.url, json=discover, headers=discover_headers)
        assert found.json()["result"]["supportedVersions"] == ["2026-07-28"]
        assert http.get(everything.url, headers=discover_headers).status_code == 405


# ------------------------------------------------------------------ sessions and HTTP rules


@needs_node
def test_sessions_answer_404_when_unknown_and_end_with_delete(everything: Adapter) -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    with httpx.Client(timeout=10) as http:
        unknown = http.post(everything.url, json=call, headers={**ACCEPT, "mcp-session-id": "nope"})
        assert unknown.status_code == 404
        assert http.post(everything.url, json=call, headers=ACCEPT).status_code == 400
        session = initialize(everything.url, http)
        listed = http.post(everything.url, json=call, headers={**ACCEPT, "mcp-session-id": session})
        assert listed.status_code == 200 and listed.headers["content-type"] == "application/json"
        deleted = http.delete(everything.url, headers={"mcp-session-id": session})
        assert deleted.status_code == 200
        again = http.post(everything.url, json=call, headers={**ACCEPT, "mcp-session-id": session})
        assert again.status_code == 404


@needs_node
def test_wrong_host_is_421_bad_origin_is_403_and_allowed_names_pass(tmp_path: Path) -> None:
    flags = ("--allowed-host", "my-server.team.svc", "--max-body-bytes", "2000")
    with adapter(EVERYTHING, tmp_path, *flags) as running, httpx.Client(timeout=10) as http:
        assert (
            http.post(
                running.url, json=INIT, headers={**ACCEPT, "host": "evil.example"}
            ).status_code
            == 421
        )
        evil = {**ACCEPT, "origin": "http://evil.example"}
        assert http.post(running.url, json=INIT, headers=evil).status_code == 403
        allowed = {**ACCEPT, "host": "my-server.team.svc:8080"}
        assert http.post(running.url, json=INIT, headers=allowed).status_code == 200
        big = {**INIT, "padding": "x" * 5000}
        assert http.post(running.url, json=big, headers=ACCEPT).status_code == 413
        # health is for the kubelet, which sends the Pod IP as Host
        assert (
            http.get(running.base + "/healthz", headers={"host": "10.1.2.3:8080"}).status_code
            == 200
        )


# ------------------------------------------------------------------ many sessions, one child


@needs_node
async def test_fifty_sessions_times_twenty_calls_get_exactly_their_own_answers(
    everything: Adapter,
) -> None:
    async def one_session(number: int) -> list[tuple[str, str]]:
        async with Client(everything.url, mode="legacy") as client:

            async def call(index: int) -> tuple[str, str]:
                message = f"session-{number}-call-{index}"
                result = await client.call_tool("echo", {"message": message})
                return f"Echo: {message}", result.content[0].text  # type: ignore[union-attr]

            return await asyncio.gather(*(call(index) for index in range(20)))

    results = await asyncio.gather(*(one_session(number) for number in range(50)))
    pairs = [pair for session in results for pair in session]
    assert len(pairs) == 1000
    misrouted = [pair for pair in pairs if pair[0] != pair[1]]
    assert misrouted == []


@needs_node
async def test_progress_reaches_the_caller_that_asked_for_it(everything: Adapter) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with Client(everything.url, mode="legacy") as client:
        result = await client.call_tool(
            "trigger-long-running-operation",
            {"duration": 1, "steps": 3},
            progress_callback=on_progress,
        )
    assert not result.is_error
    assert seen == [1, 2, 3]


# ------------------------------------------------------------------ the child dies, hangs, babbles


@needs_node
def test_a_killed_child_fails_calls_promptly_and_health_recovers(everything: Adapter) -> None:
    with httpx.Client(timeout=30) as http:
        session = initialize(everything.url, http)
        headers = {**ACCEPT, "mcp-session-id": session}
        slow = {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "tools/call",
            "params": {
                "name": "trigger-long-running-operation",
                "arguments": {"duration": 20, "steps": 2},
            },
        }
        pid = everything.child_pid()
        killer = threading.Timer(0.5, os.kill, (pid, signal.SIGKILL))
        started = time.monotonic()
        killer.start()
        answer = http.post(
            everything.url, json=slow, headers={**headers, "accept": "application/json"}
        )
        killer.join()
        elapsed = time.monotonic() - started
        assert elapsed < 5, f"the call took {elapsed:.1f}s after the child died"
        error = answer.json()["error"]
        assert answer.json()["id"] == 9 and "exited" in error["message"]
        everything.wait_for("/healthz", 503, timeout=5)
        everything.wait_for("/readyz", 200, timeout=30)
        everything.wait_for("/healthz", 200, timeout=1)
        assert everything.child_pid() != pid
        # the old session was reset with the child: the client must re-initialize
        listed = http.post(
            everything.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers=headers,
        )
        assert listed.status_code == 404
        initialize(everything.url, http)


def test_a_child_that_never_answers_the_handshake_is_never_ready(tmp_path: Path) -> None:
    script = tmp_path / "fake.py"
    script.write_text(FAKE_SERVER)
    flags = ("--handshake-timeout-seconds", "1", "--max-restarts", "100")
    with adapter((sys.executable, str(script), "silent"), tmp_path, *flags, ready=False) as running:
        # Past the handshake's deadline (the log says so), the adapter is still not ready.
        eventually(
            "the log telling that the child did not answer",
            running.logs,
            10,
            until=lambda log: "did not answer initialize" in log,
            interval=0.1,
        )
        assert running.health("/readyz").status_code == 503
        with httpx.Client(timeout=10) as http:
            refused = http.post(running.url, json=INIT, headers=ACCEPT)
        assert refused.status_code == 503
        assert "did not answer initialize within 1s" in running.logs()


def test_stdout_lines_that_are_not_json_are_logged_and_dropped(tmp_path: Path) -> None:
    script = tmp_path / "fake.py"
    script.write_text(FAKE_SERVER)
    with (
        adapter((sys.executable, str(script), "noisy"), tmp_path) as running,
        httpx.Client(timeout=10) as http,
    ):
        session = initialize(running.url, http)
        for index in range(3):
            call = {
                "jsonrpc": "2.0",
                "id": index,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"message": f"m{index}"}},
            }
            answer = http.post(
                running.url, json=call, headers={**ACCEPT, "mcp-session-id": session}
            )
            assert answer.json()["result"]["content"][0]["text"] == f"m{index}"
        assert running.health().status_code == 200
    assert "Dropped a stdout line that is not JSON from the child" in running.logs()
    assert "log: got tools/call" in running.logs()


@needs_node
def test_sigterm_stops_the_adapter_and_leaves_no_child(everything: Adapter) -> None:
    pid = everything.child_pid()
    with httpx.Client(timeout=10) as http:
        session = initialize(everything.url, http)
        # a GET stream is open: shutdown must not wait on it
        with http.stream(
            "GET",
            everything.url,
            headers={**ACCEPT, "accept": "text/event-stream", "mcp-session-id": session},
        ):
            started = time.monotonic()
            everything.process.send_signal(signal.SIGTERM)
            code = everything.process.wait(15)
    assert code == 0
    assert time.monotonic() - started < 10
    assert (
        not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    )


# ------------------------------------------------------------------ the official inspector CLI


@needs_node
@needs.mark(needs.inspector_missing())
def test_the_inspector_cli_lists_and_calls_tools_through_the_adapter(
    everything: Adapter, tmp_path: Path
) -> None:
    names, text = inspector_lists_and_calls(everything.url, tmp_path, "echo", "inspected")
    assert "echo" in names and text == "Echo: inspected"


@needs_node
async def test_the_legacy_sse_transport_serves_the_sdk_sse_client(tmp_path: Path) -> None:
    from mcp.client.sse import sse_client

    with adapter(EVERYTHING, tmp_path, "--sse") as running:
        async with Client(sse_client(running.base + "/sse"), mode="legacy") as client:
            tools = await client.list_tools()
            result = await client.call_tool("echo", {"message": "over sse"})
    assert "echo" in {tool.name for tool in tools.tools}
    assert result.content[0].text == "Echo: over sse"  # type: ignore[union-attr]
