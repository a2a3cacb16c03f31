"""Server-sent events as MCP carries them: the one SSE reader of the probe and the bridge.

Pure framing, no I/O of its own: :func:`split_events` cuts complete events off a buffer
(any of the three line breaks SSE allows), :func:`event_fields` reads one event's type and
data, and :func:`messages` turns a stream of byte chunks into the JSON-RPC messages it
carries (the data of each ``message`` event; events without data, such as a priming event
that only sets an id, are skipped; a last event without its blank line is dropped, as SSE
says); :func:`events` gives every event's type with its data (the legacy HTTP+SSE
transport's ``endpoint`` event). A pending event larger than its bound is an error, so a
stream that never ends an event cannot grow without limit. Cutting tool lists inside events is
:mod:`~mcp_operator.mcp.pages`' job; what a message means, the session's
(:mod:`~mcp_operator.mcp.session`).
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterable, Callable

_LINE_BREAK = rb"(?:\r\n|\r(?!\n)|\n)"
EVENT_END = re.compile(_LINE_BREAK + _LINE_BREAK)
LINES = re.compile(_LINE_BREAK)


class EventTooLarge(Exception):
    """One event grew past its bound before it ended."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"an event of the stream grew past {limit} bytes")
        self.limit = limit


def split_events(data: bytes) -> tuple[list[bytes], bytes]:
    """The complete SSE events at the start of ``data`` (each with its ending blank line), and
    the bytes after them."""
    events: list[bytes] = []
    start = 0
    for end in EVENT_END.finditer(data):
        events.append(data[start : end.end()])
        start = end.end()
    return events, data[start:]


def event_fields(event: bytes) -> tuple[str | None, bytes | None]:
    """An SSE event's type (its ``event:`` field, ``None`` when absent) and its data (the
    ``data:`` lines joined by line feeds, ``None`` when it has none)."""
    kind: str | None = None
    data: list[bytes] = []
    for line in LINES.split(event):
        if line.startswith(b"data:"):
            data.append(line[5:].removeprefix(b" "))
        elif line.startswith(b"event:"):
            kind = line[6:].strip().decode("utf-8", "replace")
    return kind, (b"\n".join(data) if data else None)


def event_id(event: bytes) -> str | None:
    """An SSE event's ``id:`` field, ``None`` when it has none."""
    for line in LINES.split(event):
        if line.startswith(b"id:"):
            return line[3:].removeprefix(b" ").decode("utf-8", "replace")
    return None


def event_retry(event: bytes) -> int | None:
    """An SSE event's ``retry:`` field (milliseconds, ASCII digits only, as SSE says), ``None``
    when it has none or another value."""
    for line in LINES.split(event):
        if line.startswith(b"retry:"):
            value = line[6:].removeprefix(b" ")
            return int(value) if value.isdigit() and len(value) <= 9 else None
    return None


def _read(
    event: bytes,
    on_id: Callable[[str], None] | None,
    on_retry: Callable[[int], None] | None,
) -> tuple[str | None, bytes] | None:
    """One complete event's type and data (``None`` when it has no data), its id and retry
    told first."""
    if on_id is not None and (name := event_id(event)) is not None:
        on_id(name)
    if on_retry is not None and (wait := event_retry(event)) is not None:
        on_retry(wait)
    kind, data = event_fields(event)
    return (kind, data) if data is not None and data.strip() else None


async def events(
    chunks: AsyncIterable[bytes],
    max_event_bytes: int | None = None,
    on_id: Callable[[str], None] | None = None,
    on_retry: Callable[[int], None] | None = None,
) -> AsyncGenerator[tuple[str | None, bytes], None]:
    """The type and data of every event of the stream that has data, in order (undecoded),
    as :func:`messages` reads them (the same bounds, callbacks and closing)."""
    rest = b""
    iterator = aiter(chunks)
    try:
        async for chunk in iterator:
            found, rest = split_events(rest + chunk)
            if max_event_bytes is not None and len(rest) > max_event_bytes:
                raise EventTooLarge(max_event_bytes)
            for event in found:
                read = _read(event, on_id, on_retry)
                if read is not None:
                    yield read
    finally:
        close = getattr(iterator, "aclose", None)
        if close is not None:
            await close()


async def messages(
    chunks: AsyncIterable[bytes],
    max_event_bytes: int | None = None,
    on_id: Callable[[str], None] | None = None,
    on_retry: Callable[[int], None] | None = None,
) -> AsyncGenerator[bytes, None]:
    """The data of every ``message`` event of the stream, in order (undecoded JSON). Closing
    this reader closes the chunks' iterator too (a bounded body gives back what it holds).
    ``on_id`` is told each event's id (priming events included), before its data is
    yielded: the cursor a reconnect sends as ``Last-Event-ID``; ``on_retry`` each ``retry``
    the server asks a reconnect to wait (milliseconds)."""
    reader = events(chunks, max_event_bytes, on_id, on_retry)
    try:
        async for kind, data in reader:
            if kind in (None, "message"):
                yield data
    finally:
        await reader.aclose()
