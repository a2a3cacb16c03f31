"""Benchmark: how long an AgentRun waits for its bridge, and what the bridge holds once up.

Each round starts the Python bridge (``mcp-operator bridge``) and the compiled one
(``mcp-dataplane bridge``, ``make dataplane``) in turn, with the same configuration file:
two upstreams as a run of the demo has them, server-everything over its own Streamable HTTP
transport and our adapter in front of its stdio. For each start it measures, from the moment
the process is spawned:

- **ready**: ``/readyz`` answers 200 (every server's first listing done: what the Pod's
  readiness probe waits for before the agent's first call), polled every 2 ms;
- **first list**: an agent's ``initialize`` and ``tools/list`` through the bridge answered
  with every tool of both servers (the agent's first useful moment);
- the bridge's **CPU** spent until ready (counted in clock ticks of 10 ms), and its
  **RSS** (``VmRSS``) and peak (``VmHWM``) after the first list.

The upstreams are started once and stay warm, so a row is the bridge's own start; the first
row is the **upstreams' own answer time**: the same handshake and ``tools/list`` made to both
servers at once, directly (the floor of any bridge that lists before it is ready: the issue's
goal is ready within 50 ms of it). The rounds alternate the rows so that a busy moment of the
machine falls on each.
``.venv/bin/python bench/bridge_startup.py [--rounds N]``; the JSON of a run goes to
``bench/results/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from adapter_bench import cpu_seconds  # noqa: E402
from bridge_bench import adapter_over_stdio, decode  # noqa: E402
from tests.support import dataplane, peers, wire  # noqa: E402
from tests.support.bridge_run import PYTHON_PROGRAM, bridge_config, server_entry  # noqa: E402

from mcp_operator.dev.processes import stop_process_group  # noqa: E402

UPSTREAMS = "upstreams' own answer time (direct, both at once)"
PROGRAMS: dict[str, Sequence[str]] = {
    "Python bridge (mcp-operator bridge)": PYTHON_PROGRAM,
    "compiled bridge (mcp-dataplane bridge)": dataplane.bridge_command(),
}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
POLL_SECONDS = 0.002
DEADLINE_SECONDS = 30.0


@dataclass
class Start:
    ready_s: float
    first_list_s: float
    tools: int
    cpu_to_ready_s: float
    rss_mib: float
    peak_mib: float


@dataclass
class Row:
    program: str
    starts: list[Start] = field(default_factory=list)

    def median(self, name: str) -> float:
        return float(statistics.median(getattr(start, name) for start in self.starts))

    def spread(self, name: str) -> str:
        values = [getattr(start, name) for start in self.starts]
        return f"{min(values):.3f} to {max(values):.3f}"


def own_mib(pid: int, field_name: str) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith(field_name + ":"))
    return int(line.split()[1]) / 1024


BRIDGE_CAPABILITIES: dict[str, Any] = {
    "sampling": {},
    "elicitation": {"form": {}, "url": {}},
    "roots": {},
}
"""What a bridge declares to its servers (server-everything offers some tools only to such
clients): the direct listing declares the same, so that it lists what the bridges list."""


def first_list(url: str, capabilities: dict[str, Any] | None = None) -> int:
    """A handshake and ``tools/list`` (an agent's through a bridge, or the direct floor's):
    the number of tools."""
    with httpx.Client(timeout=10) as http:
        opened = http.post(url, json=wire.initialize(capabilities=capabilities), headers=HEADERS)
        opened.raise_for_status()
        headers = {**HEADERS, "mcp-protocol-version": wire.LEGACY_VERSION}
        if session := opened.headers.get("mcp-session-id"):
            headers["mcp-session-id"] = session
        http.post(url, json=wire.initialized(), headers=headers)
        listed = http.post(url, json=wire.request("tools/list", {}, id=2), headers=headers)
        listed.raise_for_status()
        return len(decode(listed)["result"]["tools"])


def upstreams_once(servers: list[dict[str, Any]]) -> Start:
    """Both upstreams' handshake and ``tools/list``, made at once and directly."""
    started = time.perf_counter()
    with ThreadPoolExecutor(len(servers)) as pool:
        urls = [server["url"] for server in servers]
        tools = sum(pool.map(lambda url: first_list(url, BRIDGE_CAPABILITIES), urls))
    took = time.perf_counter() - started
    return Start(took, took, tools, 0.0, 0.0, 0.0)


def start_once(program: Sequence[str], servers: list[dict[str, Any]], tmp: Path) -> Start:
    port, health_port = peers.free_port(), peers.free_port()
    config = tmp / "config.yaml"
    config.write_text(yaml.safe_dump(bridge_config(servers, port)))
    argv = [*program, f"--config={config}", f"--health-port={health_port}", "--log-level=warning"]
    spawned = time.perf_counter()
    process = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        with httpx.Client(timeout=1) as http:
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"{argv[0]} exited with {process.returncode}")
                if time.perf_counter() - spawned > DEADLINE_SECONDS:
                    raise RuntimeError(f"{argv[0]} not ready in {DEADLINE_SECONDS} s")
                try:
                    if http.get(f"http://127.0.0.1:{health_port}/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(POLL_SECONDS)
        ready = time.perf_counter() - spawned
        cpu = cpu_seconds(process.pid)
        tools = first_list(f"http://127.0.0.1:{port}/mcp")
        listed = time.perf_counter() - spawned
        return Start(
            ready_s=ready,
            first_list_s=listed,
            tools=tools,
            cpu_to_ready_s=cpu,
            rss_mib=own_mib(process.pid, "VmRSS"),
            peak_mib=own_mib(process.pid, "VmHWM"),
        )
    finally:
        stop_process_group(process, name="bridge")


@contextmanager
def upstreams() -> Iterator[list[dict[str, Any]]]:
    with ExitStack() as stack:
        everything = stack.enter_context(peers.server_everything("streamableHttp"))
        adapter = stack.enter_context(adapter_over_stdio())
        yield [server_entry("everything", everything, "ev"), server_entry("adapted", adapter, "ad")]


def table(rows: list[Row]) -> str:
    lines = [
        "| bridge | ready after start, s (median; min to max) | first tools/list, s (median) "
        "| tools | CPU to ready, s | RSS MiB | peak MiB |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.program} (median of {len(row.starts)}) "
            f"| {row.median('ready_s'):.3f} ({row.spread('ready_s')}) "
            f"| {row.median('first_list_s'):.3f} | {row.starts[0].tools} "
            f"| {row.median('cpu_to_ready_s'):.2f} | {row.median('rss_mib'):.1f} "
            f"| {row.median('peak_mib'):.1f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="starts of each bridge (default 5)")
    args = parser.parse_args()
    if problem := dataplane.missing():
        print(problem, file=sys.stderr)
        return 2
    floor, rows = Row(UPSTREAMS), [Row(name) for name in PROGRAMS]
    with upstreams() as servers, tempfile.TemporaryDirectory(prefix="bridge-start-") as tmp:
        for _ in range(args.rounds):
            floor.starts.append(upstreams_once(servers))
            for row in rows:
                row.starts.append(start_once(PROGRAMS[row.program], servers, Path(tmp)))
    counts = {row.starts[0].tools for row in [floor, *rows]}
    if len(counts) != 1 or 0 in counts:
        print(f"the bridges listed different tool counts: {counts}", file=sys.stderr)
        return 1
    print(table([floor, *rows]))
    results = REPO / "bench" / "results"
    results.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    out = results / f"bridge_startup-{stamp}.json"
    out.write_text(json.dumps([asdict(row) for row in [floor, *rows]], indent=2))
    print(f"\n{out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
