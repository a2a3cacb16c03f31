"""A server on the official SDK that asks its client things mid-call, and records what it saw.

``python tests/support/asking_server.py PORT RECORD_FILE`` serves both eras over the SDK's
Streamable HTTP transport. Its tools ask through the SDK's resolvers (``Resolve`` with
``Sample``, ``Elicit``, ``ListRoots``), so the SDK picks the era's way: a request on the
call's stream for a legacy client, an ``input_required`` result for a 2026-07-28 one.

- ``sample(marker)``: samples the client's LLM with ``say <marker>``; returns its text;
- ``elicit(marker)``: asks the user for a ``word``; returns it;
- ``roots()``: the client's roots' URIs, joined by commas;
- ``flood(marker, count)``: sends ``count`` sampling requests about the call at once;
  returns (and records) how many were ``answered``, ``refused`` or left ``unanswered``;
- ``late(marker)``: returns at once, then asks about the ended call; records
  ``late <marker> answered|refused|unanswered``;
- ``slow(marker, seconds)``: reports progress every 0.1 s for ``seconds``; appends to the
  record file ``token <marker> <the progress token it saw>`` first, then
  ``cancelled <marker>`` when its call is cancelled or ``finished <marker>``.

No handler of the bridge's is involved: what reaches the tools is what the SDK made of it.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, ListRoots, Resolve, Sample
from mcp_types import CreateMessageResult, ListRootsResult, SamplingMessage, TextContent
from pydantic import BaseModel

server = MCPServer("asking")
RECORD = Path(sys.argv[2]) if len(sys.argv) > 2 else None
LATE: set[asyncio.Task[None]] = set()


def record(line: str) -> None:
    if RECORD is not None:
        with RECORD.open("a", encoding="utf-8") as sink:
            sink.write(line + "\n")


class Word(BaseModel):
    word: str


def ask_llm(marker: str) -> Sample:
    text = TextContent(type="text", text=f"say {marker}")
    return Sample([SamplingMessage(role="user", content=text)], max_tokens=16)


def ask_user(marker: str) -> Elicit[Word]:
    return Elicit(f"give a word for {marker}", Word)


def ask_roots() -> ListRoots:
    return ListRoots()


@server.tool()
async def sample(marker: str, reply: Annotated[CreateMessageResult, Resolve(ask_llm)]) -> str:
    """Samples the client's LLM."""
    content = reply.content
    return content.text if isinstance(content, TextContent) else "?"


@server.tool()
async def elicit(marker: str, answer: Annotated[Word, Resolve(ask_user)]) -> str:
    """Asks the user for a word."""
    return answer.word


@server.tool()
async def roots(found: Annotated[ListRootsResult, Resolve(ask_roots)]) -> str:
    """The client's roots."""
    return ",".join(str(root.uri) for root in found.roots)


@server.tool()
async def slow(marker: str, ctx: Context, seconds: float = 30.0) -> str:
    """Reports progress until done or cancelled."""
    meta = ctx.request_context.meta
    token = None
    if meta is not None:  # the SDK keeps it under the field's name or its wire alias
        token = meta.get("progress_token", meta.get("progressToken"))
    record(f"token {marker} {token}")
    steps = int(seconds * 10)
    try:
        for step in range(steps):
            await ctx.report_progress(step + 1, steps)
            await anyio.sleep(0.1)
    except anyio.get_cancelled_exc_class():
        record(f"cancelled {marker}")
        raise
    record(f"finished {marker}")
    return f"slept {marker}"


def _prompt(text: str) -> list[SamplingMessage]:
    return [SamplingMessage(role="user", content=TextContent(type="text", text=text))]


async def _sample_once(ctx: Context, text: str, request_id: str, seconds: float) -> str:
    """One sampling request about call ``request_id``: ``answered``, ``refused`` (the client
    answered with an error) or ``unanswered`` within ``seconds``."""
    with anyio.move_on_after(seconds):
        try:
            await ctx.request_context.session.create_message(
                _prompt(text), max_tokens=4, related_request_id=request_id
            )
        except Exception:
            return "refused"
        return "answered"
    return "unanswered"


@server.tool()
async def flood(marker: str, count: int, ctx: Context) -> str:
    """Sends ``count`` sampling requests about this call at once (legacy era only)."""
    outcomes: list[str] = []

    async def one(index: int) -> None:
        outcomes.append(await _sample_once(ctx, f"flood {marker} {index}", ctx.request_id, 5.0))

    async with anyio.create_task_group() as group:
        for index in range(count):
            group.start_soon(one, index)
    counts = {kind: outcomes.count(kind) for kind in ("answered", "refused", "unanswered")}
    record(f"flood {marker} " + " ".join(f"{k}={v}" for k, v in counts.items()))
    return " ".join(f"{k}={v}" for k, v in counts.items())


@server.tool()
async def late(marker: str, ctx: Context) -> str:
    """Returns at once, then asks about the call that has ended (legacy era only)."""
    request_id = ctx.request_id

    async def after() -> None:
        await anyio.sleep(0.3)
        outcome = await _sample_once(ctx, f"late {marker}", request_id, 3.0)
        record(f"late {marker} {outcome}")

    task = asyncio.get_running_loop().create_task(after())
    LATE.add(task)
    task.add_done_callback(LATE.discard)
    return f"ended {marker}"


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
