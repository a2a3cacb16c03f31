"""One status probe in a fresh process, and how much its resident memory grew.

``python tests/support/probe_peak.py URL`` prints one JSON line: ``grown`` (bytes
the process's peak RSS grew by during the probe, after every import was done),
and ``tools`` or ``reason`` and ``message``. RSS, not Python allocations: the
SDK's validation allocates in pydantic-core, which ``tracemalloc`` does not see.
``URL N`` runs N probes of it at once (as the operator's probe slots do) and adds
``peak`` (the process's peak RSS in bytes) and ``reasons`` (how many ended how).
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
from typing import Any

from mcp_operator.controller.mcpserver.report import STATUS_KEEP
from mcp_operator.mcp.discovery import discover
from mcp_operator.mcp.errors import ProbeError
from mcp_operator.mcp.target import ProbeTarget


def _peak_rss() -> int:
    """This process's peak RSS, of its own memory alone: ``VmHWM`` of /proc/self/status.
    Not ``getrusage``'s ``ru_maxrss``, which Linux carries over an ``exec``: a child that
    ``subprocess`` started from a large test process would report the parent's peak."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # not Linux


async def _probes(target: ProbeTarget, count: int) -> list[str]:
    async def one() -> str:
        try:
            await discover(target, STATUS_KEEP)
        except ProbeError as error:
            return error.reason
        return "Probed"

    return list(await asyncio.gather(*(one() for _ in range(count))))


def main(url: str, count: int = 1) -> int:
    try:  # the egress policy (loopback refused by default) is newer than the memory bounds
        from mcp_operator.net.egress import EgressPolicy

        options: dict[str, Any] = {"egress": EgressPolicy(allow_loopback=True)}
    except ImportError:
        options = {}
    before = _peak_rss()
    result: dict[str, object] = {}
    if count > 1:
        reasons = asyncio.run(_probes(ProbeTarget(url, timeout_seconds=60, **options), count))
        result["reasons"] = {reason: reasons.count(reason) for reason in sorted(set(reasons))}
        result["grown"] = _peak_rss() - before
        result["peak"] = _peak_rss()
        print(json.dumps(result))
        return 0
    try:
        found = asyncio.run(discover(ProbeTarget(url, timeout_seconds=60, **options), STATUS_KEEP))
        result["tools"] = len(found.tools)
    except ProbeError as error:
        result.update(reason=error.reason, message=error.message)
    result["grown"] = _peak_rss() - before
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], *(int(arg) for arg in sys.argv[2:3])))
