"""Benchmark: the bridge against calling its upstream directly, tools/list over 10 upstreams,
and what PII scanning costs per call.

1. **Calls**, with ``wrk`` POSTing ``tools/call`` of server-everything's ``echo`` on one
   initialized session (bench/wrk_call.lua: every answer's id and echoed message must agree):
   through the bridge and directly against the same upstream, for two upstreams:
   server-everything's own Streamable HTTP transport, and our adapter in front of its stdio.
   Twice each: 10 connections for 10 s (calls/s, p50, p99) and 1 connection (p50 without
   queueing: the bridge's added latency). Targets: added p50 under 1 ms, at least half of
   the direct calls/s. With ``--ratios-only``, also bench/tcp_relay.py in front of each
   upstream: a process that only copies bytes, the ceiling of any forwarder in Python; and
   the compiled bridge (``mcp-dataplane bridge``, ``make dataplane``) beside the Python one,
   each row with its forwarder's CPU per call and RSS.
2. **tools/list over 10 upstreams** (ten server-everything processes): the bridge's listing
   round (connect and list every server, concurrently, what it does at start and on reload)
   against the slowest single upstream's connect-and-list; target within 1.2x. And the agent's
   ``tools/list`` through the bridge (served from the catalog) against one upstream's.
3. **PII scanning**: the calls of 1. through the bridge over the adapter with PII ``off``,
   ``detect`` and ``redact`` in both directions (argument validation is always on; its own cost
   is in bench/bridge_validation_bench.py).
4. **Tokens**: the calls of 1. through the bridge over the adapter with ``--auth kubernetes``,
   the bridge presenting a ServiceAccount token from a file (``tokenFile``, as in a run Pod),
   against the same path with ``--auth none`` and no token; target at least 0.9x the calls/s.

``.venv/bin/python bench/bridge_bench.py`` (needs wrk and the npm peers of ``make
node-tools``). The JSON of a run goes to ``bench/results/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import contextforge  # noqa: E402
from adapter_bench import cpu_seconds, tree_rss_mib  # noqa: E402
from tests.support import dataplane, peers, wire  # noqa: E402
from tests.support.bridge_run import RunningBridge, bridge_config, run_bridge, server_entry  # noqa: E402
from tests.support.issuer import TestIssuer, access_document, write_access  # noqa: E402
from tests.support.otlp_collector import Collector  # noqa: E402

from mcp_operator.api.bridge import BridgeConfig  # noqa: E402
from mcp_operator.bridge.egress import BRIDGE_EGRESS  # noqa: E402
from mcp_operator.bridge.upstreams import UpstreamPool, list_tools, upstream_session  # noqa: E402
from mcp_operator.net.pool import Http1Pool  # noqa: E402

LUA = Path(__file__).resolve().parent / "wrk_call.lua"
VERSION = wire.LEGACY_VERSION
"""Every session, direct or through the bridge, speaks the version the bridge negotiates with a
legacy upstream (the latest): server-everything costs about 1.3 ms more per call at 2025-11-25
than at 2025-06-18 (it primes every SSE answer for resumption), so mixing them would charge the
upstream's extra work to the bridge."""
MODERN_DIRECT = f"direct at {wire.MODERN_VERSION}: "
"""The direct rows in the era the bridge negotiates with an upstream that offers it (our
adapter does: ``server/discover``): the bridge's own upstream requests are of that era."""
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@dataclass
class Load:
    name: str
    connections: int
    calls_per_second: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    checked: int = 0
    bad: int = 0
    errors: int = 0
    rss_mib: float | None = None
    """Resident memory of the forwarding process tree after the load (bridge or gateway)."""
    cpu_us_per_call: float | None = None
    """CPU of the forwarding process (all its threads) per call answered, when measured: less
    moved than calls/s by other work on a shared machine."""


def decode(response: httpx.Response) -> dict[str, Any]:
    """A JSON-RPC response from a JSON or an SSE body."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:") and line[5:].strip():  # not a priming event
                message = json.loads(line[5:])
                if "id" in message and ("result" in message or "error" in message):
                    return dict(message)
        raise ValueError(f"no response in SSE body: {response.text[:200]}")
    return dict(response.json())


def open_session(
    url: str, tool: str, extra: dict[str, str] | None = None, version: str = VERSION
) -> str:
    """Initialize one session and prove with one checked call that ``tool`` echoes; the
    session id, or "" from a server that runs without sessions (stateless, or a ``version``
    of the stateless era: no handshake, the envelope on the call)."""
    modern = version == wire.MODERN_VERSION
    headers = {**HEADERS, "mcp-protocol-version": version}
    params: dict[str, Any] = {"name": tool, "arguments": {"message": "checked"}}
    with httpx.Client(timeout=30, headers=extra) as http:
        session = ""
        if modern:
            headers |= {"mcp-method": "tools/call", "mcp-name": tool}
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": version,
                "io.modelcontextprotocol/clientInfo": wire.CLIENT_INFO,
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        else:
            response = http.post(url, json=wire.initialize(id=1), headers=HEADERS)
            response.raise_for_status()
            session = response.headers.get("mcp-session-id", "")
            if session:
                headers["mcp-session-id"] = session
            http.post(url, json=wire.initialized(), headers=headers)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
        text = decode(http.post(url, json=call, headers=headers))["result"]["content"][0]["text"]
        if text != "Echo: checked":
            raise RuntimeError(f"the checked call to {url} answered {text!r}")
    return session


def wrk(
    name: str,
    url: str,
    tool: str,
    connections: int,
    seconds: int,
    *,
    authorization: str = "",
    forwarder: int | None = None,
    version: str = VERSION,
    cpu_of: int | None = None,
) -> Load:
    """wrk on one session at ``url`` (no session at all for ``version`` 2026-07-28);
    ``forwarder``: the pid whose process tree's RSS to take; ``cpu_of``: the pid whose CPU per
    call to take."""
    load = Load(name, connections)
    extra = {"authorization": authorization} if authorization else None
    session = open_session(url, tool, extra, version)
    env = {**os.environ, "MCP_SESSION_ID": session, "MCP_PROTOCOL_VERSION": version,
           "MCP_TOOL": tool, "MCP_AUTHORIZATION": authorization}  # fmt: skip
    threads = min(2, connections)
    argv = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency",
            "--timeout", "10s", "-s", str(LUA), url]  # fmt: skip
    cpu_before = cpu_seconds(cpu_of) if cpu_of is not None else 0.0
    output = subprocess.run(
        argv, capture_output=True, text=True, env=env, timeout=seconds + 60
    ).stdout
    cpu_used = cpu_seconds(cpu_of) - cpu_before if cpu_of is not None else 0.0
    if match := re.search(r"Requests/sec:\s+([\d.]+)", output):
        load.calls_per_second = float(match.group(1))
    if match := re.search(r"checked=(\d+) bad=(\d+)", output):
        load.checked, load.bad = int(match.group(1)), int(match.group(2))
    if match := re.search(r"p50_us=(\d+) p99_us=(\d+)", output):
        load.p50_ms, load.p99_ms = int(match.group(1)) / 1000, int(match.group(2)) / 1000
    for pattern in (r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)",
                    r"Non-2xx or 3xx responses: (\d+)"):  # fmt: skip
        if match := re.search(pattern, output):
            load.errors += sum(int(group) for group in match.groups())
    if forwarder is not None:
        load.rss_mib = tree_rss_mib(forwarder)
    if cpu_of is not None and load.checked:
        load.cpu_us_per_call = cpu_used * 1e6 / load.checked
    print(f"  {name} c={connections}: {load.calls_per_second:,.0f}/s p50 {load.p50_ms:.2f} ms",
          file=sys.stderr, flush=True)  # fmt: skip
    return load


@contextmanager
def adapter_over_stdio(
    auth: Sequence[str] = ("--auth=none",), env: dict[str, str] | None = None
) -> Iterator[str]:
    port = peers.free_port()
    node = ["node", str(peers.SERVER_EVERYTHING), "stdio"]
    argv = [sys.executable, "-m", "mcp_operator", "adapter", "--port", str(port), *auth,
            "--log-level", "warning", "--", *node]  # fmt: skip
    # The port opens before the child has answered its handshake (503 until then).
    with peers.run_server(argv, port, name="adapter", env=env, ready="/readyz"):
        yield f"http://127.0.0.1:{port}/mcp"


def pii_policy(mode: str) -> dict[str, Any]:
    return {"pii": {"arguments": mode, "results": mode}}


def calls(args: argparse.Namespace) -> list[Load]:
    if args.tokens_only:
        return plain_and_token_loads(args)
    if args.tracing_only:
        return plain_and_tracing_loads(args)
    if args.ratios_only:
        return ratio_loads(args)
    loads: list[Load] = []
    quiet = ["--log-level=WARNING"]
    with peers.server_everything() as http_url, adapter_over_stdio() as adapter_url:
        for label, upstream in (("server-everything HTTP", http_url),
                                ("adapter + stdio", adapter_url)):  # fmt: skip
            for connections in (10, 1):
                seconds = args.seconds if connections > 1 else max(3, args.seconds // 2)
                loads.append(wrk(f"direct: {label}", upstream, "echo", connections, seconds))
                if label == "adapter + stdio":  # the era the bridge itself speaks to it
                    loads.append(wrk(f"{MODERN_DIRECT}{label}", upstream, "echo", connections,
                                     seconds, version=wire.MODERN_VERSION))  # fmt: skip
                with run_bridge([server_entry("everything", upstream, "ev")],
                                extra_args=quiet) as bridge:  # fmt: skip
                    pid = bridge.process.pid
                    loads.append(wrk(f"bridge → {label}", bridge.url, "ev_echo", connections,
                                     seconds, forwarder=pid, cpu_of=pid))  # fmt: skip
            if "contextforge" not in args.skip:
                loads.extend(contextforge_loads(label, upstream, args))
        if "tracing" not in args.skip:
            loads.extend(tracing_loads(adapter_url, args))
        for mode in () if "pii" in args.skip else ("detect", "redact"):
            entry = server_entry("everything", adapter_url, "ev", policy=pii_policy(mode))
            with run_bridge([entry], extra_args=quiet) as bridge:
                for connections in (10, 1):
                    seconds = args.seconds if connections > 1 else max(3, args.seconds // 2)
                    name = f"bridge → adapter + stdio, PII {mode}"
                    loads.append(wrk(name, bridge.url, "ev_echo", connections, seconds))
    loads.extend(token_loads(args))
    return loads


TOKENS = "bridge → adapter --auth kubernetes + stdio, tokenFile"


def plain_and_token_loads(args: argparse.Namespace) -> list[Load]:
    """Only 4., with its baseline measured in the same run (``--tokens-only``)."""
    loads: list[Load] = []
    with ExitStack() as stack:
        adapter_url = stack.enter_context(adapter_over_stdio())
        entry = server_entry("everything", adapter_url, "ev")
        bridge = stack.enter_context(run_bridge([entry], extra_args=["--log-level=WARNING"]))
        for connections in (10, 1):
            seconds = args.seconds if connections > 1 else max(3, args.seconds // 2)
            name = "bridge → adapter + stdio"
            loads.append(wrk(name, bridge.url, "ev_echo", connections, seconds))
    return loads + token_loads(args)


def plain_and_tracing_loads(args: argparse.Namespace) -> list[Load]:
    """Only the bridge over the adapter with tracing off, on, and on with 1 in 10 sampled
    (``--tracing-only``): three bridges up at once, measured in turn for ``--rounds`` rounds
    of ``--seconds`` each, the median of each row: load that comes and goes on a shared
    machine falls on all three alike."""
    collector = Collector(keep=False)
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url}
    sampled = {**env, "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
               "OTEL_TRACES_SAMPLER_ARG": "0.1"}  # fmt: skip
    loads: list[Load] = []
    quiet = ["--log-level=WARNING"]
    with ExitStack() as stack:
        stack.callback(collector.close)
        entry = server_entry("everything", stack.enter_context(adapter_over_stdio()), "ev")
        bridges = {
            name: stack.enter_context(run_bridge([entry], extra_args=quiet, env=environ))
            for name, environ in (
                ("bridge → adapter + stdio", None),
                ("bridge → adapter + stdio, tracing on", env),
                ("bridge → adapter + stdio, tracing on, 1 in 10 sampled", sampled),
            )
        }
        for connections in (10, 1):
            runs: dict[str, list[Load]] = {name: [] for name in bridges}
            for _ in range(args.rounds):
                for name, bridge in bridges.items():
                    pid = bridge.process.pid
                    runs[name].append(wrk(name, bridge.url, "ev_echo", connections,
                                          args.seconds, cpu_of=pid))  # fmt: skip
            loads.extend(_median(name, connections, measured) for name, measured in runs.items())
        if not collector.trace_posts:
            raise RuntimeError("tracing was on but the collector stand-in got no spans")
    return loads


def ratio_loads(args: argparse.Namespace) -> list[Load]:
    """Only the issue's ratios (``--ratios-only``): each upstream called directly and
    through a bridge, the bridge up beside it, measured in turn for ``--rounds`` rounds of
    ``--seconds`` each, the median of each row (as ``--tracing-only``): on a shared machine
    one run of each row, minutes apart, moved the ratio by half. Beside them, bench/tcp_relay.py
    in front of each upstream: what a forwarder that only copies bytes reaches."""
    loads: list[Load] = []
    with ExitStack() as stack:
        upstreams = (("server-everything HTTP", stack.enter_context(peers.server_everything())),
                     ("adapter + stdio", stack.enter_context(adapter_over_stdio())))  # fmt: skip
        for label, upstream in upstreams:
            entry = server_entry("everything", upstream, "ev")
            bridge = stack.enter_context(run_bridge([entry], extra_args=["--log-level=WARNING"]))
            rows: list[tuple[str, str, str, str, int | None]] = [
                (f"direct: {label}", upstream, "echo", VERSION, None)
            ]
            if label == "adapter + stdio":  # the era the bridge itself speaks to it
                rows.append(
                    (f"{MODERN_DIRECT}{label}", upstream, "echo", wire.MODERN_VERSION, None)
                )
            rows.append((f"bridge → {label}", bridge.url, "ev_echo", VERSION, bridge.process.pid))
            if dataplane.missing() is None:
                compiled = stack.enter_context(compiled_bridge([entry]))
                compiled_pid = compiled.process.pid
                rows.append((f"{COMPILED}{label}", compiled.url, "ev_echo", VERSION, compiled_pid))
            relay = stack.enter_context(tcp_relay(upstream))
            rows.append((f"{RELAY}{label}", relay.url, "echo", VERSION, relay.pid))
            for connections in (10, 1):
                runs: dict[str, list[Load]] = {row[0]: [] for row in rows}
                for _ in range(args.rounds):
                    for name, url, tool, version, pid in rows:
                        runs[name].append(wrk(name, url, tool, connections, args.seconds,
                                              version=version, cpu_of=pid,
                                              forwarder=pid))  # fmt: skip
                loads.extend(_median(name, connections, runs[name]) for name in runs)
    return loads


COMPILED = "compiled bridge → "
"""The rows of ``mcp-dataplane bridge`` in front of an upstream (the data plane in Rust)."""


@contextmanager
def compiled_bridge(servers: Sequence[dict[str, Any]]) -> Iterator[RunningBridge]:
    """``mcp-dataplane bridge`` started by the tests' own helper (its program swapped while
    it starts)."""
    with ExitStack() as stack, pytest.MonkeyPatch.context() as patch:
        dataplane.use_bridge(patch, "compiled")
        running = stack.enter_context(run_bridge(servers, extra_args=["--log-level=warning"]))
        patch.undo()
        yield running


RELAY = "byte relay → "
"""The rows of bench/tcp_relay.py in front of an upstream: the ceiling of a forwarder in Python."""


@dataclass
class Relay:
    url: str
    pid: int


@contextmanager
def tcp_relay(upstream: str) -> Iterator[Relay]:
    """bench/tcp_relay.py between the caller and ``upstream`` (its URL, served on loopback)."""
    port, target = peers.free_port(), urlsplit(upstream)
    script = Path(__file__).resolve().parent / "tcp_relay.py"
    argv = [sys.executable, str(script), str(port), str(target.port)]
    with peers.run_server(argv, port, name="byte relay") as process:
        yield Relay(f"http://127.0.0.1:{port}{target.path}", process.pid)


def _median(name: str, connections: int, runs: list[Load]) -> Load:
    """One row of several runs: the median of each measure, the sums of the counts."""
    cpu = [run.cpu_us_per_call for run in runs if run.cpu_us_per_call is not None]
    return Load(
        name=f"{name} (median of {len(runs)})",
        connections=connections,
        calls_per_second=statistics.median(run.calls_per_second for run in runs),
        p50_ms=statistics.median(run.p50_ms for run in runs),
        p99_ms=statistics.median(run.p99_ms for run in runs),
        checked=sum(run.checked for run in runs),
        bad=sum(run.bad for run in runs),
        errors=sum(run.errors for run in runs),
        cpu_us_per_call=statistics.median(cpu) if cpu else None,
        rss_mib=runs[-1].rss_mib,
    )


def token_loads(args: argparse.Namespace) -> list[Load]:
    """The bridge presenting a projected-style token to an adapter that verifies it."""
    scratch = Path(tempfile.mkdtemp(prefix="bridge-bench-tokens-"))
    issuer = TestIssuer()
    access = write_access(scratch / "access.json", access_document(issuer, namespaces=["default"]))
    token_file = scratch / "token"
    token_file.write_text(issuer.service_account_token("default", "agent", lifetime=3600))
    loads: list[Load] = []
    auth = ("--auth=kubernetes", f"--access-config={access}")
    quiet = ["--log-level=WARNING"]
    with adapter_over_stdio(auth) as adapter_url:
        entry = server_entry("everything", adapter_url, "ev", tokenFile=str(token_file))
        with run_bridge([entry], extra_args=quiet) as bridge:
            for connections in (10, 1):
                seconds = args.seconds if connections > 1 else max(3, args.seconds // 2)
                loads.append(wrk(TOKENS, bridge.url, "ev_echo", connections, seconds))
    return loads


def tracing_loads(adapter_url: str, args: argparse.Namespace) -> list[Load]:
    """OpenTelemetry on, exporting to a local collector stand-in: the bridge over the adapter
    (of 1.) again, and the bridge over an adapter that traces too; the rows with tracing off
    are the ones of 1. (nothing configured: no span is made)."""
    collector = Collector(keep=False)
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, "OTEL_METRIC_EXPORT_INTERVAL": "5000"}
    loads = []
    try:
        with adapter_over_stdio(env=env) as traced_adapter:
            for label, upstream in (("adapter + stdio", adapter_url),
                                    ("traced adapter + stdio", traced_adapter)):  # fmt: skip
                entry = server_entry("everything", upstream, "ev")
                with run_bridge([entry], extra_args=["--log-level=WARNING"], env=env) as bridge:
                    for connections in (10, 1):
                        seconds = args.seconds if connections > 1 else max(3, args.seconds // 2)
                        name = f"bridge → {label}, tracing on"
                        loads.append(wrk(name, bridge.url, "ev_echo", connections, seconds,
                                         cpu_of=bridge.process.pid))  # fmt: skip
        sampled = {**env, "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
                   "OTEL_TRACES_SAMPLER_ARG": "0.1"}  # fmt: skip
        entry = server_entry("everything", adapter_url, "ev")
        with run_bridge([entry], extra_args=["--log-level=WARNING"], env=sampled) as bridge:
            for connections in (10, 1):
                seconds = args.seconds if connections > 1 else max(3, args.seconds // 2)
                name = "bridge → adapter + stdio, tracing on, 1 in 10 sampled"
                loads.append(wrk(name, bridge.url, "ev_echo", connections, seconds,
                                 cpu_of=bridge.process.pid))  # fmt: skip
        if not collector.trace_posts:
            raise RuntimeError("tracing was on but the collector stand-in got no spans")
    finally:
        collector.close()
    return loads


def contextforge_loads(label: str, upstream: str, args: argparse.Namespace) -> list[Load]:
    """The peer in front of the same upstream, loaded as the bridge is."""
    if not contextforge.installed():
        print(f"  ContextForge is not installed (bash hack/install-contextforge.sh): "
              f"skipped for {label}", file=sys.stderr, flush=True)  # fmt: skip
        return []
    loads = []
    with contextforge.virtual_server(upstream, "echo") as gateway:
        for connections in (10, 1):
            seconds = args.seconds if connections > 1 else max(3, args.seconds // 2)
            name = f"ContextForge {contextforge.VERSION} → {label}"
            loads.append(wrk(name, gateway.url, gateway.tool, connections, seconds,
                             authorization=gateway.headers["authorization"],
                             forwarder=gateway.pid))  # fmt: skip
    return loads


# ------------------------------------------------------------------ tools/list, 10 upstreams


async def _single(url: str, rounds: int) -> tuple[float, float]:
    """One upstream alone: median connect-and-list, and median list on the open session."""
    cold, warm = [], []
    for _ in range(rounds):
        pool = Http1Pool(egress=BRIDGE_EGRESS)
        upstream = upstream_session("one", url, pool)
        started = time.perf_counter()
        await list_tools(upstream, 30)
        cold.append(time.perf_counter() - started)
        for _ in range(3):
            started = time.perf_counter()
            await list_tools(upstream, 30)
            warm.append(time.perf_counter() - started)
        await pool.aclose()
    return statistics.median(cold), statistics.median(warm)


async def _pooled(config: BridgeConfig, rounds: int) -> tuple[float, float, float]:
    """All upstreams through the bridge's pool: median first round (connect and list every
    server, concurrently, as at start), median re-listing round on the open sessions, and
    the bridge's own CPU time in a re-listing round (the rest is the upstreams' and the
    wait for a core)."""
    cold, warm, cpu = [], [], []
    for _ in range(rounds):
        pool = UpstreamPool(on_change=lambda catalog: None)
        started = time.perf_counter()
        await pool.configure(config)
        cold.append(time.perf_counter() - started)
        if not all(state.up for state in pool.states.values()):
            raise RuntimeError("an upstream failed to list")
        for _ in range(3):
            started, used = time.perf_counter(), time.process_time()
            await pool.relist(*pool.states)
            warm.append(time.perf_counter() - started)
            cpu.append(time.process_time() - used)
        await pool.stop()
    return statistics.median(cold), statistics.median(warm), statistics.median(cpu)


async def _agent_list(url: str, tool: str, rounds: int) -> tuple[float, int]:
    """Median seconds of one ``tools/list`` on an open session at ``url``, and the tools."""
    session = await asyncio.to_thread(open_session, url, tool)
    headers = {**HEADERS, "mcp-session-id": session, "mcp-protocol-version": VERSION}
    body = {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}
    times = []
    count = 0
    async with httpx.AsyncClient() as client:
        for _ in range(rounds):
            started = time.perf_counter()
            response = await client.post(url, json=body, headers=headers)
            count = len(decode(response)["result"]["tools"])
            times.append(time.perf_counter() - started)
    return statistics.median(times), count


def listing(args: argparse.Namespace) -> dict[str, Any]:
    rounds = args.rounds
    with ExitStack() as stack:
        urls = [stack.enter_context(peers.server_everything()) for _ in range(10)]
        servers = [server_entry(f"s{i}", url, f"s{i}") for i, url in enumerate(urls)]
        config = BridgeConfig.model_validate(bridge_config(servers, 7800))
        singles = [asyncio.run(_single(url, rounds)) for url in urls]
        pooled_cold, pooled_warm, pooled_cpu = asyncio.run(_pooled(config, rounds))
        with run_bridge(servers, extra_args=["--log-level=WARNING"]) as bridge:
            through, tools = asyncio.run(_agent_list(bridge.url, "s0_echo", rounds * 20))
        direct, _ = asyncio.run(_agent_list(urls[0], "echo", rounds * 20))
    slowest_cold = max(cold for cold, _ in singles)
    slowest_warm = max(warm for _, warm in singles)
    return {
        "upstreams": 10,
        "slowest_single_cold_ms": slowest_cold * 1000,
        "bridge_first_round_ms": pooled_cold * 1000,
        "cold_ratio": pooled_cold / slowest_cold,
        "slowest_single_warm_ms": slowest_warm * 1000,
        "bridge_relist_round_ms": pooled_warm * 1000,
        "bridge_relist_round_cpu_ms": pooled_cpu * 1000,
        "warm_ratio": pooled_warm / slowest_warm,
        "agent_tools_list_through_bridge_ms": through * 1000,
        "agent_tools_list_through_bridge_tools": tools,
        "agent_tools_list_one_upstream_ms": direct * 1000,
    }


# ------------------------------------------------------------------ report


def call_table(loads: list[Load]) -> str:
    cpu = any(load.cpu_us_per_call is not None for load in loads)
    rows = ["| path | connections | calls/s | p50 ms | p99 ms | bad/errors of checked | RSS MiB |"
            + (" bridge CPU µs/call |" if cpu else ""),
            "|---|---|---|---|---|---|---|" + ("---|" if cpu else "")]  # fmt: skip
    for load in loads:
        rss = "" if load.rss_mib is None else f"{load.rss_mib:,.1f}"
        used = "" if load.cpu_us_per_call is None else f"{load.cpu_us_per_call:,.0f}"
        rows.append(
            f"| {load.name} | {load.connections} | {load.calls_per_second:,.0f} "
            f"| {load.p50_ms:.2f} | {load.p99_ms:.2f} | {load.bad}/{load.errors} of "
            f"{load.checked:,} | {rss} |" + (f" {used} |" if cpu else "")
        )
    return "\n".join(rows)


def verdicts(loads: list[Load]) -> list[str]:
    by = {(re.sub(r" \(median of \d+\)$", "", load.name), load.connections): load for load in loads}
    lines = []
    for label in ("server-everything HTTP", "adapter + stdio"):
        direct10, bridge10 = by.get((f"direct: {label}", 10)), by.get((f"bridge → {label}", 10))
        direct1, bridge1 = by.get((f"direct: {label}", 1)), by.get((f"bridge → {label}", 1))
        if direct10 and bridge10 and direct10.calls_per_second:
            ratio = bridge10.calls_per_second / direct10.calls_per_second
            target = 0.8 if label == "server-everything HTTP" else 0.5
            lines.append(f"{label}: bridge/direct calls/s {ratio:.2f} (target >= {target})")
        relay10 = by.get((f"{RELAY}{label}", 10))
        if direct10 and relay10 and direct10.calls_per_second:
            ratio = relay10.calls_per_second / direct10.calls_per_second
            lines.append(
                f"{label}: byte relay/direct calls/s {ratio:.2f} (the ceiling of any forwarder "
                "in Python here: no parsing, one more process on the cores)"
            )
        modern10 = by.get((f"{MODERN_DIRECT}{label}", 10))
        if modern10 and bridge10 and modern10.calls_per_second:
            ratio = bridge10.calls_per_second / modern10.calls_per_second
            lines.append(
                f"{label}: bridge/direct calls/s {ratio:.2f} against direct calls in the era "
                f"the bridge speaks upstream ({wire.MODERN_VERSION})"
            )
        if direct1 and bridge1:
            added = bridge1.p50_ms - direct1.p50_ms
            lines.append(f"{label}: added p50, 1 connection {added:.2f} ms (target < 0.5 ms)")
        compiled10 = by.get((f"{COMPILED}{label}", 10))
        if direct10 and compiled10 and direct10.calls_per_second:
            ratio = compiled10.calls_per_second / direct10.calls_per_second
            lines.append(f"{label}: compiled bridge/direct calls/s {ratio:.2f}")
        if bridge10 and compiled10 and compiled10.cpu_us_per_call and bridge10.cpu_us_per_call:
            lines.append(
                f"{label}: CPU per call, compiled bridge {compiled10.cpu_us_per_call:.0f} µs "
                f"vs Python bridge {bridge10.cpu_us_per_call:.0f} µs; RSS "
                f"{compiled10.rss_mib or 0:.1f} vs {bridge10.rss_mib or 0:.1f} MiB"
            )
        compiled1 = by.get((f"{COMPILED}{label}", 1))
        if direct1 and compiled1:
            added = compiled1.p50_ms - direct1.p50_ms
            lines.append(f"{label}: compiled bridge's added p50, 1 connection {added:.2f} ms")
        peer10 = by.get((f"ContextForge {contextforge.VERSION} → {label}", 10))
        if peer10 and bridge10 and peer10.calls_per_second:
            ratio = bridge10.calls_per_second / peer10.calls_per_second
            lines.append(f"{label}: bridge/ContextForge calls/s {ratio:,.0f}x")
    for connections in (10, 1):
        plain = by.get(("bridge → adapter + stdio", connections))
        tokens = by.get((TOKENS, connections))
        if plain and tokens and plain.calls_per_second:
            ratio = tokens.calls_per_second / plain.calls_per_second
            added = (tokens.p50_ms - plain.p50_ms) * 1000
            lines.append(
                f"tokens (bridge sends, adapter verifies), {connections} connection(s): "
                f"{ratio:.2f}x calls/s (target >= 0.9x), {added:+.0f} µs p50"
            )
    for suffix in ("tracing on", "tracing on, 1 in 10 sampled"):
        for connections in (10, 1):
            off = by.get(("bridge → adapter + stdio", connections))
            on = by.get((f"bridge → adapter + stdio, {suffix}", connections))
            if off and on and off.calls_per_second:
                cost = 1 - on.calls_per_second / off.calls_per_second
                cpu = ""
                if on.cpu_us_per_call and off.cpu_us_per_call:
                    cpu = f", bridge CPU {on.cpu_us_per_call - off.cpu_us_per_call:+.0f} µs/call"
                lines.append(
                    f"{suffix} (bridge), {connections} connection(s): costs {cost:.1%} of the "
                    f"calls/s, p50 {(on.p50_ms - off.p50_ms) * 1000:+.0f} µs{cpu} (target <= 10 %)"
                )
    base = by.get(("bridge → adapter + stdio", 1))
    for mode in ("detect", "redact"):
        scanned = by.get((f"bridge → adapter + stdio, PII {mode}", 1))
        if base and scanned:
            cost = (scanned.p50_ms - base.p50_ms) * 1000
            lines.append(f"PII {mode} both directions: {cost:+.0f} µs p50 per call")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10, help="wrk duration (default 10)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="tools/list rounds; with --tracing-only or --ratios-only, rounds of each row "
        "(default 5)",
    )
    parser.add_argument(
        "--skip",
        choices=("calls", "listing", "pii", "contextforge", "tracing"),
        action="append",
        default=[],
    )
    parser.add_argument(
        "--tokens-only",
        action="store_true",
        help="only the bridge over the adapter with and without tokens (4.), side by side",
    )
    parser.add_argument(
        "--ratios-only",
        action="store_true",
        help="only each upstream directly and through the bridge, in --rounds rounds, medians",
    )
    parser.add_argument(
        "--tracing-only",
        action="store_true",
        help="only the bridge over the adapter with tracing off and on, side by side",
    )
    args = parser.parse_args()
    report: dict[str, Any] = {}
    lines: list[str] = []
    if "calls" not in args.skip:
        print("measuring calls ...", file=sys.stderr, flush=True)
        loads = calls(args)
        report["calls"] = [asdict(load) for load in loads]
        print(call_table(loads))
        lines += verdicts(loads)
    if "listing" not in args.skip:
        print("measuring tools/list over 10 upstreams ...", file=sys.stderr, flush=True)
        report["listing"] = result = listing(args)
        lines.append(
            f"agent tools/list through the bridge "
            f"({result['agent_tools_list_through_bridge_tools']} tools of 10 upstreams): "
            f"{result['agent_tools_list_through_bridge_ms']:.2f} ms, one upstream directly "
            f"{result['agent_tools_list_one_upstream_ms']:.2f} ms (target <= 1.2x)"
        )
        lines.append(
            f"re-listing round over 10 open sessions {result['bridge_relist_round_ms']:.1f} ms "
            f"vs the slowest single {result['slowest_single_warm_ms']:.1f} ms: "
            f"{result['warm_ratio']:.2f}x (the bridge's CPU in it: "
            f"{result['bridge_relist_round_cpu_ms']:.1f} ms)"
        )
        lines.append(
            f"first round (connect and list 10) {result['bridge_first_round_ms']:.1f} ms vs the "
            f"slowest single {result['slowest_single_cold_ms']:.1f} ms: "
            f"{result['cold_ratio']:.2f}x"
        )
    for line in lines:
        print("-", line)
    out = REPO / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    (out / f"bridge-{stamp}.json").write_text(json.dumps(report, indent=2))
    bad = any(load["bad"] for load in report.get("calls", []))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
