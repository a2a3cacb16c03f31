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

``--race`` (with ``--poll``) writes the second step exactly inside the SDK's resume window
(mcp 2.3.0, ``streamable_http.py``): a ``GET`` with ``Last-Event-ID`` replays the store
(line 964), then writes the resumed stream's priming event (975-977), and only then takes
the stream's live events (980); the router stores every event (1092) but hands it to a
stream only if one is registered (1095), so an event written in between is stored, not
replayed, and never sent. The store holds that priming write until the tool wrote its
next event, which the tool writes as soon as the priming write began, instead of after
``pause`` — an event store with real I/O (a database round-trip) has the same window.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

POLLING = "--poll" in sys.argv
RACE = "--race" in sys.argv
RACE_SECONDS = 10.0
"""The longest a held priming write waits for the tool's event."""


class MemoryEventStore(EventStore):
    """Every event, in order; ids ``<n>``. With ``--race`` the priming write of a resumed
    stream (its second priming event) sets :attr:`resuming` and waits for the next event
    written before it takes its own id."""

    def __init__(self) -> None:
        self.events: list[tuple[EventId, StreamId, JSONRPCMessage | None]] = []
        self._ids = itertools.count(1)
        self._primed: set[StreamId] = set()
        self.resuming = asyncio.Event()
        self._written = asyncio.Event()

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        if message is not None:
            self._written.set()
        elif RACE and stream_id in self._primed:  # a resume, between replay and live events
            self._written.clear()
            self.resuming.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._written.wait(), RACE_SECONDS)
        self._primed.add(stream_id)
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
store = MemoryEventStore()


@server.tool(description="Reports progress steps times, pause seconds apart, then answers")
async def slow(steps: int, pause: float, ctx: Context) -> str:
    with Path(sys.argv[1]).open("a", encoding="utf-8") as runs:  # noqa: ASYNC230 - one line
        runs.write("started\n")
    for step in range(1, steps + 1):
        if RACE and step == 2:
            await store.resuming.wait()  # the client is back: the SDK is resuming the stream
        else:
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
            event_store=store,
            retry_interval=int(retry),
        )
    else:
        server.run("stdio")
