"""Shared child or a child per session, side by side in one run: correctness and cost.

For each mode (``shared``; ``perSession`` = ``--child-per-session``) this starts
``mcp-operator adapter`` in front of server-everything (stdio) and runs
``--sessions`` legacy sessions of the official SDK client, each making ``--calls``
concurrent ``trigger-sampling-request`` calls and answering sampling with a marker of
its own. It reports, per mode:

- how many calls completed with their own session's answer, how many failed (and how:
  server-everything passes no progress token on, so a shared child's sampling requests
  overlap and cannot be attributed), and whether any got another session's answer;
- memory: the RSS of the adapter and all its children with the sessions open (after
  the calls), and per session over the idle adapter;
- spawn: the mean and max of ``mcp_adapter_child_spawn_seconds`` (perSession), and the
  wall time of the whole run.

``.venv/bin/python bench/adapter_sessions.py [--sessions 4 --calls 3]``; needs
``make node-tools``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
from mcp import Client

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.peers import SERVER_EVERYTHING, free_port  # noqa: E402


def tree_rss_mib(pid: int) -> float:
    """RSS of ``pid`` and every descendant, in MiB."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
            status = Path("/proc", entry, "status").read_text()
        except OSError:
            continue
        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                rss[int(entry)] = int(line.split()[1])
    tree, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, of in parents.items():
            if of == parent and child not in tree:
                tree.add(child)
                frontier.append(child)
    return sum(rss.get(p, 0) for p in tree) / 1024


def sampler(marker: str) -> Any:
    async def sample(
        context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        await asyncio.sleep(0.05)
        reply = types.TextContent(text=f"answer of {marker}")
        return types.CreateMessageResult(role="assistant", content=reply, model="bench")

    return sample


async def run_mode(url: str, pid: int, sessions: int, calls: int) -> dict[str, Any]:
    markers = [f"session-{index}" for index in range(sessions)]
    outcomes: dict[str, int] = {"own": 0, "other": 0, "failed": 0}
    reasons: dict[str, int] = {}
    opened = asyncio.Event()
    done = asyncio.Event()
    ready = 0
    rss_open = 0.0

    async def session(marker: str) -> None:
        nonlocal ready
        client = Client(url, mode="legacy", sampling_callback=sampler(marker), cache=None)
        async with client:
            ready += 1
            if ready == sessions:
                opened.set()
            await opened.wait()

            async def one(index: int) -> None:
                try:
                    result = await client.call_tool(
                        "trigger-sampling-request", {"prompt": f"{marker} {index}"}
                    )
                except Exception as error:  # a JSON-RPC error answer
                    text, failed = str(error), True
                else:
                    text = " ".join(
                        part.text for part in result.content if isinstance(part, types.TextContent)
                    )
                    failed = bool(result.is_error)
                if failed:
                    outcomes["failed"] += 1
                    reason = "could not be attributed" if "attribut" in text else text[:60]
                    reasons[reason] = reasons.get(reason, 0) + 1
                elif f"answer of {marker}" in text:
                    outcomes["own"] += 1
                else:
                    outcomes["other"] += 1

            await asyncio.gather(*(one(index) for index in range(calls)))
            await done.wait()

    started = time.perf_counter()
    tasks = [asyncio.create_task(session(marker)) for marker in markers]
    while sum(outcomes.values()) < sessions * calls and not all(t.done() for t in tasks):  # noqa: ASYNC110 - polls two conditions, bounded by the calls' own timeouts
        await asyncio.sleep(0.05)
    elapsed = time.perf_counter() - started
    rss_open = tree_rss_mib(pid)
    done.set()
    await asyncio.gather(*tasks)
    async with httpx.AsyncClient(timeout=5) as http:
        metrics = (await http.get(url.rsplit("/", 1)[0] + "/metrics")).text
    spawn_sum = spawn_count = 0.0
    for line in metrics.splitlines():
        if line.startswith("mcp_adapter_child_spawn_seconds_sum"):
            spawn_sum = float(line.split()[-1])
        elif line.startswith("mcp_adapter_child_spawn_seconds_count"):
            spawn_count = float(line.split()[-1])
    return {
        **outcomes,
        "reasons": reasons,
        "seconds": elapsed,
        "rss_open": rss_open,
        "spawn_mean": spawn_sum / spawn_count if spawn_count else None,
    }


def start_adapter(flags: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "mcp_operator",
        "adapter",
        "--port",
        str(port),
        "--auth=none",
        *flags,
    ]
    command = ["node", str(SERVER_EVERYTHING), "stdio"]
    process = subprocess.Popen(
        [*argv, "--", *command], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/readyz", timeout=2).status_code == 200:
                return process, base + "/mcp"
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    process.kill()
    raise SystemExit("the adapter did not become ready")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    if not SERVER_EVERYTHING.exists():
        raise SystemExit("server-everything is missing: run `make node-tools`")
    rows = []
    for mode, flags in (("shared", []), ("perSession", ["--child-per-session"])):
        process, url = start_adapter(flags)
        try:
            time.sleep(0.5)
            idle = tree_rss_mib(process.pid)
            result = asyncio.run(run_mode(url, process.pid, args.sessions, args.calls))
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(30)
        result["idle"] = idle
        rows.append((mode, result))
    total = args.sessions * args.calls
    print(f"\n{args.sessions} sessions x {args.calls} concurrent sampling calls ({total} calls)\n")
    print(
        "| mode | own answer | another's | failed | RSS idle | RSS, sessions open | "
        "per session | spawn (mean) | wall |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for mode, r in rows:
        per = (r["rss_open"] - r["idle"]) / args.sessions
        spawn = f"{r['spawn_mean'] * 1000:.0f} ms" if r["spawn_mean"] else "—"
        failed = f"{r['failed']}" + (
            " (" + ", ".join(f"{n}: {why}" for why, n in r["reasons"].items()) + ")"
            if r["reasons"]
            else ""
        )
        print(
            f"| {mode} | {r['own']}/{total} | {r['other']} | {failed} | {r['idle']:.0f} MiB "
            f"| {r['rss_open']:.0f} MiB | {per:+.0f} MiB | {spawn} | {r['seconds']:.2f} s |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
