"""The bounds of an MCP session: bytes per answer, pages and items per listing.

This module owns the readers that fail an answer past its byte bound (:func:`capped`) and
the one pagination rule (:class:`Paginator`: a listing that runs past :data:`MAX_PAGES`
pages or :data:`MAX_ITEMS` items, or repeats a cursor, fails naming the bound, never as a
shortened list). Pure but for reading the body it is given.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncGenerator, AsyncIterable, Callable
from typing import Literal

from mcp_operator.mcp.failures import McpFailure
from mcp_operator.net.http1 import Http1Response

MAX_PAGES = 100
"""A listing longer than this many pages fails with ``TooManyPages``."""
MAX_ITEMS = 5000
"""A listing of more items than this fails with ``TooManyTools``."""
BodyReader = Callable[[Http1Response, Literal["json", "sse"]], AsyncIterable[bytes]]
"""How a caller reads an answer's body (``json`` or ``sse``): bounded, counted, cut."""


def capped(limit: int, name: str) -> Capped:
    """A reader that fails an answer past ``limit`` bytes (up to the response it wanted)."""
    return Capped(limit, name)


class Capped:
    """:func:`capped`'s reader. Its ``limit`` lets a session take a JSON answer that arrived
    whole with its head as it is, without the reading loop
    (:meth:`~mcp_operator.mcp.session_exchange.SessionExchange._reply`)."""

    __slots__ = ("limit", "name")

    def __init__(self, limit: int, name: str) -> None:
        self.limit = limit
        self.name = name

    def refuse(self) -> McpFailure:
        return McpFailure("limit", f"{self.name} sent more than {self.limit} bytes")

    async def __call__(self, answer: Http1Response, _kind: str) -> AsyncGenerator[bytes, None]:
        limit = self.limit
        length = answer.headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            raise self.refuse()
        received = 0
        # Closed here, not left to the collector: an async generator dropped unfinished (an
        # SSE answer is left once its response is read) makes the event loop schedule its
        # closing from the finalizer, through the thread-safe wake-up, on every call.
        async with contextlib.aclosing(answer.aiter_bytes()) as chunks:
            async for chunk in chunks:
                received += len(chunk)
                if received > limit:
                    raise self.refuse()
                yield chunk


class Paginator:
    """The cursor walk of a listing, without I/O: the one pagination rule.

    After each page call :meth:`advance` with the page's ``nextCursor`` and its number of
    items; it returns the cursor for the next request, or ``None`` when the listing is
    complete. Only an absent cursor ends the walk: ``""`` is a real cursor (2026-07-28 allows
    it, and no era gives it another meaning), so callers must test ``is None``. A bound
    passed is an :class:`McpFailure` naming it, never a shortened list.
    """

    def __init__(self, max_pages: int = MAX_PAGES, max_tools: int = MAX_ITEMS) -> None:
        self.max_pages = max_pages
        self.max_tools = max_tools
        self.pages = 0
        self.tools = 0
        self._seen: set[bytes] = set()  # digests: a hostile cursor may be large

    def advance(self, next_cursor: str | None, page_tools: int) -> str | None:
        self.pages += 1
        self.tools += page_tools
        if self.tools > self.max_tools:
            raise McpFailure(
                "limit",
                f"the server lists more than {self.max_tools} tools "
                f"({self.tools} in the first {self.pages} pages)",
                limit="TooManyTools",
            )
        if next_cursor is None:
            return None
        digest = hashlib.sha256(next_cursor.encode("utf-8", "surrogatepass")).digest()
        if digest in self._seen:
            raise McpFailure(
                "limit",
                f"the server returned a tools/list cursor it had returned before "
                f"(page {self.pages})",
                limit="PaginationLoop",
            )
        if self.pages >= self.max_pages:
            raise McpFailure(
                "limit",
                f"the server's tool list runs past {self.max_pages} pages",
                limit="TooManyPages",
            )
        self._seen.add(digest)
        return next_cursor
