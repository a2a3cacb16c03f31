"""How fast a fleet of external MCPServers becomes Ready, and what the operator costs.

One run: a real local control plane, the operator as a subprocess (as a user
runs it), a few real MCP servers on loopback (server-everything over Streamable
HTTP, mcp-server-time over the SDK's Streamable HTTP), then:

1. single-server create→Ready latency, one server at a time (p50, p95);
2. for each size N, first the floor: the writes the operator must make per
   server (create, one status patch, one Event) done by a plain concurrent
   client with no operator involved (in a namespace the operator does not
   watch); then N
   MCPServers created at once (default 100 and 1,000), spread over the
   servers: time until every one is Ready, and its ratio to the floor;
3. the operator's peak RSS (VmHWM of its process) after all of it.

With ``--scrape SECONDS`` the operator's /metrics is read every SECONDS during
the fleet runs (as Prometheus would), to show what scraping costs.

    .venv/bin/python bench/fleet_bench.py [--sizes 100 1000] [--single 20] [--scrape 1]

Targets on a 2-core machine: 1,000 Ready within 60 s, p50 create→Ready under
1 s, RSS under 250 MiB.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support import peers  # noqa: E402

from mcp_operator.dev.cluster import ControlPlane  # noqa: E402
from mcp_operator.dev.processes import kubectl_path  # noqa: E402

GROUP_PATH = "/apis/mcp-operator.dev/v1alpha1"


def rss_mib(pid: int, field: str = "VmHWM") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _processes() -> dict[int, tuple[int, str, float]]:
    """Every process: its parent, a short name and its user + system CPU seconds."""
    ticks = os.sysconf("SC_CLK_TCK")
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            argv = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # the process ended meanwhile
        head, _, rest = text.rpartition(")")
        fields = rest.split()
        words = [a.decode(errors="replace") for a in argv[:3] if a]
        name = head.partition("(")[2]
        if name.startswith(("python", "node")) and len(words) > 2:
            name = _program(words)
        found[int(stat.parent.name)] = (
            int(fields[1]),
            name[:40],
            (int(fields[11]) + int(fields[12])) / ticks,
        )
    return found


def _program(argv: list[str]) -> str:
    """`python -m mcp_operator` → mcp_operator; `python -c "...from mcp_server_time..."` →
    mcp_server_time; `node .../server-everything/dist/index.js` → server-everything."""
    if argv[1] == "-m":
        return argv[2]
    if argv[1] == "-c":
        module = re.search(r"from (\w+)", argv[2])
        return module.group(1) if module else "python -c"
    script = [p for p in Path(argv[1]).parts if p not in ("dist", "build", "index.js")]
    return script[-1] if script else argv[1]


def cpu_seconds(root: int) -> float:
    """User + system CPU seconds of process ``root`` and its descendants (py-spy's child)."""
    found = _processes()
    total = 0.0
    for pid, (_, _, used) in found.items():
        walk = pid
        while walk not in (root, 0, 1) and walk in found:
            walk = found[walk][0]
        if walk == root:
            total += used
    return total


class CpuShares:
    """Which processes used the machine's CPU between :meth:`start` and :meth:`shares`."""

    def start(self) -> None:
        self._before = _processes()
        self._began = time.monotonic()

    def shares(self, top: int = 6) -> str:
        seconds = time.monotonic() - self._began
        used: dict[str, float] = {}
        for pid, (_, name, now) in _processes().items():
            before = self._before.get(pid)
            spent = now - (before[2] if before else 0.0)
            used[name] = used.get(name, 0.0) + spent
        busiest = sorted(used.items(), key=lambda item: -item[1])[:top]
        return ", ".join(f"{name} {spent / seconds:.0%}" for name, spent in busiest if spent)


def _ready(item: dict) -> bool:  # type: ignore[type-arg]
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in item.get("status", {}).get("conditions", [])
    )


class Api:
    def __init__(self, plane: ControlPlane) -> None:
        import ssl

        ca = plane.directory / "ca.crt"  # type: ignore[operator]
        self.client = httpx.AsyncClient(
            base_url=plane.server,
            verify=ssl.create_default_context(cafile=str(ca)),
            headers={"Authorization": f"Bearer {plane.token}"},
            timeout=60,
            limits=httpx.Limits(max_connections=20),
        )

    async def create(self, namespace: str, name: str, url: str) -> None:
        body = {
            "apiVersion": "mcp-operator.dev/v1alpha1",
            "kind": "MCPServer",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"mode": "external", "url": url, "toolsDeny": ["*Long*"]},
        }
        answer = await self.client.post(
            f"{GROUP_PATH}/namespaces/{namespace}/mcpservers", json=body
        )
        answer.raise_for_status()

    async def wait_ready(self, namespace: str, size: int, limit: float) -> None:
        """Return once ``size`` MCPServers in ``namespace`` are Ready, watching them (a list
        polled every fraction of a second would cost the API server more than the fleet)."""
        ready: set[str] = set()
        deadline = time.monotonic() + limit
        while len(ready) < size:
            answer = await self.client.get(f"{GROUP_PATH}/namespaces/{namespace}/mcpservers")
            answer.raise_for_status()
            listing = answer.json()
            ready = {item["metadata"]["name"] for item in listing["items"] if _ready(item)}
            version = listing["metadata"]["resourceVersion"]
            params = {"watch": "1", "resourceVersion": version, "timeoutSeconds": "60"}
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(f"{size - len(ready)} of {size} servers not Ready in time")
            with contextlib.suppress(httpx.ReadTimeout):
                async with self.client.stream(
                    "GET",
                    f"{GROUP_PATH}/namespaces/{namespace}/mcpservers",
                    params=params,
                    timeout=httpx.Timeout(10, read=remaining),
                ) as stream:
                    async for line in stream.aiter_lines():
                        event = json.loads(line)
                        name = event["object"].get("metadata", {}).get("name")
                        if event["type"] == "ERROR":
                            break  # e.g. the resource version expired: list again
                        if _ready(event["object"]) and event["type"] != "DELETED":
                            ready.add(name)
                        else:
                            ready.discard(name)
                        if len(ready) == size:
                            return

    async def is_ready(self, namespace: str, name: str) -> bool:
        """Whether the server is Ready; a failed probe ends the bench with its message."""
        answer = await self.client.get(f"{GROUP_PATH}/namespaces/{namespace}/mcpservers/{name}")
        answer.raise_for_status()
        for condition in answer.json().get("status", {}).get("conditions", []):
            if condition["type"] == "Ready" and condition["status"] == "True":
                return True
            if condition["type"] == "Probed" and condition["status"] == "False":
                raise RuntimeError(f"{namespace}/{name} failed: {condition.get('message')}")
        return False

    async def floor_one(self, namespace: str, name: str, url: str) -> None:
        """What the operator must write for one server: create, a status patch, an Event."""
        await self.create(namespace, name, url)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        ready = {
            "type": "Ready",
            "status": "True",
            "reason": "ToolsDiscovered",
            "message": "Serving 2 tools",
            "lastTransitionTime": now,
            "observedGeneration": 1,
        }
        answer = await self.client.patch(
            f"{GROUP_PATH}/namespaces/{namespace}/mcpservers/{name}/status",
            json={"status": {"observedGeneration": 1, "url": url, "conditions": [ready]}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        answer.raise_for_status()
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.floor", "namespace": namespace},
            "involvedObject": {
                "apiVersion": "mcp-operator.dev/v1alpha1",
                "kind": "MCPServer",
                "name": name,
                "namespace": namespace,
            },
            "type": "Normal",
            "reason": "ToolsDiscovered",
            "message": "Discovered 2 tools",
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "source": {"component": "fleet-bench"},
        }
        answer = await self.client.post(f"/api/v1/namespaces/{namespace}/events", json=event)
        answer.raise_for_status()

    async def namespace(self, name: str) -> None:
        answer = await self.client.post(
            "/api/v1/namespaces",
            json={"metadata": {"name": name}, "apiVersion": "v1", "kind": "Namespace"},
        )
        answer.raise_for_status()


async def single_latencies(api: Api, urls: list[str], count: int) -> list[float]:
    await api.namespace("single")
    latencies = []
    for i in range(count):
        began = time.monotonic()
        await api.create("single", f"s{i}", urls[i % len(urls)])
        while not await api.is_ready("single", f"s{i}"):  # noqa: ASYNC110 - polling the API
            await asyncio.sleep(0.01)
        latencies.append(time.monotonic() - began)
    return latencies


async def floor(api: Api, urls: list[str], size: int, concurrency: int) -> float:
    """Seconds for a plain client to make the operator's minimal writes for ``size`` servers."""
    namespace = f"floor-{size}"
    await api.namespace(namespace)
    semaphore = asyncio.Semaphore(concurrency)
    began = time.monotonic()

    async def one(i: int) -> None:
        async with semaphore:
            await api.floor_one(namespace, f"f{i}", urls[i % len(urls)])

    await asyncio.gather(*(one(i) for i in range(size)))
    return time.monotonic() - began


async def scraping(url: str, every: float, costs: list[float]) -> None:
    """Read /metrics every ``every`` seconds (as Prometheus would), noting each read's time."""
    async with httpx.AsyncClient(timeout=10) as client:
        while True:
            began = time.monotonic()
            (await client.get(url)).raise_for_status()
            costs.append(time.monotonic() - began)
            await asyncio.sleep(every)


async def api_requests(api: Api) -> dict[str, float]:
    """The API server's own count of requests so far, by verb and resource (all clients)."""
    text = (await api.client.get("/metrics")).text
    counts: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
        key = f"{labels.get('verb')} {labels.get('resource')}"
        if labels.get("subresource"):
            key += "/" + labels["subresource"]
        counts[key] = counts.get(key, 0.0) + float(line.rpartition(" ")[2])
    return counts


def per_server(before: dict[str, float], after: dict[str, float], size: int) -> str:
    """The requests made between two counts, per server, busiest first."""
    spent = {key: after[key] - before.get(key, 0.0) for key in after}
    busiest = sorted((item for item in spent.items() if item[1] >= size / 10), key=lambda i: -i[1])
    return ", ".join(f"{key} {count / size:.2f}" for key, count in busiest)


async def mean_seconds(metrics_url: str) -> str:
    """The operator's own means so far: queue wait, probe and reconcile duration."""
    async with httpx.AsyncClient(timeout=10) as client:
        text = (await client.get(metrics_url)).text
    sums: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        base = name.partition("{")[0]
        if base.endswith(("_seconds_sum", "_seconds_count")):
            sums[base] = sums.get(base, 0.0) + float(value)
    shown = []
    for label, metric in (
        ("queue wait", "mcp_operator_queue_wait_seconds"),
        ("probe", "mcp_operator_probe_duration_seconds"),
        ("reconcile", "mcp_operator_reconcile_duration_seconds"),
    ):
        count = sums.get(f"{metric}_count", 0.0)
        if count:
            shown.append(f"{label} {sums[f'{metric}_sum'] / count * 1000:.0f} ms")
    return ", ".join(shown)


async def fleet(api: Api, urls: list[str], size: int) -> tuple[float, float]:
    """Create ``size`` servers at once; seconds until created and until all are Ready."""
    limit = 300.0 + size * 0.15
    namespace = f"fleet-{size}"
    await api.namespace(namespace)
    began = time.monotonic()
    semaphore = asyncio.Semaphore(20)

    async def create(i: int) -> None:
        async with semaphore:
            await api.create(namespace, f"m{i}", urls[i % len(urls)])

    await asyncio.gather(*(create(i) for i in range(size)))
    created = time.monotonic() - began
    await api.wait_ready(namespace, size, limit - created)
    return created, time.monotonic() - began


def run(args: argparse.Namespace) -> None:
    """Set up the control plane, the servers and the operator (blocking), then measure."""
    with contextlib.ExitStack() as stack:
        plane = stack.enter_context(ControlPlane())
        env = plane.env()
        for verb in (["apply", "--server-side"], ["wait", "--for=condition=Established"]):
            subprocess.run(
                [kubectl_path(), *verb, "-f", str(REPO / "crds")],
                env=env,
                check=True,
                capture_output=True,
            )
        urls = [stack.enter_context(peers.server_everything()) for _ in range(2)]
        urls.append(stack.enter_context(peers.mcp_server_time()))
        log = stack.enter_context(open(args.log, "wb"))
        metrics_port = peers.free_port()
        args.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        command = [
            sys.executable,
            "-m",
            "mcp_operator",
            "run",
            "--liveness=none",
            f"--metrics={args.metrics_url}",
            "--no-leader-election",  # the only operator on this control plane
            "--loopback-destinations=allowed",  # the MCP servers run on this machine
            # Not the floor's namespaces: the floor is measured with no operator involved.
            "--namespace=single",
            *(f"--namespace=fleet-{size}" for size in args.sizes),
        ]
        if args.trace_memory:
            tracer = str(REPO / "bench" / "trace_memory.py")
            command = [sys.executable, tracer, args.trace_memory, *command[1:]]
        if args.profile:
            spy = str(Path(sys.executable).with_name("py-spy"))
            command = [spy, "record", "--format", "raw", "-o", args.profile, "--", *command]
        operator = subprocess.Popen(
            command,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        # py-spy writes its profile on SIGINT; the operator stops on SIGTERM.
        stop = signal.SIGINT if args.profile else signal.SIGTERM
        stack.callback(lambda: (os.killpg(operator.pid, stop), operator.wait(30)))
        time.sleep(2)  # the operator's watches start
        rows, latencies = asyncio.run(measure(args, Api(plane), urls, operator.pid))
        print(f"\nkube-apiserver {plane.version.get('gitVersion')}, {os.cpu_count()} CPUs\n")
        width = max(len(r[0]) for r in rows)
        print(f"| {'measure'.ljust(width)} | value |")
        print(f"| {'-' * width} | ----- |")
        for name, value in rows:
            print(f"| {name.ljust(width)} | {value} |")
        print(json.dumps({"latencies_ms": [round(x * 1000) for x in latencies]}))


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


async def trace_memory(pid: int, output: Path) -> None:
    """Have the operator (under bench/trace_memory.py) write where its memory is held."""
    before = _size(output)
    os.kill(pid, signal.SIGUSR1)
    for _ in range(600):  # a snapshot of a large heap takes a while
        await asyncio.sleep(1)
        if _size(output) > before:
            await asyncio.sleep(2)  # the rest of the write
            return


async def measure(
    args: argparse.Namespace, api: Api, urls: list[str], operator_pid: int
) -> tuple[list[tuple[str, str]], list[float]]:
    rows: list[tuple[str, str]] = []
    # The machine may be shared: the load average says how much the numbers can be trusted.
    load_before = os.getloadavg()[0]
    latencies = await single_latencies(api, urls, args.single)
    p50 = statistics.median(latencies)
    p95 = statistics.quantiles(latencies, n=20)[18] if len(latencies) >= 2 else p50
    rows.append(
        ("single server create→Ready p50 / p95", f"{p50 * 1000:.0f} ms / {p95 * 1000:.0f} ms")
    )
    costs: list[float] = []
    scraper = (
        asyncio.create_task(scraping(args.metrics_url, args.scrape, costs)) if args.scrape else None
    )
    for size in args.sizes:
        shares = CpuShares()
        shares.start()
        base = await floor(api, urls, size, args.floor_concurrency)
        rows.append((f"{size} servers: floor (create + status + Event)", f"{base:.1f} s"))
        rows.append((f"{size} servers: floor, CPU of one core by process", shares.shares()))
        cpu_before = cpu_seconds(operator_pid)
        requests_before = await api_requests(api)
        shares.start()
        created, total = await fleet(api, urls, size)
        cpu = cpu_seconds(operator_pid) - cpu_before
        rows.append((f"{size} servers: fleet, CPU of one core by process", shares.shares()))
        rows.append(
            (
                f"{size} servers: API requests per server (all clients)",
                per_server(requests_before, await api_requests(api), size),
            )
        )
        rows.append((f"{size} servers: created / all Ready", f"{created:.1f} s / {total:.1f} s"))
        rows.append((f"{size} servers: operator / floor", f"{total / base:.2f}x"))
        rows.append((f"operator's means after {size}", await mean_seconds(args.metrics_url)))
        rows.append(
            (
                f"{size} servers: operator CPU (per server)",
                f"{cpu:.1f} s ({cpu / size * 1000:.1f} ms)",
            )
        )
        if args.trace_memory:
            await trace_memory(operator_pid, Path(args.trace_memory))
        current = rss_mib(operator_pid, "VmRSS")
        rows.append((f"operator RSS after {size} (current)", f"{current:.0f} MiB"))
    if scraper is not None:
        scraper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await scraper
        mean = statistics.mean(costs) * 1000 if costs else float("nan")
        rows.append(
            (
                f"/metrics scrapes (every {args.scrape:g} s): count / mean",
                f"{len(costs)} / {mean:.1f} ms",
            )
        )
    rows.append(("operator peak RSS (VmHWM)", f"{rss_mib(operator_pid):.0f} MiB"))
    load_after = os.getloadavg()[0]
    rows.append(("load average (1 min) before / after", f"{load_before:.1f} / {load_after:.1f}"))
    await api.client.aclose()
    return rows, latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--single", type=int, default=20)
    parser.add_argument("--log", default="/tmp/fleet-bench-operator.log")
    parser.add_argument(
        "--scrape", type=float, default=0.0, help="read /metrics every SECONDS during the runs"
    )
    parser.add_argument(
        "--floor-concurrency",
        type=int,
        default=50,
        help="concurrent requests of the floor's client (the operator's own pool: 50)",
    )
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="record the operator with py-spy (raw format) into FILE (RSS rows then show py-spy)",
    )
    parser.add_argument(
        "--trace-memory",
        metavar="FILE",
        help="run the operator under bench/trace_memory.py and write where its memory is held "
        "after each size into FILE (slows it down several times)",
    )
    run(parser.parse_args())


if __name__ == "__main__":
    main()
