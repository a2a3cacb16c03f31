"""An MCP server on the official SDK with one slow tool that streams progress.

Run as ``python tests/support/slow_server.py RUNS_FILE`` (stdio), or
``python tests/support/slow_server.py RUNS_FILE --poll PORT RETRY_MS`` (Streamable HTTP
that *polls*: 2025-11-25's "Resumability and Redelivery" with the SDK's own machinery: an
in-memory event store gives every SSE event an id and replays a stream after a
``Last-Event-ID``, and the priming event asks clients to wait ``RETRY_MS`` before
reconnecting).

Its tool ``slow(steps, pause)`` appends one line to ``RUNS_FILE`` as it starts (so a test
can count how often it really ran), then reports progress ``1 … steps`` of ``steps``,
``pause`` seconds apart — when polling, closing the call's SSE stream on purpose after the
first (``close_sse_stream``: the client must reconnect to hear the rest) — and answers
``done after <steps> steps``.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

POLLING = "--poll" in sys.argv


class MemoryEventStore(EventStore):
    """Every event, in order; ids ``<n>``."""

    def __init__(self) -> None:
        self.events: list[tuple[EventId, StreamId, JSONRPCMessage | None]] = []
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = str(next(self._ids))
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        found = [i for i, (event_id, _, _) in enumerate(self.events) if event_id == last_event_id]
        if not found:
            return None
        stream_id = self.events[found[0]][1]
        for event_id, stream, message in self.events[found[0] + 1 :]:
            if stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id


server = MCPServer("slow")


@server.tool(description="Reports progress steps times, pause seconds apart, then answers")
async def slow(steps: int, pause: float, ctx: Context) -> str:
    with Path(sys.argv[1]).open("a", encoding="utf-8") as runs:  # noqa: ASYNC230 - one line
        runs.write("started\n")
    for step in range(1, steps + 1):
        await asyncio.sleep(pause)
        await ctx.report_progress(step, steps)
        if POLLING and step == 1:
            await ctx.close_sse_stream()  # the client polls for the rest
    return f"done after {steps} steps"


if __name__ == "__main__":
    if POLLING:
        port, retry = sys.argv[sys.argv.index("--poll") + 1 :][:2]
        server.run(
            "streamable-http",
            host="127.0.0.1",
            port=int(port),
            event_store=MemoryEventStore(),
            retry_interval=int(retry),
        )
    else:
        server.run("stdio")
