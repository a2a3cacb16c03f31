"""The adapter's peak memory under hostile clients (issue 9): sessions and calls in flight.

Starts ``mcp-operator adapter`` in front of a small stdio server written here
(``slow_echo``: every ``tools/call`` is answered after ``--hold`` seconds, so the
calls stay in flight while the attack runs) and measures the adapter process's
peak RSS (``VmHWM``; the child is not counted) under two attacks:

1. **capabilities**: ``--sessions`` clients each ``initialize`` with capabilities
   as large as the body limit lets through, built of many small objects (the
   shape that grows most when parsed: about 20x its JSON size);
2. **calls**: ``--calls`` concurrent ``tools/call`` with arguments of the same
   size and shape on one session.

Bodies are ``--body-bytes`` long (pass just under the adapter's
``--max-body-bytes`` to measure the worst a client can send); a run also
reports the HTTP statuses (413, 503 are refusals) and the RSS after.
``.venv/bin/python bench/adapter_memory.py --attack calls --body-bytes 1040000``
(adapter flags go after ``--``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support import wire  # noqa: E402

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
SLOW_ECHO = r"""
import json, re, sys, threading
hold = float(sys.argv[1])
lock = threading.Lock()
def answer(msg, result):
    line = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result})
    with lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
head = re.compile(r'\{"jsonrpc":"2.0","id":(\d+),"method":"tools/call"')
for raw in sys.stdin:
    call = head.match(raw)  # the adapter writes these keys first; no need to parse 1 MB
    if call:
        msg = {"id": int(call.group(1))}
        threading.Timer(hold, answer, (msg, {"content": [{"type": "text", "text": "ok"}]})).start()
        continue
    msg = json.loads(raw)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        answer(msg, {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                     "serverInfo": {"name": "slow-echo", "version": "0"}})
    elif msg["method"] == "tools/call":
        threading.Timer(hold, answer, (msg, {"content": [{"type": "text", "text": "ok"}]})).start()
    else:
        answer(msg, {})
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def memory(pid: int) -> tuple[float, float]:
    """(peak, current) RSS of one process in MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return int(fields["VmHWM"].split()[0]) / 1024, int(fields["VmRSS"].split()[0]) / 1024


def small_objects(size: int) -> dict[str, object]:
    """A JSON object of about ``size`` bytes made of many tiny objects (``{"k12":{}}``...)."""
    items: dict[str, object] = {}
    used = 2
    index = 0
    while used < size - 32:
        key = f"k{index}"
        items[key] = {}
        used += len(key) + 6
        index += 1
    return items


async def attack_capabilities(url: str, sessions: int, body_bytes: int) -> collections.Counter[int]:
    capabilities = {"experimental": small_objects(body_bytes - 200)}
    body = wire.initialize(capabilities=capabilities)
    content = json.dumps(body, separators=(",", ":")).encode()
    statuses: collections.Counter[int] = collections.Counter()
    async with httpx.AsyncClient(timeout=60) as http:
        for _ in range(sessions):
            response = await http.post(url, content=content, headers=HEADERS)
            statuses[response.status_code] += 1
    return statuses


async def attack_calls(url: str, calls: int, body_bytes: int) -> collections.Counter[int]:
    init = wire.initialize()
    limits = httpx.Limits(max_connections=calls + 10)
    statuses: collections.Counter[int] = collections.Counter()
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        opened = await http.post(url, json=init, headers=HEADERS)
        session = opened.headers["mcp-session-id"]
        params = {"name": "slow", "arguments": small_objects(body_bytes - 200)}
        encoded_params = json.dumps(params, separators=(",", ":")).encode()

        async def one(index: int) -> None:
            head = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":' % index
            try:
                response = await http.post(
                    url,
                    content=head + encoded_params + b"}",
                    headers={**HEADERS, "mcp-session-id": session},
                )
                statuses[response.status_code] += 1
            except httpx.HTTPError:
                statuses[0] += 1

        await asyncio.gather(*(one(index) for index in range(calls)))
    return statuses


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--hold", type=float, default=5.0, help="seconds each call stays open")
    parser.add_argument("--body-bytes", type=int, required=True)
    parser.add_argument("--attack", choices=("capabilities", "calls"), required=True)
    parser.add_argument("adapter_flags", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    flags = [f for f in options.adapter_flags if f != "--"]
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "slow_echo.py"
        script.write_text(SLOW_ECHO)
        argv = [sys.executable, "-m", "mcp_operator", "adapter", "--port", str(port), "--auth=none"]
        argv += flags
        argv += ["--", sys.executable, str(script), str(options.hold)]
        log = Path(tmp) / "adapter.log"
        with log.open("wb") as out:
            adapter = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(base + "/readyz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    print(log.read_text(), file=sys.stderr)
                    return 1
                time.sleep(0.1)
            idle, _ = memory(adapter.pid)
            started = time.monotonic()
            if options.attack == "capabilities":
                statuses = asyncio.run(
                    attack_capabilities(base + "/mcp", options.sessions, options.body_bytes)
                )
            else:
                statuses = asyncio.run(
                    attack_calls(base + "/mcp", options.calls, options.body_bytes)
                )
            elapsed = time.monotonic() - started
            peak, now = memory(adapter.pid)
            health = httpx.get(base + "/readyz", timeout=5)
            report = {
                "attack": options.attack,
                "body_bytes": options.body_bytes,
                "requests": options.sessions if options.attack == "capabilities" else options.calls,
                "statuses": dict(sorted(statuses.items())),
                "idle_rss_mib": round(idle, 1),
                "peak_rss_mib": round(peak, 1),
                "rss_after_mib": round(now, 1),
                "seconds": round(elapsed, 1),
                "readyz": health.status_code,
                "adapter_alive": adapter.poll() is None,
            }
            print(json.dumps(report))
        finally:
            if adapter.poll() is None:
                adapter.send_signal(signal.SIGTERM)
                try:
                    adapter.wait(15)
                except subprocess.TimeoutExpired:
                    os.kill(adapter.pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
