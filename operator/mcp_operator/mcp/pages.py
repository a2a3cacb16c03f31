"""``tools/list`` pages cut down before the SDK validates them: :class:`Keep` and the slimming.

The SDK turns a page into pydantic objects at about sixty times its size in
bytes, and only then could a caller count or cut its tools. This module works
on the raw JSON instead, as pure functions (no I/O): :func:`slim_body` (a JSON
body) and :class:`SseSlimmer` (a stream of SSE events) count the tools of every
``tools/list`` result against a :class:`ToolCount` (``TooManyTools`` before any
SDK object exists) and keep of each tool only what the caller's :class:`Keep`
asks for; everything else passes through unchanged. Reading the bytes and
bounding them is :mod:`~mcp_operator.mcp.probe_bodies`' job.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mcp_operator.mcp.bounds import MAX_ITEMS
from mcp_operator.mcp.definitions import DIGEST_META, definition_digest
from mcp_operator.mcp.errors import ProbeError
from mcp_operator.mcp.naming import MAX_TOOL_NAME_CHARS, cut
from mcp_operator.mcp.sse import EVENT_END, LINES, event_fields

MAX_DISCOVERED_TOOLS = MAX_ITEMS
"""A server listing more tools than this fails the probe with ``TooManyTools``."""

BOOLEAN_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
"""The annotations a cut tool keeps besides ``title``."""

EMPTY_INPUT_SCHEMA: dict[str, Any] = {"type": "object"}
"""What a tool's ``inputSchema`` becomes when the caller does not keep it."""


@dataclass(frozen=True)
class Keep:
    """What a discovery keeps of each tool; the default keeps every tool whole."""

    description_chars: int | None = None
    """Descriptions are cut to this many characters on arrival (``None``: whole)."""
    title_chars: int | None = None
    """Titles (``title`` and ``annotations.title``) are cut likewise."""
    input_schema: bool = True
    """Whether ``inputSchema`` is kept (an empty object when not)."""
    digests: bool = False
    """Whether each tool's :func:`~mcp_operator.mcp.definitions.definition_digest` is taken
    on arrival, over the whole definition, and kept in its ``_meta``
    (:data:`~mcp_operator.mcp.definitions.DIGEST_META`) for the discovery to read."""

    @property
    def whole(self) -> bool:
        return (
            self.description_chars is None
            and self.title_chars is None
            and self.input_schema
            and not self.digests
        )


class ToolCount:
    """Tools seen in ``tools/list`` results so far; more than ``limit`` fails the probe."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.seen = 0

    def add(self, count: int) -> None:
        self.seen += count
        if self.seen > self.limit:
            raise ProbeError(
                "TooManyTools",
                f"the server lists more than {self.limit} tools ({self.seen} so far)",
            )


def _cut(text: Any, limit: int | None) -> Any:
    return cut(text, limit) if isinstance(text, str) and limit is not None else text


def slim_tool(tool: Any, keep: Keep) -> Any:
    """One tool as ``keep`` asks: a name cut one past the valid length, text cut, and when
    the schema is not kept, only the fields a status shows."""
    if not isinstance(tool, dict):
        return tool
    name = tool.get("name")
    if isinstance(name, str):
        name = name[: MAX_TOOL_NAME_CHARS + 1]
    if keep.input_schema:
        slim = dict(tool, name=name)
    else:
        slim = {"name": name, "inputSchema": EMPTY_INPUT_SCHEMA}
        for key in ("description", "title"):
            if key in tool:
                slim[key] = tool[key]
        annotations = tool.get("annotations")
        if isinstance(annotations, dict):
            slim["annotations"] = {
                key: value
                for key, value in annotations.items()
                if key == "title" or (key in BOOLEAN_HINTS and isinstance(value, bool))
            }
    slim["description"] = _cut(slim.get("description"), keep.description_chars)
    if slim["description"] is None:
        del slim["description"]
    if keep.digests:
        meta = slim.get("_meta")
        slim["_meta"] = {**(meta if isinstance(meta, dict) else {})}
        slim["_meta"][DIGEST_META] = definition_digest(tool)
    if "title" in slim:
        slim["title"] = _cut(slim["title"], keep.title_chars)
    if isinstance(slim.get("annotations"), dict) and "title" in slim["annotations"]:
        slim["annotations"] = dict(
            slim["annotations"], title=_cut(slim["annotations"]["title"], keep.title_chars)
        )
    return slim


def slim_message(message: Any, keep: Keep, count: ToolCount) -> tuple[Any, bool]:
    """A JSON-RPC message with its ``result.tools`` counted and cut; ``True`` if changed."""
    result = message.get("result") if isinstance(message, dict) else None
    tools = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(tools, list) or not isinstance(result, dict):
        return message, False
    count.add(len(tools))
    if keep.whole:
        return message, False
    slim_result = dict(result, tools=[slim_tool(tool, keep) for tool in tools])
    return dict(message, result=slim_result), True


def slim_body(body: bytes, keep: Keep, count: ToolCount) -> bytes:
    """A JSON body (one message or a batch) with its tool lists counted and cut.

    A body that is not JSON passes through as it is: the SDK says what is wrong with it.
    """
    try:
        parsed = json.loads(body)
    except ValueError:
        return body
    if isinstance(parsed, list):
        slimmed = [slim_message(item, keep, count) for item in parsed]
        if not any(changed for _, changed in slimmed):
            return body
        return json.dumps([item for item, _ in slimmed], ensure_ascii=False).encode()
    message, changed = slim_message(parsed, keep, count)
    return json.dumps(message, ensure_ascii=False).encode() if changed else body


class SseSlimmer:
    """Cuts the ``tools/list`` results inside a stream of SSE events, one event at a time.

    :meth:`feed` takes the next bytes and returns what can be passed on: complete
    events, each rewritten if its data is a tool list. ``pending`` is how many
    bytes wait for the end of their event (the caller bounds it).
    """

    def __init__(self, keep: Keep, count: ToolCount) -> None:
        self._keep = keep
        self._count = count
        self._buffer = b""

    @property
    def pending(self) -> int:
        return len(self._buffer)

    def feed(self, chunk: bytes, *, final: bool = False) -> bytes:
        self._buffer += chunk
        out: list[bytes] = []
        while True:
            # A lone \r at the end may be the first half of \r\n: wait for the next byte.
            waits = self._buffer.endswith(b"\r") and not final
            search_end = len(self._buffer) - (1 if waits else 0)
            end = EVENT_END.search(self._buffer, 0, search_end)
            if end is None:
                break
            event, self._buffer = self._buffer[: end.end()], self._buffer[end.end() :]
            out.append(self._event(event))
        return b"".join(out)

    def flush(self) -> bytes:
        """What is left when the stream ends: events ended by a last ``\r``, cut like the
        others, then an unterminated event, passed on unchanged (SSE discards it)."""
        ready = self.feed(b"", final=True)
        rest, self._buffer = self._buffer, b""
        return ready + rest

    def _event(self, event: bytes) -> bytes:
        _, body = event_fields(event)
        if body is None:
            return event
        slimmed = slim_body(body, self._keep, self._count)
        if slimmed is body:
            return event
        lines = LINES.split(event)
        kept = [line for line in lines if line and not line.startswith(b"data:")]
        return b"".join(line + b"\n" for line in kept) + b"data: " + slimmed + b"\n\n"
