"""The probe's client side by side: the SDK's ``Client(mode="auto")`` and the operator's lean one.

One run: real MCP servers on loopback (two server-everything over Streamable HTTP, legacy era;
mcp-server-time over the SDK's Streamable HTTP, 2026-07-28), then for each client ``--probes``
probes spread over them, ``--concurrency`` at once (as the operator's probe slots run them):
the probe's handshake and every ``tools/list`` page, then the session's end. Printed: probes
per second, latency p50/p95, and the CPU each process spent per probe (the client is this
process). Every probe must list the servers' tools, else the run fails.

    .venv/bin/python bench/probe_bench.py [--probes 1000] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import mcp
from mcp.client.streamable_http import streamable_http_client

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.fleet_bench import _processes  # noqa: E402
from tests.support import peers  # noqa: E402

from mcp_operator.mcp.discovery import discover  # noqa: E402
from mcp_operator.mcp.target import ProbeTarget  # noqa: E402
from mcp_operator.net.egress import EgressPolicy  # noqa: E402
from mcp_operator.serve.process import run_on_fastest_loop  # noqa: E402

Probe = Callable[[ProbeTarget], Awaitable[int]]


async def lean(target: ProbeTarget) -> int:
    """The operator's probe (mcp/discovery.py over mcp/probe_client.py): tools listed."""
    return len((await discover(target)).tools)


async def sdk(target: ProbeTarget) -> int:
    """The same walk on the SDK's own client, as it comes (no egress policy, no byte bounds,
    which the operator's probe pays for): tools listed."""
    transport = streamable_http_client(target.url)
    async with mcp.Client(transport, mode="auto", cache=None) as client:
        tools = 0
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools += len(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools


def cpu_by_program() -> dict[str, float]:
    used: dict[str, float] = {}
    for _parent, name, seconds in _processes().values():
        used[name] = used.get(name, 0.0) + seconds
    return used


async def measure(probe: Probe, urls: list[str], count: int, concurrency: int) -> list[str]:
    egress = EgressPolicy(allow_loopback=True)
    slots = asyncio.Semaphore(concurrency)
    latencies: list[float] = []

    async def one(index: int) -> None:
        async with slots:
            began = time.monotonic()
            tools = await probe(ProbeTarget(urls[index % len(urls)], egress=egress))
            latencies.append(time.monotonic() - began)
            if tools == 0:
                raise RuntimeError("a probe listed no tools")

    await asyncio.gather(*(one(i) for i in range(min(30, count))))  # warm both sides up
    latencies.clear()
    before, own, began = cpu_by_program(), time.process_time(), time.monotonic()
    await asyncio.gather(*(one(i) for i in range(count)))
    wall, own = time.monotonic() - began, time.process_time() - own
    after = cpu_by_program()
    servers = {
        name: (after[name] - before.get(name, 0.0)) / count * 1000
        for name in ("server-everything", "mcp_server_time")
    }
    p50 = statistics.median(latencies) * 1000
    p95 = statistics.quantiles(latencies, n=20)[18] * 1000
    return [
        f"{count / wall:.0f}/s",
        f"{p50:.0f} / {p95:.0f} ms",
        f"{own / count * 1000:.2f} ms",
        f"{servers['server-everything']:.2f} ms",
        f"{servers['mcp_server_time']:.2f} ms",
    ]


async def run(urls: list[str], args: argparse.Namespace) -> int:
    header = [
        "client",
        "probes/s",
        "p50 / p95",
        "client CPU/probe",
        "server-everything CPU/probe",
        "mcp-server-time CPU/probe",
    ]
    rows = [
        ["SDK Client(mode='auto')", *await measure(sdk, urls, args.probes, args.concurrency)],
        ["mcp-operator probe", *await measure(lean, urls, args.probes, args.concurrency)],
    ]
    print(f"\n{args.probes} probes, {args.concurrency} at once, 2/3 to server-everything\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(" --- " for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        urls = [stack.enter_context(peers.server_everything()) for _ in range(2)]
        urls.append(stack.enter_context(peers.mcp_server_time()))
        run_on_fastest_loop(run(urls, args))  # the operator's own loop


if __name__ == "__main__":
    main()
