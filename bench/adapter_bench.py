"""Benchmark: our stdio→HTTP adapters against mcp-proxy and supergateway, in one run.

Each adapter is started in front of its own stdio server (npm ``server-everything``) on a
free loopback port, one after the other, and measured three ways (see DESIGN §6 for why
both loads are needed):

1. ``wrk``, 10 connections, 10 s, POSTing ``tools/call`` echo on one
   initialized session after one checked call (bench/wrk_call.lua checks
   every answer: its id and its echoed message must agree) → calls/s, p50, p99,
   and the adapter process's own CPU per call (utime + stime from ``/proc``);
2. many sessions: 10 SDK clients x 10 concurrent calls, every answer checked
   against its caller → wall time;
3. RSS of the adapter's whole process tree (adapter + children) after the loads, and the
   adapter process's own RSS (``VmRSS``) once listening and after the loads, and its peak
   (``VmHWM``), its children not counted.

With ``--rounds N`` the adapters take their turns N times (A B C, A B C, ...: a slow minute
of a shared machine hits every row alike) and each row is the median of its rounds, its
range beside it.

Rows: the Python adapter (``python -m mcp_operator adapter``), the compiled one
(``mcp-dataplane adapter``, ``make dataplane``), mcp-proxy and supergateway.

Ours runs twice, with ``--auth none`` and with ``--auth kubernetes`` (every request carries a
ServiceAccount-shaped token signed by a key made for the run; verified once, then cached),
so the table shows what authentication costs per call (target: at least 0.9x the calls/s).

Needs ``bash hack/install-bench-tools.sh`` first. Run it on a quiet machine:
``.venv/bin/python bench/adapter_bench.py``. Results are also written as JSON
to ``bench/results/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support import dataplane, wire  # noqa: E402
from tests.support.issuer import TestIssuer, access_document, write_access  # noqa: E402

from mcp_operator.dev.processes import stop_process_group  # noqa: E402

CACHE = Path(os.environ.get("MCP_OPERATOR_CACHE", Path.home() / ".cache" / "mcp-operator"))
NODE_TOOLS = REPO / "hack" / "node-tools" / "node_modules"
EVERYTHING = NODE_TOOLS / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
SUPERGATEWAY = NODE_TOOLS / "supergateway" / "dist" / "index.js"
MCP_PROXY = CACHE / "bench-venv" / "bin" / "mcp-proxy"
LUA = Path(__file__).resolve().parent / "wrk_call.lua"
CHILD = f"node {EVERYTHING} stdio"
VERSION = wire.LEGACY_VERSION
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
AUTH_NAME = "mcp-operator adapter --auth kubernetes"
"""Ours with a ServiceAccount token on every request (verified once, then cached)."""
PYTHON_NAME = "mcp-operator adapter"
DATAPLANE_NAME = "mcp-dataplane adapter"
"""The compiled adapter (operator/dataplane), ``--auth none`` like the Python row."""
DIRECT_NAME = "server-everything stdio, driven directly"
"""No adapter: this process writes the calls to the child's stdin (the child's own limit)."""
IN_FLIGHT = 10
"""Calls kept in flight on the child's stdin when it is driven directly: wrk's connections."""


@dataclass
class Result:
    name: str
    calls_per_second: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    wrk_checked: int = 0
    wrk_bad: int = 0
    wrk_errors: int = 0
    sessions_seconds: float = 0.0
    sessions_misrouted: int = 0
    sessions_failed: int = 0
    rss_mib: float = 0.0
    cpu_us_per_call: float = 0.0
    """CPU time of the adapter's own process per wrk call: steadier than calls/s on a busy
    machine, which is what a before/after comparison on a shared one needs. For the row
    driven directly, the child's own CPU per call."""
    adapter_rss_mib: float = 0.0
    """The adapter process alone after the loads (``VmRSS``), its children not counted."""
    adapter_hwm_mib: float = 0.0
    """The adapter process's peak RSS (``VmHWM``), its children not counted."""
    idle_rss_mib: float = 0.0
    """The adapter process alone once listening, before any request."""
    rounds_calls: list[float] = field(default_factory=list)
    """calls/s of each round (the row's ``calls_per_second`` is their median)."""
    rounds_cpu: list[float] = field(default_factory=list)
    """CPU µs per call of each round (the row's ``cpu_us_per_call`` is their median)."""
    notes: list[str] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def commands(port: int, access: Path | None = None) -> dict[str, list[str]]:
    """The adapters to measure; with ``access`` (an access configuration) ours also with
    ``--auth kubernetes``, side by side with ``--auth none``."""
    ours = [sys.executable, "-m", "mcp_operator", "adapter", "--port", str(port),
            "--log-level", "warning"]  # fmt: skip
    child = ["--", "node", str(EVERYTHING), "stdio"]
    authenticated = {}
    if access is not None:
        authenticated[AUTH_NAME] = [*ours, "--auth", "kubernetes", "--access-config", str(access),
                                    *child]  # fmt: skip
    return {
        PYTHON_NAME: [*ours, "--auth", "none", *child],
        **authenticated,
        DATAPLANE_NAME: [*dataplane.adapter_command(), "--port", str(port),
                         "--log-level", "warning", "--auth", "none", *child],
        "mcp-operator adapter --child-per-session": [
            *ours, "--auth", "none", "--child-per-session", *child,
        ],
        "mcp-proxy 0.13.0": [
            str(MCP_PROXY), "--port", str(port), "--host", "127.0.0.1",
            "--log-level", "WARNING", "node", str(EVERYTHING), "stdio",
        ],
        "supergateway 4.0.0 --stateful": [
            "node", str(SUPERGATEWAY), "--stdio", CHILD, "--outputTransport", "streamableHttp",
            "--stateful", "--port", str(port), "--logLevel", "none",
        ],
    }  # fmt: skip


@contextlib.contextmanager
def started(command: list[str], port: int) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        command,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if process.poll() is not None:
                raise RuntimeError(f"{command[0]} exited with {process.returncode}")
            time.sleep(0.1)
        else:
            raise RuntimeError(f"{command[0]} did not listen on {port}")
        yield process
    finally:
        stop_process_group(process, grace=10, name=command[0])


def decode(response: httpx.Response) -> dict[str, object]:
    """A JSON-RPC response from a JSON or an SSE body."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:"):
                message = json.loads(line[5:])
                if "id" in message and ("result" in message or "error" in message):
                    return dict(message)
        raise ValueError(f"no response in SSE body: {response.text[:200]}")
    return dict(response.json())


def open_session(url: str, token: str | None = None) -> str:
    """Initialize one session and prove, with one checked call, that echo answers right."""
    init = wire.initialize(id=1)
    auth = {"authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(timeout=30, headers=auth) as http:
        for _ in range(100):  # the child may still be starting
            response = http.post(url, json=init, headers=HEADERS)
            if response.status_code == 200:
                break
            time.sleep(0.2)
        response.raise_for_status()
        decode(response)
        session = response.headers["mcp-session-id"]
        headers = {**HEADERS, "mcp-session-id": session, "mcp-protocol-version": VERSION}
        note = wire.initialized()
        http.post(url, json=note, headers=headers)
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": "checked"}},
        }
        answer = decode(http.post(url, json=call, headers=headers))
        text = answer["result"]["content"][0]["text"]  # type: ignore[index]
        if text != "Echo: checked":
            raise RuntimeError(f"the checked call answered {text!r}")
    return session


def run_wrk(url: str, session: str, seconds: int, result: Result, token: str | None = None) -> None:
    env = {**os.environ, "MCP_SESSION_ID": session, "MCP_PROTOCOL_VERSION": VERSION}
    if token:
        env["MCP_AUTHORIZATION"] = f"Bearer {token}"
    argv = ["wrk", "-t2", "-c10", f"-d{seconds}s", "--latency", "-s", str(LUA), url]
    output = subprocess.run(
        argv, capture_output=True, text=True, env=env, timeout=seconds + 60
    ).stdout
    if match := re.search(r"Requests/sec:\s+([\d.]+)", output):
        result.calls_per_second = float(match.group(1))
    if match := re.search(r"checked=(\d+) bad=(\d+)", output):
        result.wrk_checked, result.wrk_bad = int(match.group(1)), int(match.group(2))
    if match := re.search(r"p50_us=(\d+) p99_us=(\d+)", output):
        result.p50_ms, result.p99_ms = int(match.group(1)) / 1000, int(match.group(2)) / 1000
    for pattern in (r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)",
                    r"Non-2xx or 3xx responses: (\d+)"):  # fmt: skip
        if match := re.search(pattern, output):
            result.wrk_errors += sum(int(group) for group in match.groups())


async def many_sessions(
    url: str, clients: int, calls: int, result: Result, token: str | None = None
) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    auth = {"authorization": f"Bearer {token}"} if token else {}

    async def one(number: int) -> list[bool]:
        http = httpx2.AsyncClient(headers=auth, timeout=60)
        transport = streamable_http_client(url, http_client=http)
        async with http, Client(transport, mode="legacy") as client:

            async def call(index: int) -> bool:
                message = f"client-{number}-call-{index}"
                answer = await client.call_tool("echo", {"message": message})
                return answer.content[0].text == f"Echo: {message}"  # type: ignore[union-attr]

            return await asyncio.gather(*(call(index) for index in range(calls)))

    started_at = time.perf_counter()
    outcomes = await asyncio.gather(*(one(n) for n in range(clients)), return_exceptions=True)
    result.sessions_seconds = time.perf_counter() - started_at
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            result.sessions_failed += calls
            result.notes.append(f"client failed: {outcome!r}"[:200])
        else:
            result.sessions_misrouted += outcome.count(False)


def tree_rss_mib(pid: int) -> float:
    """RSS of ``pid`` and all its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            status = (entry / "status").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
        if match := re.search(r"VmRSS:\s+(\d+) kB", status):
            rss[int(entry.name)] = int(match.group(1))
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        total += rss.get(current, 0)
        todo.extend(children.get(current, []))
    return total / 1024


def own_mib(pid: int, field_name: str) -> float:
    """One ``Vm*`` line of ``/proc/<pid>/status`` (``VmRSS``, ``VmHWM``) in MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(rf"{field_name}:\s+(\d+) kB", status)
    return int(match.group(1)) / 1024 if match else 0.0


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of one process so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(
    name: str, command: list[str], port: int, args: argparse.Namespace, token: str | None = None
) -> Result:
    result = Result(name)
    url = f"http://127.0.0.1:{port}/mcp"
    with started(command, port) as process:
        result.idle_rss_mib = own_mib(process.pid, "VmRSS")
        session = open_session(url, token)
        before = cpu_seconds(process.pid)
        run_wrk(url, session, args.seconds, result, token)
        used = cpu_seconds(process.pid) - before
        result.cpu_us_per_call = used * 1e6 / result.wrk_checked if result.wrk_checked else 0.0
        asyncio.run(many_sessions(url, args.clients, args.calls, result, token))
        result.rss_mib = tree_rss_mib(process.pid)
        result.adapter_rss_mib = own_mib(process.pid, "VmRSS")
        result.adapter_hwm_mib = own_mib(process.pid, "VmHWM")
    result.rounds_calls = [result.calls_per_second]
    result.rounds_cpu = [result.cpu_us_per_call]
    return result


def combined(rounds: list[Result]) -> Result:
    """One row from the rounds of one adapter: medians of the loads, the last round's
    memory (the adapters hold no state between rounds: each round starts them again)."""
    done = [r for r in rounds if r.wrk_checked]
    if not done:
        return rounds[-1]
    row = Result(done[-1].name)
    median = statistics.median
    row.calls_per_second = median(r.calls_per_second for r in done)
    row.cpu_us_per_call = median(r.cpu_us_per_call for r in done)
    row.p50_ms = median(r.p50_ms for r in done)
    row.p99_ms = median(r.p99_ms for r in done)
    row.sessions_seconds = median(r.sessions_seconds for r in done)
    for r in rounds:
        row.wrk_checked += r.wrk_checked
        row.wrk_bad += r.wrk_bad
        row.wrk_errors += r.wrk_errors
        row.sessions_misrouted += r.sessions_misrouted
        row.sessions_failed += r.sessions_failed
        row.rounds_calls += r.rounds_calls
        row.rounds_cpu += r.rounds_cpu
        row.notes += r.notes
    last = done[-1]
    row.rss_mib, row.adapter_rss_mib = last.rss_mib, last.adapter_rss_mib
    row.adapter_hwm_mib = max(r.adapter_hwm_mib for r in done)
    row.idle_rss_mib = last.idle_rss_mib
    return row


def spread(values: list[float]) -> str:
    """The range of a row's rounds, when there was more than one."""
    return f" ({min(values):,.0f} to {max(values):,.0f})" if len(values) > 1 else ""


def table(results: list[Result]) -> str:
    head = (
        "| adapter (server-everything, stdio) | calls/s | p50 ms | p99 ms | wrk bad/errors "
        "| 10x10 SDK s | misrouted/failed | tree RSS MiB | own RSS idle/after/peak MiB "
        "| CPU µs/call |"
    )
    rows = [head, "|" + "---|" * 10]
    for r in results:
        rows.append(
            f"| {r.name} | {r.calls_per_second:,.0f}{spread(r.rounds_calls)} "
            f"| {r.p50_ms:.2f} | {r.p99_ms:.2f} "
            f"| {r.wrk_bad}/{r.wrk_errors} of {r.wrk_checked:,} | {r.sessions_seconds:.2f} "
            f"| {r.sessions_misrouted}/{r.sessions_failed} | {r.rss_mib:.0f} "
            f"| {r.idle_rss_mib:.1f}/{r.adapter_rss_mib:.1f}/{r.adapter_hwm_mib:.1f} "
            f"| {r.cpu_us_per_call:.0f}{spread(r.rounds_cpu)} |"
        )
    return "\n".join(rows)


def verdict(results: list[Result]) -> list[str]:
    names = {r.name: r for r in results}
    plain, authenticated = names.get(PYTHON_NAME), names.get(AUTH_NAME)
    lines = []
    if plain and authenticated and plain.calls_per_second:
        ratio = authenticated.calls_per_second / plain.calls_per_second
        lines.append(
            f"calls/s with --auth kubernetes vs --auth none: {ratio:.2f}x (target >= 0.9x)"
        )
    by = {
        r.name.split()[0]: r
        for r in results
        if r.name != AUTH_NAME and "--child-per-session" not in r.name
    }
    ours, proxy, gateway = by.get("mcp-operator"), by.get("mcp-proxy"), by.get("supergateway")
    if ours and proxy and proxy.calls_per_second:
        ratio = ours.calls_per_second / proxy.calls_per_second
        lines.append(f"calls/s vs mcp-proxy: {ratio:.2f}x (target >= 1.5x)")
        lines.append(
            f"p99 vs mcp-proxy: {ours.p99_ms:.2f} vs {proxy.p99_ms:.2f} ms (target: no worse)"
        )
        lines.append(
            f"10x10 SDK vs mcp-proxy: {ours.sessions_seconds:.2f} vs {proxy.sessions_seconds:.2f} s"
            " (target: <=)"
        )
    if ours and gateway and gateway.calls_per_second:
        ratio = ours.calls_per_second / gateway.calls_per_second
        lines.append(f"calls/s vs supergateway: {ratio:.2f}x (target > 1x)")
        lines.append(f"p99 vs supergateway: {ours.p99_ms:.2f} vs {gateway.p99_ms:.2f} ms")
    compiled = names.get(DATAPLANE_NAME)
    if plain and compiled and plain.calls_per_second and compiled.cpu_us_per_call:
        speed = compiled.calls_per_second / plain.calls_per_second
        cpu = plain.cpu_us_per_call / compiled.cpu_us_per_call
        lines.append(
            f"compiled vs Python adapter: calls/s {speed:.2f}x, CPU per call {cpu:.1f}x less, "
            f"own RSS after the loads {compiled.adapter_rss_mib:.1f} "
            f"vs {plain.adapter_rss_mib:.1f} MiB"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10, help="wrk duration (default 10)")
    parser.add_argument("--clients", type=int, default=10, help="SDK clients (default 10)")
    parser.add_argument("--calls", type=int, default=10, help="concurrent calls per client")
    parser.add_argument("--only", action="append", help="measure only adapters whose name has this")
    parser.add_argument("--rounds", type=int, default=1, help="turns of every adapter (median)")
    args = parser.parse_args()
    wanted = [
        path
        for name, path in (
            ("mcp-operator", EVERYTHING),
            ("supergateway", SUPERGATEWAY),
            ("mcp-proxy", MCP_PROXY),
        )
        if not args.only or any(o in name for o in args.only) or path == EVERYTHING
    ]
    missing = [str(p) for p in wanted if not p.exists()]
    if shutil.which("wrk") is None:
        missing.append("wrk")
    if missing:
        print(
            "Missing (run bash hack/install-bench-tools.sh):", ", ".join(missing), file=sys.stderr
        )
        return 2
    if subprocess.run(["pgrep", "-f", "go build"], capture_output=True).returncode == 0:
        print("warning: a Go build is running; the numbers will not be honest", file=sys.stderr)
    scratch = Path(tempfile.mkdtemp(prefix="adapter-bench-"))
    issuer = TestIssuer()
    access = write_access(scratch / "access.json", access_document(issuer))
    token = issuer.service_account_token(lifetime=3600)
    names = [
        name for name in commands(0, access) if not args.only or any(o in name for o in args.only)
    ]
    if DATAPLANE_NAME in names and (why := dataplane.missing()):
        print(f"skipping {DATAPLANE_NAME}: {why}", file=sys.stderr)
        names.remove(DATAPLANE_NAME)
    rounds: dict[str, list[Result]] = {name: [] for name in names}
    for turn in range(args.rounds):
        for name in names:
            port = free_port()
            command = commands(port, access)[name]
            print(f"round {turn + 1}: measuring {name} ...", file=sys.stderr, flush=True)
            token_for = token if name == AUTH_NAME else None
            try:
                rounds[name].append(measure(name, command, port, args, token_for))
            except Exception as error:  # one broken peer must not hide the others
                rounds[name].append(Result(name, notes=[f"failed: {error!r}"[:300]]))
    results = [combined(rounds[name]) for name in names]
    shutil.rmtree(scratch, ignore_errors=True)
    print(table(results))
    for line in verdict(results):
        print("-", line)
    for r in results:
        for note in r.notes[:3]:
            print(f"- {r.name}: {note}")
    out = REPO / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    (out / f"adapter-{stamp}.json").write_text(json.dumps([asdict(r) for r in results], indent=2))
    bad = any(
        r.wrk_bad or r.sessions_misrouted for r in results if r.name.startswith("mcp-operator")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
