"""Run a Python module with ``tracemalloc`` on, writing where its memory is held on SIGUSR1.

    python bench/trace_memory.py OUTPUT -m mcp_operator run ...

Each SIGUSR1 appends to OUTPUT the 25 biggest holders of memory still allocated,
grouped by the innermost frames of the allocating code (``--frames``), with the
total. Tracing slows the program down (several times): for finding what a
program keeps, never for timing it. Used by ``bench/fleet_bench.py
--trace-memory``.
"""

from __future__ import annotations

import runpy
import signal
import sys
import time
import tracemalloc
from pathlib import Path
from types import FrameType

FRAMES = 6


def _dump(output: Path) -> None:
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    stats = snapshot.statistics("traceback")
    total = sum(stat.size for stat in stats)
    with output.open("a") as out:
        out.write(f"=== {time.strftime('%H:%M:%S')}: {total / 2**20:.1f} MiB traced\n")
        for stat in stats[:25]:
            out.write(f"{stat.size / 2**20:8.2f} MiB {stat.count:9d} blocks\n")
            for line in stat.traceback.format(most_recent_first=True):
                out.write(f"    {line}\n")


def main() -> None:
    output = Path(sys.argv[1])
    if sys.argv[2] != "-m":
        raise SystemExit("usage: trace_memory.py OUTPUT -m MODULE [ARGS...]")
    module = sys.argv[3]
    sys.argv = [module, *sys.argv[4:]]
    tracemalloc.start(FRAMES)

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        _dump(output)

    signal.signal(signal.SIGUSR1, on_signal)
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
