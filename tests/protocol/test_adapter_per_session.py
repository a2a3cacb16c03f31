"""``--child-per-session``: a child of its own for each session, from a bounded pool.

Real peers: the adapter in front of server-everything (stdio), official SDK clients.

- 4 legacy sessions by 3 concurrent ``trigger-sampling-request`` calls: 12 of 12 complete,
  each with its own session's answer (server-everything passes no progress token on, so
  with one shared child a call's sampling request cannot be attributed: see bench/);
- two 2026-07-28 callers asking for roots each get their own roots, not the other's;
- the pool's bounds: a client that opens sessions without end gets 503 with
  ``Retry-After`` at once while the sessions it holds keep working; a child that never
  answers ``initialize`` is killed at the spawn timeout (503); DELETE reaps the child.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.protocol.test_adapter import ACCEPT, EVERYTHING, INIT, REPO, Adapter, adapter
from tests.support import needs
from tests.support.waiting import eventually

pytestmark = [pytest.mark.timeout(180), needs.mark(needs.node_missing())]

SILENT_SERVER = "import sys, time\nfor line in sys.stdin:\n    time.sleep(3600)\n"


@pytest.fixture
def pooled(tmp_path: Path) -> Iterator[Adapter]:
    with adapter(EVERYTHING, tmp_path, "--child-per-session", "--max-children", "8") as running:
        yield running


def marker_sampler(marker: str) -> Any:
    async def sample(
        context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        await asyncio.sleep(0.05)  # the other calls' requests are in flight meanwhile
        reply = types.TextContent(text=f"answer of {marker}")
        return types.CreateMessageResult(role="assistant", content=reply, model="test")

    return sample


def text_of(result: Any) -> str:
    content = result.content[0]
    assert isinstance(content, types.TextContent), result
    return content.text


def children(running: Adapter) -> int:
    return int(running.health().json()["children"])


async def sampling_session(url: str, marker: str, calls: int) -> list[str]:
    """One legacy session making ``calls`` concurrent sampling calls; each call's outcome."""
    async with Client(url, mode="legacy", sampling_callback=marker_sampler(marker)) as client:

        async def one(index: int) -> str:
            result = await client.call_tool(
                "trigger-sampling-request", {"prompt": f"{marker} call {index}"}
            )
            return text_of(result)

        return list(await asyncio.gather(*(one(index) for index in range(calls))))


async def test_twelve_concurrent_sampling_calls_of_four_sessions_get_their_own_answers(
    pooled: Adapter,
) -> None:
    markers = [f"session-{index}" for index in range(4)]
    outcomes = await asyncio.gather(*(sampling_session(pooled.url, m, 3) for m in markers))
    for marker, texts in zip(markers, outcomes, strict=True):
        assert len(texts) == 3
        for text in texts:
            assert f"answer of {marker}" in text, text
            others = [other for other in markers if other != marker]
            assert not any(f"answer of {other}" in text for other in others), text
    async with httpx.AsyncClient(timeout=5) as http:
        metrics = (await http.get(pooled.base + "/metrics")).text
    assert "mcp_adapter_child_spawn_seconds_count 4.0" in metrics
    assert 'mcp_adapter_calls_total{method="tools/call",outcome="result"} 12.0' in metrics
    # each session's child was reaped on DELETE (the SDK client deletes its session on exit)
    eventually("children reaped", lambda: children(pooled), 10, until=lambda n: n == 0)


def roots_client(url: str, caller: str, root: str) -> Client:
    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=f"file:///{root}", name=root)])

    http = httpx2.AsyncClient(headers={"mcp-operator-caller": caller}, timeout=30)
    return Client(
        streamable_http_client(url, http_client=http), mode="auto", list_roots_callback=roots
    )


async def test_a_2026_caller_asking_for_roots_gets_its_own_not_an_earlier_callers(
    pooled: Adapter,
) -> None:
    async with roots_client(pooled.url, "alice", "alice-project") as alice:
        assert alice.protocol_version == "2026-07-28"
        first = text_of(await alice.call_tool("get-roots-list", {}))
    async with roots_client(pooled.url, "bob", "bob-project") as bob:
        second = text_of(await bob.call_tool("get-roots-list", {}))
    assert "alice-project" in first and "bob-project" not in first
    assert "bob-project" in second and "alice-project" not in second
    assert children(pooled) == 2  # one per caller: alice's is reaped when idle, not on exit


def test_a_client_opening_sessions_without_end_is_bounded_and_others_keep_working(
    tmp_path: Path,
) -> None:
    flags = ("--child-per-session", "--max-children", "3")
    with adapter(EVERYTHING, tmp_path, *flags) as running, httpx.Client(timeout=30) as http:
        sessions = []
        for _ in range(3):
            response = http.post(running.url, json=INIT, headers=ACCEPT)
            assert response.status_code == 200, response.text
            sessions.append(response.headers["mcp-session-id"])
        # the three are in use: each holds a GET stream, so none is idle to make room for
        streams = [
            http.stream(
                "GET", running.url, headers={"accept": "text/event-stream", "mcp-session-id": sid}
            )
            for sid in sessions
        ]
        opened = [stream.__enter__() for stream in streams]
        try:
            assert all(response.status_code == 200 for response in opened)
            for _ in range(5):
                refused = http.post(running.url, json=INIT, headers=ACCEPT)
                assert refused.status_code == 503, refused.text
                assert refused.headers["retry-after"] == "1"
                assert "busy" in refused.json()["error"]["message"]
            assert running.health("/readyz").status_code == 503
            call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call"}
            call["params"] = {"name": "echo", "arguments": {"message": "still here"}}
            answer = http.post(
                running.url, json=call, headers={**ACCEPT, "mcp-session-id": sessions[0]}
            )
            assert answer.status_code == 200 and "still here" in answer.text
        finally:
            for stream in streams:
                stream.__exit__(None, None, None)
        assert children(running) == 3
        deleted = http.delete(running.url, headers={"mcp-session-id": sessions[1]})
        assert deleted.status_code == 200
        eventually("the child reaped", lambda: children(running), 10, until=lambda n: n == 2)
        assert http.post(running.url, json=INIT, headers=ACCEPT).status_code == 200


def test_a_child_that_hangs_on_spawn_is_killed_at_the_timeout(tmp_path: Path) -> None:
    flags = ("--child-per-session", "--spawn-timeout-seconds", "1")
    command = [sys.executable, "-c", SILENT_SERVER]
    with adapter(command, tmp_path, *flags) as running, httpx.Client(timeout=30) as http:
        refused = http.post(running.url, json=INIT, headers=ACCEPT)
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
        assert "did not start in time" in refused.json()["error"]["message"]
        assert children(running) == 0
        metrics = http.get(running.base + "/metrics").text
        assert 'mcp_adapter_child_spawns_total{outcome="timeout"} 1.0' in metrics
        eventually("the silent child killed", silent_children, 10, until=lambda n: n == 0)


def silent_children() -> int:
    """Processes running SILENT_SERVER (this test's children only: the text is its own)."""
    assert SILENT_SERVER.startswith("import sys, time")
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path("/proc", entry, "cmdline").read_bytes()
            except OSError:
                continue
            # the adapter's own command line holds the child's, after ``--``
            count += cmdline.startswith(sys.executable.encode() + b"\0-c\0import sys, time")
    return count


# ------------------------------------------------------------------ as a managed Pod runs it


@pytest.fixture
def spawn_helper(tmp_path: Path) -> Path:
    """``mcp-stdio-exec`` built from this checkout (the cached one may predate its
    ``--spawn-socket`` mode)."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not Path(go).exists():
        needs.require("go is not installed: it comes with the machine's toolchains")
    binary = tmp_path / "mcp-stdio-exec"
    subprocess.run(
        [go, "build", "-o", str(binary), "."], cwd=REPO / "operator" / "stdio-exec", check=True
    )
    return binary


def test_in_a_managed_pod_the_spawn_helper_gives_each_session_its_own_server(
    tmp_path: Path, spawn_helper: Path
) -> None:
    fifo_dir = tmp_path / "run-mcp"
    fifo_dir.mkdir()
    helper = subprocess.Popen(
        [str(spawn_helper), f"--spawn-socket={fifo_dir / 'spawn.sock'}", "--", *EVERYTHING],
        start_new_session=True,
    )
    try:
        flags = ("--child-per-session", "--stdio-fifo-dir", str(fifo_dir))
        with adapter([], tmp_path, *flags) as running:

            async def both() -> list[list[str]]:
                return list(
                    await asyncio.gather(
                        sampling_session(running.url, "pod-a", 2),
                        sampling_session(running.url, "pod-b", 2),
                    )
                )

            first, second = asyncio.run(both())
            assert all("answer of pod-a" in text for text in first), first
            assert all("answer of pod-b" in text for text in second), second
            eventually("children reaped", lambda: children(running), 10, until=lambda n: n == 0)
            # the helper's children end with their connections
            eventually(
                "servers gone", lambda: helper_children(helper.pid), 15, until=lambda n: n == 0
            )
    finally:
        helper.send_signal(signal.SIGTERM)
        helper.wait(15)


def helper_children(pid: int) -> int:
    """Processes whose parent is the helper ``pid``."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path("/proc", entry, "stat").read_text()
            except OSError:
                continue
            count += int(stat.rsplit(")", 1)[1].split()[1]) == pid
    return count


def test_a_2026_caller_that_disconnects_mid_call_has_its_child_reaped(pooled: Adapter) -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    call = {"name": "trigger-long-running-operation", "arguments": {"duration": 30, "steps": 3}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {**call, "_meta": meta}}
    headers = {
        **ACCEPT,
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": call["name"],
        "mcp-operator-caller": "leaver",
    }
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(pooled.url, json=body, headers=headers, timeout=httpx.Timeout(5, read=3))
    eventually("the leaver's child reaped", lambda: children(pooled), 15, until=lambda n: n == 0)
    metrics = httpx.get(pooled.base + "/metrics", timeout=5).text
    assert 'mcp_adapter_children_reaped_total{reason="disconnected"} 1.0' in metrics


def test_an_idle_sessions_child_is_reaped_and_the_session_then_gets_404(tmp_path: Path) -> None:
    flags = ("--child-per-session", "--child-idle-seconds", "1")
    with adapter(EVERYTHING, tmp_path, *flags) as running, httpx.Client(timeout=30) as http:
        opened = http.post(running.url, json=INIT, headers=ACCEPT)
        session = opened.headers["mcp-session-id"]
        assert children(running) == 1
        eventually("the idle child reaped", lambda: children(running), 15, until=lambda n: n == 0)
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        gone = http.post(running.url, json=ping, headers={**ACCEPT, "mcp-session-id": session})
        assert gone.status_code == 404  # the client initializes again, as the spec says
        assert http.post(running.url, json=INIT, headers=ACCEPT).status_code == 200


def test_caller_names_do_not_buy_one_address_more_than_its_share(tmp_path: Path) -> None:
    """One address naming a new ``Mcp-Operator-Caller`` on every request fills the pool at
    most with its own children: at the pool's bound it replaces its own idle ones."""
    flags = ("--child-per-session", "--max-children", "2")
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    with adapter(EVERYTHING, tmp_path, *flags) as running, httpx.Client(timeout=30) as http:
        for index in range(4):
            params = {"_meta": meta}
            body = {"jsonrpc": "2.0", "id": index, "method": "tools/list", "params": params}
            headers = {
                **ACCEPT,
                "mcp-protocol-version": "2026-07-28",
                "mcp-method": "tools/list",
                "mcp-operator-caller": f"name-{index}",
            }
            assert http.post(running.url, json=body, headers=headers).status_code == 200
            assert children(running) <= 2
        metrics = http.get(running.base + "/metrics").text
        assert 'mcp_adapter_children_reaped_total{reason="evicted"} 2.0' in metrics
        get = http.get(running.url, headers={"mcp-protocol-version": "2026-07-28"})
        assert get.status_code == 405
