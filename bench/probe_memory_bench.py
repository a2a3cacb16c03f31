"""The operator's peak memory while it probes many hostile MCP servers at once.

One run per attack: a real local control plane, the operator as a subprocess
(as a user runs it, watching one namespace), a farm of hostile servers on
loopback (one process, one port each) plus a few well-behaved ones, and one
external MCPServer per server, all created at once. The run ends when every
well-behaved server is Ready and every hostile one has been probed at least
twice (or after ``--seconds``); the operator's peak RSS (VmHWM) is read from
``/proc`` throughout. Attacks (every page as large as the probe accepts or
more):

- ``fat-12mb``: one ``tools/list`` page of 4,900 tools with 30-property schemas
  (12 MB), the attack as first found;
- ``fat-2mb-pages``: 4,700 tools with 90-property schemas in pages of 280
  (17 pages of 1.9 MB): the largest that the bounded probe still accepts.

``--operator-source DIR`` runs the operator from another checkout's ``operator/``
directory (the code before a change), under the same address-space limit
(``--memory-limit-mib``) so that a runaway operator fails instead of taking the
machine down:

    .venv/bin/python bench/probe_memory_bench.py [--servers 64] [--attacks fat-12mb]
    .venv/bin/python bench/probe_memory_bench.py --operator-source /tmp/base/operator
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mcp_operator.dev.cluster import ControlPlane  # noqa: E402
from mcp_operator.dev.processes import kubectl_path  # noqa: E402

ATTACKS: dict[str, dict[str, int]] = {
    "fat-12mb": {"tools": 4900, "page": 4900, "properties": 30},
    "fat-2mb-pages": {"tools": 4700, "page": 280, "properties": 90},
}


# -- the farm: many servers in one process, pages encoded once -------------------------------


def _tool(i: int, properties: int) -> dict[str, Any]:
    return {
        "name": f"tool_{i:05d}",
        "description": "A tool of the hostile farm",
        "inputSchema": {
            "type": "object",
            "properties": {
                f"p{j:03d}": {"type": "string", "description": f"Property {j}", "maxLength": 64}
                for j in range(properties)
            },
        },
    }


def _pages(tools: int, page: int, properties: int) -> dict[str | None, bytes]:
    """The ``result`` JSON of every page, by the cursor that asks for it."""
    pages: dict[str | None, bytes] = {}
    for start in range(0, tools, page):
        end = min(start + page, tools)
        result: dict[str, Any] = {"tools": [_tool(i, properties) for i in range(start, end)]}
        if end < tools:
            result["nextCursor"] = str(end)
        pages[None if start == 0 else str(start)] = json.dumps(result).encode()
    return pages


async def _farm(hostile_count: int, good_count: int, attack: dict[str, int]) -> None:
    hostile = _pages(attack["tools"], attack["page"], attack["properties"])
    good = _pages(3, 3, 1)

    def handler(pages: dict[str | None, bytes]) -> Any:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                message = json.loads(await reader.readexactly(length)) if length else {}
                if "id" not in message:
                    writer.write(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
                    return
                prefix = b'{"jsonrpc":"2.0","id":' + json.dumps(message["id"]).encode()
                method = message.get("method")
                if method == "initialize":
                    body = prefix + (
                        b',"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},'
                        b'"serverInfo":{"name":"farm","version":"1"}}}'
                    )
                elif method == "tools/list":
                    cursor = (message.get("params") or {}).get("cursor")
                    body = prefix + b',"result":' + pages.get(cursor, b"{}") + b"}"
                else:
                    body = prefix + b',"error":{"code":-32601,"message":"Method not found"}}'
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
            except (ConnectionError, asyncio.IncompleteReadError, ValueError):
                pass
            finally:
                writer.close()

        return serve

    # Port 0: the kernel picks free ports, which the parent reads from the first line.
    servers = [
        await asyncio.start_server(handler(hostile), "127.0.0.1", 0) for _ in range(hostile_count)
    ]
    servers += [
        await asyncio.start_server(handler(good), "127.0.0.1", 0) for _ in range(good_count)
    ]
    ports = [server.sockets[0].getsockname()[1] for server in servers]
    print(json.dumps([ports[:hostile_count], ports[hostile_count:]]), flush=True)
    await asyncio.Event().wait()


# -- one run ---------------------------------------------------------------------------------


def _peak_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except FileNotFoundError:
        pass
    return float("nan")


def _kubectl(env: dict[str, str], *args: str, input: str | None = None) -> str:
    done = subprocess.run(
        [kubectl_path(), *args], env=env, input=input, capture_output=True, text=True, check=True
    )
    return done.stdout


def _servers(namespace: str, ports: list[int], good: list[int]) -> str:
    items = []
    for kind, group in (("hostile", ports), ("good", good)):
        for i, port in enumerate(group):
            items.append(
                {
                    "apiVersion": "mcp-operator.dev/v1alpha1",
                    "kind": "MCPServer",
                    "metadata": {"name": f"{kind}-{i}", "namespace": namespace},
                    "spec": {
                        "mode": "external",
                        "url": f"http://127.0.0.1:{port}/mcp",
                        "probe": {"intervalSeconds": 10, "timeoutSeconds": 60},
                    },
                }
            )
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


def _limit(mib: int) -> Any:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mib * 1024 * 1024, mib * 1024 * 1024))
        os.setsid()

    return apply


def run_once(plane: ControlPlane, args: argparse.Namespace, attack: str) -> dict[str, Any]:
    env = plane.env()
    namespace = f"mem-{attack}-{int(time.time())}"
    _kubectl(env, "create", "namespace", namespace)
    farm = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--farm",
            json.dumps([args.servers, args.good, ATTACKS[attack]]),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    operator: subprocess.Popen[bytes] | None = None
    try:
        assert farm.stdout is not None
        ports, good = json.loads(farm.stdout.readline())
        operator_env = dict(env)
        if args.operator_source:
            operator_env["PYTHONPATH"] = args.operator_source
        command = [sys.executable, "-m", "mcp_operator", "run", "--liveness=none", "-n", namespace]
        helped = subprocess.run(
            [*command, "--help"], env=operator_env, capture_output=True, text=True
        ).stdout
        if "--loopback-destinations" in helped:  # the farm is on loopback
            command.append("--loopback-destinations=allowed")
        log = open(args.log, "ab")  # noqa: SIM115 - closed with the run
        operator = subprocess.Popen(
            command,
            env=operator_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_limit(args.memory_limit_mib),
        )
        time.sleep(3)
        _kubectl(env, "apply", "-f", "-", input=_servers(namespace, ports, good))
        began = time.monotonic()
        peak = 0.0
        outcome = "timed out"
        ready_after: float | None = None
        while time.monotonic() - began < args.seconds:
            time.sleep(2)
            if operator.poll() is not None:
                outcome = f"operator exited with {operator.returncode}"
                break
            peak = max(peak, _peak_mib(operator.pid))
            items = json.loads(_kubectl(env, "-n", namespace, "get", "mcpservers", "-o", "json"))
            ready = probed = 0
            reasons: dict[str, int] = {}
            for item in items["items"]:
                conditions = {c["type"]: c for c in item.get("status", {}).get("conditions", [])}
                name = item["metadata"]["name"]
                if name.startswith("good") and conditions.get("Ready", {}).get("status") == "True":
                    ready += 1
                if name.startswith("hostile") and "Probed" in conditions:
                    probed += 1
                    reason = conditions["Probed"]["reason"]
                    reasons[reason] = reasons.get(reason, 0) + 1
            if ready == args.good and ready_after is None:
                ready_after = time.monotonic() - began
            if ready == args.good and probed == args.servers and time.monotonic() - began > 30:
                outcome = "done"
                break
        peak = max(peak, _peak_mib(operator.pid))
        return {
            "attack": attack,
            "code": "before" if args.operator_source else "after",
            "servers": args.servers,
            "operator_peak_rss_mib": round(peak),
            "well_behaved_ready": f"{ready}/{args.good}",
            "well_behaved_ready_after_s": round(ready_after, 1) if ready_after else None,
            "hostile_probed": f"{probed}/{args.servers}",
            "hostile_reasons": reasons,
            "outcome": outcome,
            "load_average": round(os.getloadavg()[0], 1),
        }
    finally:
        if operator is not None:
            with contextlib.suppress(ProcessLookupError):
                operator.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                operator.wait(20)
            with contextlib.suppress(ProcessLookupError):
                operator.kill()
        farm.terminate()
        farm.wait(10)
        _kubectl(env, "delete", "namespace", namespace, "--wait=false")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--servers", type=int, default=64, help="hostile servers (default 64)")
    parser.add_argument("--good", type=int, default=4, help="well-behaved servers (default 4)")
    parser.add_argument("--attacks", nargs="+", default=list(ATTACKS), choices=list(ATTACKS))
    parser.add_argument("--seconds", type=float, default=150, help="longest run per attack")
    parser.add_argument("--operator-source", help="PYTHONPATH of the operator to measure")
    parser.add_argument("--memory-limit-mib", type=int, default=4096, help="RLIMIT_AS")
    parser.add_argument("--log", default="/tmp/probe-memory-bench-operator.log")
    parser.add_argument("--farm", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.farm:
        hostile_count, good_count, attack = json.loads(args.farm)
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_farm(hostile_count, good_count, attack))
        return
    with ControlPlane() as plane:
        env = plane.env()
        _kubectl(env, "apply", "--server-side", "-f", str(REPO / "crds"))
        _kubectl(env, "wait", "--for=condition=Established", "-f", str(REPO / "crds"))
        for attack in args.attacks:
            print(json.dumps(run_once(plane, args, attack)), flush=True)


if __name__ == "__main__":
    main()
