"""A stdio MCP server on the official SDK with one slow tool that streams progress.

Run as ``python tests/support/slow_server.py RUNS_FILE``. Its tool ``slow(steps, pause)``
appends one line to ``RUNS_FILE`` as it starts (so a test can count how often it really
ran), then reports progress ``1 … steps`` of ``steps``, ``pause`` seconds apart, and answers
``done after <steps> steps``.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("slow")


@server.tool(description="Reports progress steps times, pause seconds apart, then answers")
async def slow(steps: int, pause: float, ctx: Context) -> str:
    with Path(sys.argv[1]).open("a", encoding="utf-8") as runs:  # noqa: ASYNC230 - one line
        runs.write("started\n")
    for step in range(1, steps + 1):
        await asyncio.sleep(pause)
        await ctx.report_progress(step, steps)
    return f"done after {steps} steps"


if __name__ == "__main__":
    server.run("stdio")
