"""A server on the official SDK that asks its client things mid-call, and records what it saw.

``python tests/support/asking_server.py PORT RECORD_FILE`` serves both eras over the SDK's
Streamable HTTP transport. Its tools ask through the SDK's resolvers (``Resolve`` with
``Sample``, ``Elicit``, ``ListRoots``), so the SDK picks the era's way: a request on the
call's stream for a legacy client, an ``input_required`` result for a 2026-07-28 one.

- ``sample(marker)``: samples the client's LLM with ``say <marker>``; returns its text;
- ``elicit(marker)``: asks the user for a ``word``; returns it;
- ``roots()``: the client's roots' URIs, joined by commas;
- ``slow(marker, seconds)``: reports progress every 0.1 s for ``seconds``; appends to the
  record file ``token <marker> <the progress token it saw>`` first, then
  ``cancelled <marker>`` when its call is cancelled or ``finished <marker>``.

No handler of the bridge's is involved: what reaches the tools is what the SDK made of it.
"""

from __future__ import annotations

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
    token = getattr(meta, "progress_token", None) if meta is not None else None
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


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
