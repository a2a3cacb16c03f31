"""One MCP client session over Streamable HTTP, in either era: the probe's and the bridge's.

The probe (:mod:`~mcp_operator.mcp.probe_client`, for :mod:`~mcp_operator.mcp.discovery`) and
the bridge (:mod:`~mcp_operator.bridge.upstreams`) speak to MCP servers through this one
:class:`McpSession`, over the keep-alive pool; so they agree on every rule of the wire. This
module holds what callers use (requests, listings, the session's end); each rule is kept by
one part of the session, a module each, stacked one on the other:

- **The wire** (:mod:`~mcp_operator.mcp.session_wire`): the session's state, its headers
  (the configured ones never over the protocol's own), and the credentials asked for headers
  before every request, a request sent once more after a ``401``/``403`` only when they say
  new headers are worth it.
- **Answers** (:mod:`~mcp_operator.mcp.session_exchange`): JSON or an SSE stream, each
  matched to its request by id, strictly by type and value; a response to another request
  drops the connection and fails the call. A server's requests and notifications on a
  request's stream go to the caller's ``related``, and cancelling the request tells the
  server. A cut answer stream of a legacy session is resumed with ``Last-Event-ID``, never
  by sending the request again.
- **Era** (:mod:`~mcp_operator.mcp.session_handshake`): ``server/discover`` first, else the
  ``initialize`` handshake (the SDK's ``mode="auto"``).
- **Change streams** (:mod:`~mcp_operator.mcp.session_changes`): the legacy session's GET
  stream, or the answer to 2026-07-28's ``subscriptions/listen``; ``follow`` keeps one open.
- **A lost legacy session** (404, or a 400 that names the session, as many deployed servers
  answer) is established again once per request (here).
- **Pages** follow one rule (:class:`~mcp_operator.mcp.bounds.Paginator`, here): only an
  absent ``nextCursor`` ends a listing, ``""`` is a cursor in every era; a loop, too many
  pages or too many items is an error, never a silently shortened list.
- **Failures** are one type, :class:`~mcp_operator.mcp.failures.McpFailure`: a ``fault``
  (what broke), the ``kind`` a caller acts on (``unavailable``, ``timeout``, ``error``), and
  the JSON-RPC ``code`` and ``data`` when the server answered with a JSON-RPC error. The
  probe turns it into a reason (:mod:`~mcp_operator.mcp.translation`), the bridge into the
  agent's tool error.

How an answer's body is read is the caller's (``read_body``): the probe counts and cuts its
pages on arrival under its byte budget, the bridge caps each answer's bytes
(:func:`~mcp_operator.mcp.bounds.capped`). The small rules of the messages themselves are
:mod:`~mcp_operator.mcp.messages`'.

The SDK stays where it earns its place: its constants and its models validate what the
session reads (``DiscoverResult``, ``InitializeResult``). The session of the legacy HTTP+SSE
transport, for the probe and the bridge alike, is :mod:`~mcp_operator.mcp.legacy_sse`: this
session's conversation on that transport's wire.

Header values (credentials) never appear in messages or reprs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from mcp_operator import tracing
from mcp_operator.mcp import messages
from mcp_operator.mcp.bounds import Paginator
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.session_changes import SessionChanges
from mcp_operator.mcp.session_exchange import Related, SessionLost
from mcp_operator.mcp.session_wire import CLOSE_SECONDS
from mcp_operator.net.egress import EgressPolicy
from mcp_operator.net.pool import Http1Pool

Pool = Http1Pool
"""The keep-alive connections sessions share (:mod:`~mcp_operator.net.pool`)."""


def session_pool(egress: EgressPolicy) -> Http1Pool:
    """A pool of keep-alive connections for sessions, under ``egress`` (the bridge's)."""
    return Http1Pool(egress=egress)


class McpSession(SessionChanges):
    """One server's session: its URL and headers, the negotiated era, the legacy session id.

    ``name`` is how messages call the server (never a header value); ``client_info`` how
    the session introduces itself. Requests may run concurrently; connecting happens once
    at a time. Its parts, from the wire up: :mod:`~mcp_operator.mcp.session_wire`,
    :mod:`~mcp_operator.mcp.session_exchange`, :mod:`~mcp_operator.mcp.session_handshake`,
    :mod:`~mcp_operator.mcp.session_changes`.
    """

    def __repr__(self) -> str:
        return f"McpSession(name={self.name!r}, url={messages.display_url(self.url)!r})"

    async def request(
        self,
        method: str,
        params: Mapping[str, Any],
        seconds: float | None = None,
        *,
        related: Related | None = None,
    ) -> dict[str, Any]:
        """One request in the negotiated era (connecting first if need be); a lost legacy
        session is established again once. ``seconds`` bounds it all (a ``timeout``
        failure); without it the caller's own deadline does. ``related`` hears what the
        server says on the request's stream, and cancelling the request tells the server.
        A client span when tracing is on, its context in the request's ``_meta``."""
        self.active += 1
        try:
            if tracing.ENABLED:
                with tracing.client(
                    method, params, server=self.name, session_id=self.session_id
                ) as (span, carried):
                    result = await self._timed(method, carried, seconds, related)
                    tracing.outcome(span, result)
                    return result
            return await self._timed(method, params, seconds, related)
        finally:
            self.active -= 1
            if not self.active and self._idle is not None:
                self._idle.set()

    async def _timed(
        self,
        method: str,
        params: Mapping[str, Any],
        seconds: float | None,
        related: Related | None,
    ) -> dict[str, Any]:
        if seconds is None:
            return await self._request(method, params, related)
        try:
            async with asyncio.timeout(seconds):
                return await self._request(method, params, related)
        except TimeoutError:
            raise McpFailure(
                "timeout", f"{self.name} did not answer {method} within {seconds:g}s"
            ) from None

    async def _request(
        self, method: str, params: Mapping[str, Any], related: Related | None = None
    ) -> dict[str, Any]:
        if not self.connected:
            await self.connect()
        try:
            return await self._exchange(method, params, related=related)
        except SessionLost as lost:
            if self.session_id == lost.session_id:  # not yet replaced by a concurrent request
                self.reset()
            await self.connect()
            try:
                return await self._exchange(method, params, related=related)
            except SessionLost:
                raise McpFailure(
                    "connection", f"{self.name} lost the session again at once"
                ) from None

    async def pages(
        self, method: str, key: str, seconds: float | None = None
    ) -> AsyncGenerator[list[Any], None]:
        """The items (under ``key``) of every page of a listing, page by page, walked by the
        :class:`Paginator`; ``seconds`` bounds each page."""
        walk = Paginator()
        cursor: str | None = None
        while True:
            params = {} if cursor is None else {"cursor": cursor}
            result = await self.request(method, params, seconds)
            items = result.get(key)
            if not isinstance(items, list):
                raise McpFailure("mcp", f"{self.name} answered {method} without a list of {key}")
            next_cursor = result.get("nextCursor")
            if next_cursor is not None and not isinstance(next_cursor, str):
                raise McpFailure("mcp", f"{self.name} answered {method} with a cursor not text")
            del result
            cursor = walk.advance(next_cursor, len(items))
            yield items
            if cursor is None:
                return

    async def retire(self, drain_seconds: float, seconds: float = CLOSE_SECONDS) -> None:
        """End the session (:meth:`close`) once no request of ours is in flight on it, or
        ``drain_seconds`` from now if some still are: a session replaced or removed by a
        reload lets its calls finish, then tells the server it is done."""
        if self.active:
            self._idle = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(drain_seconds):
                    while self.active:
                        await self._idle.wait()
                        self._idle.clear()
            self._idle = None
        await self.close(seconds)

    async def close(self, seconds: float = CLOSE_SECONDS) -> None:
        """End a legacy session (``DELETE``) within ``seconds`` of its own; a server that
        ignores it, stalls it or fails it is no failure (its session ends on its clock)."""
        if self.session_id is None or self.modern:
            return
        headers = self._request_headers("", None)
        try:
            async with asyncio.timeout(seconds):
                answer = await self._send("DELETE", headers, b"")
                await answer.aclose()
        except (TimeoutError, McpFailure, OSError):
            pass
        self.session_id = None
