"""Benchmark: how long one large result in PII redact mode stalls the bridge's event loop.

The pipeline (:class:`mcp_operator.bridge.pipeline.CallPipeline`) calls an upstream that
answers at once with an ``--mib`` MiB text result full of addresses and phone numbers, under
``pii.results: redact``. Meanwhile a ticker on the same loop sleeps 5 ms at a time and records
the longest gap between its wake-ups: how long any other session's call would have waited.
Twice: with the PII hook as it is (a large value is scanned in a worker thread, and only up to
the scan budget), and with its ``offload`` answer forced to false (the scan on the loop, as
the bridge did before). Run it once on a quiet machine:
``.venv/bin/python bench/bridge_pii_stall.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Mapping
from typing import Any

from mcp_operator.api.bridge import BridgeConfig, UpstreamServer
from mcp_operator.bridge.catalog import build_catalog
from mcp_operator.bridge.core import SystemClock
from mcp_operator.bridge.hooks import PiiHook
from mcp_operator.bridge.pii import PiiScanner
from mcp_operator.bridge.pii_detectors import builtin_detectors
from mcp_operator.bridge.pipeline import CallPipeline

LINE = (
    "Order 12345 shipped to alice@example.com on 2024-01-15, tracking 1Z999AA10123456784, "
    "call 415-555-0132.\n"
)


class OnTheLoop(PiiHook):
    """The PII hook as it was: never offloaded."""

    def offload(self, value: Any) -> bool:
        return False


async def measure(hook: PiiHook, result: dict[str, Any]) -> tuple[float, float, bool]:
    config = BridgeConfig.model_validate(
        {
            "run": {"name": "r", "namespace": "default"},
            "servers": [
                {
                    "name": "s",
                    "namespace": "default",
                    "url": "http://s:8080/mcp",
                    "prefix": "s",
                    "policy": {"pii": {"results": "redact"}, "timeoutSeconds": 600},
                }
            ],
        }
    )

    async def upstream(
        server: UpstreamServer, tool: str, arguments: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        return result

    tools = {"default/s": [{"name": "read", "inputSchema": {"type": "object"}}]}
    pipeline = CallPipeline(
        config,
        build_catalog(config.servers, tools),
        upstream=upstream,
        clock=SystemClock(),
        random=lambda: 0.5,
        hooks=[hook],
    )
    worst = 0.0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal worst
        last = time.monotonic()
        while not done.is_set():
            await asyncio.sleep(0.005)
            now = time.monotonic()
            worst = max(worst, now - last)
            last = now

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    started = time.monotonic()
    report = await pipeline.call("s_read", {})
    took = time.monotonic() - started
    done.set()
    await ticking
    return took, worst, "results" in report.audit.pii_unscanned


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mib", type=int, default=8)
    args = parser.parse_args()
    size = args.mib * 1024 * 1024
    text = (LINE * (size // len(LINE) + 1))[:size]
    result = {"content": [{"type": "text", "text": text}], "isError": False}
    scanner = PiiScanner(builtin_detectors())
    for name, hook in (("on the loop", OnTheLoop(scanner)), ("off the loop", PiiHook(scanner))):
        took, worst, partial = asyncio.run(measure(hook, result))
        print(
            f"{name:13} call {took:6.2f} s, longest event-loop stall {worst * 1000:8.1f} ms, "
            f"scanned {'in part' if partial else 'whole'} ({scanner.max_chars} chars budget)"
        )


if __name__ == "__main__":
    main()
