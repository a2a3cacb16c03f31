"""The adapter under hostile clients and a misbehaving child: the attacks of issue 9.

Each test starts the real adapter process in front of a small stdio server
written here and reproduces one attack: megabytes of capabilities in many
initializes, many large calls at once, a flood of sessions, an answer over the
line limit, a client that sends its request a byte at a time, and a listener
that must take IPv4 and IPv6 alike. The memory figures are the adapter
process's own peak RSS (``VmHWM``), the stdio child not counted.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.protocol.test_adapter import ACCEPT, INIT, adapter, initialize
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.timeout(180)

# `hold` answers every tools/call after params.arguments.hold seconds (calls stay in flight),
# or, with params.arguments.until_released, when a call of the tool `release` comes (keeping
# only the id of each call it holds, read from the head of its line without parsing the rest:
# a megabyte of small objects takes a loaded machine a while to parse, and a child slow to
# read its stdin gets calls refused); `huge` answers a tools/call with a line of
# params.arguments.size bytes, its id first or last.
BOUNDS_SERVER = r"""
import fcntl, json, re, sys, threading
mode = sys.argv[1]
lock = threading.Lock()
def write(line):
    with lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
def answer(msg, result):
    write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}))
try:  # a megabyte line in one read, not sixteen (a loaded machine schedules the child rarely)
    fcntl.fcntl(sys.stdin.fileno(), fcntl.F_SETPIPE_SZ, 1024 * 1024)
except OSError:
    pass
HELD = re.compile(r'\{"jsonrpc":"2\.0","id":(\d+),"method":"tools/call",'
                  r'"params":\{"name":"t","arguments":\{"until_released":true,')
parked = []
for raw in sys.stdin:
    held = HELD.match(raw)
    if held is not None:
        parked.append({"id": int(held.group(1))})
        continue
    msg = json.loads(raw)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        answer(msg, {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                     "serverInfo": {"name": "bounds", "version": "0"}})
    elif msg["method"] == "tools/call" and mode == "hold":
        result = {"content": [{"type": "text", "text": "held"}]}
        arguments = msg["params"]["arguments"]
        if msg["params"]["name"] == "release":
            for held in parked + [msg]:
                answer(held, result)
            parked = []
        else:
            threading.Timer(arguments.get("hold", 0), answer, (msg, result)).start()
    elif msg["method"] == "tools/call" and mode == "huge":
        args = msg["params"]["arguments"]
        text = "SECRET-CONTENT " * (args["size"] // 15)
        result = json.dumps({"content": [{"type": "text", "text": text}]})
        if args["order"] == "id-first":
            write('{"jsonrpc":"2.0","id":%d,"result":%s}' % (msg["id"], result))
        else:
            write('{"result":%s,"jsonrpc":"2.0","id":%d}' % (result, msg["id"]))
    else:
        answer(msg, {"tools": []})
"""


@pytest.fixture
def bounds_server(tmp_path: Path) -> Path:
    script = tmp_path / "bounds_server.py"
    script.write_text(BOUNDS_SERVER)
    return script


def peak_and_current_mib(pid: int) -> tuple[float, float]:
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmHWM"].split()[0]) / 1024, int(fields["VmRSS"].split()[0]) / 1024


def many_small_objects(size: int) -> dict[str, object]:
    """About ``size`` bytes of JSON that grows the most when parsed: many empty objects."""
    return {f"k{index}": {} for index in range(size // 12)}


def call(request_id: int, **arguments: object) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "t", "arguments": arguments},
    }


def compact(message: object) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


# ------------------------------------------------------------------ memory


def test_thirty_initializes_with_a_megabyte_of_capabilities_each_leave_the_adapter_small(
    tmp_path: Path, bounds_server: Path
) -> None:
    with adapter((sys.executable, str(bounds_server), "hold"), tmp_path) as running:
        idle, _ = peak_and_current_mib(running.process.pid)
        capabilities = {"experimental": many_small_objects(1_000_000)}
        body = compact({**INIT, "params": {**INIT["params"], "capabilities": capabilities}})
        assert 900_000 < len(body) < 1024 * 1024
        with httpx.Client(timeout=30) as http:
            statuses = [
                http.post(running.url, content=body, headers=ACCEPT).status_code for _ in range(30)
            ]
            too_big = b" " * (4 * 1024 * 1024 - len(body)) + body
            refused = http.post(running.url, content=too_big, headers=ACCEPT)
        peak, now = peak_and_current_mib(running.process.pid)
    assert statuses == [200] * 30
    assert refused.status_code == 413 and b"1048576 bytes" in refused.content
    # Before: each session kept its parsed capabilities (about 17 MiB each): over 500 MiB.
    assert peak - idle < 100, f"peak {peak:.0f} MiB from {idle:.0f} MiB idle"
    assert now - idle < 40, f"{now:.0f} MiB held after the initializes, {idle:.0f} MiB idle"


async def test_large_calls_beyond_the_byte_budget_get_503_with_retry_after_then_pass(
    tmp_path: Path, bounds_server: Path
) -> None:
    flags = ("--max-body-bytes", "200000", "--max-inflight-bytes", "700000")
    with adapter((sys.executable, str(bounds_server), "hold"), tmp_path, *flags) as running:
        async with httpx.AsyncClient(timeout=60) as http:
            opened = await http.post(running.url, json=INIT, headers=ACCEPT)
            headers = {**ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"]}
            padding = "x" * 190_000

            async def post(index: int, hold: float) -> httpx.Response:
                body = compact(call(index, hold=hold, padding=padding))
                return await http.post(running.url, content=body, headers=headers)

            answers = await asyncio.gather(*(post(index, 2.0) for index in range(10)))
            after = await post(99, 0)
    admitted = [a for a in answers if a.status_code == 200]
    refused = [a for a in answers if a.status_code == 503]
    assert len(admitted) == 3 and len(refused) == 7  # 700,000 bytes hold three bodies of 190 KB
    assert all(a.headers["retry-after"] == "1" for a in refused)
    assert all("retry later" in a.json()["error"]["message"] for a in refused)
    assert all(a.json()["result"]["content"][0]["text"] == "held" for a in admitted)
    assert after.status_code == 200  # the budget was given back when the calls were answered


async def test_a_hundred_concurrent_megabyte_calls_leave_the_adapter_within_its_limit(
    tmp_path: Path, bounds_server: Path
) -> None:
    """Every call the byte budget admits is held by the child until all hundred have been
    either refused or forwarded: the peak is taken with as many bodies in flight as the
    budget allows, however slowly a loaded machine gets there (no call is answered early and
    lets another one in), and the work is bounded by the counts, not by a clock."""
    with adapter((sys.executable, str(bounds_server), "hold"), tmp_path) as running:
        idle, _ = peak_and_current_mib(running.process.pid)
        limits = httpx.Limits(max_connections=110)
        async with httpx.AsyncClient(timeout=150, limits=limits) as http:
            opened = await http.post(running.url, json=INIT, headers=ACCEPT)
            headers = {**ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"]}
            payload = many_small_objects(1_000_000)
            arguments = compact({"until_released": True, "payload": payload})

            async def post(index: int) -> int:
                head = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call",' % index
                body = head + b'"params":{"name":"t","arguments":' + arguments + b"}}"
                response = await http.post(running.url, content=body, headers=headers)
                return response.status_code

            calls = [asyncio.create_task(post(index)) for index in range(100)]

            async def settled() -> int:
                """Calls refused, plus calls forwarded and held by the child."""
                health = await http.get(f"{running.base}/readyz")
                refused = sum(1 for task in calls if task.done())
                return refused + health.json()["inflight"]

            await eventually_async(
                "every call refused or held", settled, 150, until=lambda count: count == 100
            )
            release = {**call(1000), "params": {"name": "release", "arguments": {}}}
            released = await http.post(running.url, json=release, headers=headers)
            statuses = await asyncio.gather(*calls)
        peak, _ = peak_and_current_mib(running.process.pid)
    assert released.status_code == 200
    assert set(statuses) <= {200, 503} and statuses.count(200) >= 20
    # Before: every call kept its decoded body until answered: 1,287 MiB peak here.
    assert peak - idle < 120, f"peak {peak:.0f} MiB from {idle:.0f} MiB idle"


async def test_concurrent_2026_calls_with_a_megabyte_of_capabilities_keep_none_of_it(
    tmp_path: Path, bounds_server: Path
) -> None:
    with adapter((sys.executable, str(bounds_server), "hold"), tmp_path) as running:
        idle, _ = peak_and_current_mib(running.process.pid)
        meta = compact(
            {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {
                    "experimental": many_small_objects(900_000)
                },
            }
        )
        headers = {
            **ACCEPT,
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/call",
            "mcp-name": "t",
        }
        limits = httpx.Limits(max_connections=70)
        async with httpx.AsyncClient(timeout=60, limits=limits) as http:

            async def post(index: int) -> int:
                body = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":' % index
                body += b'{"name":"t","arguments":{"hold":3},"_meta":' + meta + b"}}"
                response = await http.post(running.url, content=body, headers=headers)
                return response.status_code

            statuses = await asyncio.gather(*(post(index) for index in range(60)))
        peak, _ = peak_and_current_mib(running.process.pid)
    assert set(statuses) <= {200, 503} and statuses.count(200) >= 20, statuses
    # Before: each call kept its envelope's capabilities object until answered (487 MiB).
    assert peak - idle < 120, f"peak {peak:.0f} MiB from {idle:.0f} MiB idle"


# ------------------------------------------------------------------ session slots


def test_a_flood_of_initializes_evicts_idle_sessions_instead_of_locking_clients_out(
    tmp_path: Path, bounds_server: Path
) -> None:
    flags = ("--max-sessions", "20")
    with (
        adapter((sys.executable, str(bounds_server), "hold"), tmp_path, *flags) as running,
        httpx.Client(timeout=10) as http,
    ):
        first = initialize(running.url, http)
        for _ in range(200):
            initialize(running.url, http)
        latecomer = initialize(running.url, http)
        listed = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        ok = http.post(running.url, json=listed, headers={**ACCEPT, "mcp-session-id": latecomer})
        gone = http.post(running.url, json=listed, headers={**ACCEPT, "mcp-session-id": first})
        ready = running.health("/readyz")
    assert ok.status_code == 200 and gone.status_code == 404
    assert ready.status_code == 200
    limits = ready.json()["limits"]
    assert limits["maxSessions"] == 20 and limits["sessionsEvicted"] == 182


def test_readyz_is_red_while_every_session_is_busy_and_new_clients_get_503(
    tmp_path: Path, bounds_server: Path
) -> None:
    flags = ("--max-sessions", "2")
    with (
        adapter((sys.executable, str(bounds_server), "hold"), tmp_path, *flags) as running,
        httpx.Client(timeout=10) as http,
    ):
        streams = []
        for _ in range(2):
            session = initialize(running.url, http)
            headers = {**ACCEPT, "accept": "text/event-stream", "mcp-session-id": session}
            stream = http.stream("GET", running.url, headers=headers)
            stream.__enter__()
            streams.append(stream)
        running.wait_for("/readyz", 503, timeout=5)
        refused = http.post(running.url, json=INIT, headers=ACCEPT)
        streams.pop().__exit__(None, None, None)
        running.wait_for("/readyz", 200, timeout=5)
        admitted = http.post(running.url, json=INIT, headers=ACCEPT)
        for stream in streams:
            stream.__exit__(None, None, None)
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert admitted.status_code == 200


# ------------------------------------------------------------------ the child's stdout


@pytest.mark.parametrize("order", ["id-first", "id-last"])
def test_an_answer_over_the_line_limit_fails_its_call_at_once_and_logs_no_content(
    tmp_path: Path, bounds_server: Path, order: str
) -> None:
    flags = ("--max-line-bytes", "100000", "--request-timeout-seconds", "60")
    with (
        adapter((sys.executable, str(bounds_server), "huge"), tmp_path, *flags) as running,
        httpx.Client(timeout=60) as http,
    ):
        headers = {**ACCEPT, "mcp-session-id": initialize(running.url, http)}
        started = time.monotonic()
        huge = http.post(running.url, json=call(7, size=1_000_000, order=order), headers=headers)
        elapsed = time.monotonic() - started
        small = http.post(running.url, json=call(8, size=100, order=order), headers=headers)
    error = huge.json()["error"]
    assert huge.json()["id"] == 7 and "over the adapter's limit of 100000 bytes" in error["message"]
    assert elapsed < 5, f"the call waited {elapsed:.1f}s"
    assert small.json()["result"]["content"][0]["text"].startswith("SECRET-CONTENT")
    assert "SECRET-CONTENT" not in running.logs()
    assert "Dropped a stdout line of" in running.logs()


# ------------------------------------------------------------------ the listener


def ipv6_loopback_missing() -> str | None:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError as error:
        return f"this machine has no IPv6 loopback ({error}): enable IPv6 to run this test"
    return None


def test_listening_on_all_addresses_takes_ipv4_and_ipv6(
    tmp_path: Path, bounds_server: Path
) -> None:
    missing = ipv6_loopback_missing()
    assert missing is None, missing
    with adapter((sys.executable, str(bounds_server), "hold"), tmp_path, "--host", "::") as running:
        port = running.base.rsplit(":", 1)[1]
        over_ipv4 = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
        over_ipv6 = httpx.get(f"http://[::1]:{port}/readyz", timeout=5)
    assert over_ipv4.status_code == 200 and over_ipv6.status_code == 200


def closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closed ``sock`` (None if it stayed open that long)."""
    sock.settimeout(seconds)
    started = time.monotonic()
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return None
    return time.monotonic() - started


def test_a_client_that_sends_its_headers_or_body_too_slowly_is_disconnected(
    tmp_path: Path, bounds_server: Path
) -> None:
    flags = ("--header-timeout-seconds", "1", "--body-timeout-seconds", "2")
    with adapter((sys.executable, str(bounds_server), "hold"), tmp_path, *flags) as running:
        port = int(running.base.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as silent:
            silent_closed = closed_within(silent, 5)
        with socket.create_connection(("127.0.0.1", port)) as trickle:
            trickle.sendall(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\n")
            trickle_closed = closed_within(trickle, 5)
        with socket.create_connection(("127.0.0.1", port)) as slow_body:
            slow_body.sendall(
                b"POST /mcp HTTP/1.1\r\nHost: localhost\r\ncontent-type: application/json\r\n"
                b"accept: application/json\r\ncontent-length: 100\r\n\r\n{"
            )
            body_closed = closed_within(slow_body, 6)
        with socket.create_connection(("127.0.0.1", port)) as kept_alive:
            kept_alive.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            answered = kept_alive.recv(4096)
            kept_alive.sendall(b"GET /healthz HTTP/1.1\r\n")  # the next request, trickled
            second_closed = closed_within(kept_alive, 5)
        assert running.health().status_code == 200
    assert silent_closed is not None and silent_closed < 3
    assert trickle_closed is not None and trickle_closed < 3
    assert body_closed is not None and 1.5 < body_closed < 4
    assert answered.startswith(b"HTTP/1.1 200")
    assert second_closed is not None and second_closed < 3
