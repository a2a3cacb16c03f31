"""The probe's MCP client: the one MCP session, either transport, with the probe's bounds.

A probe is a few requests: ``server/discover``; for a server of the 2025 era or older,
``initialize`` and ``notifications/initialized``; one ``tools/list`` per page; the
session's end. A fleet's probes are most of the operator's work, and the SDK's client
spends about 12 ms of CPU per probe on them (task groups, memory streams, a model per
message, a connection per request); the session spends under 3 ms, over
:mod:`~mcp_operator.net.pool`'s keep-alive connections (bench/probe_bench.py).

The conversation itself (era, ids, answers, lost sessions, the end) is the bridge's too:
:class:`~mcp_operator.mcp.session.McpSession` for Streamable HTTP,
:class:`~mcp_operator.mcp.legacy_sse.LegacySseSession` for the legacy HTTP+SSE transport
(its event stream, its endpoint, answers matched by id). What this module adds is the
probe's: every body and event stream passes the probe's bounds and has its tool lists
counted and cut on arrival (:class:`~mcp_operator.mcp.probe_bodies.BoundedBody`), and
each page is validated by the SDK's ``ListToolsResult``. :class:`ProbeClient` offers what
:mod:`~mcp_operator.mcp.discovery` and :mod:`~mcp_operator.mcp.watch` read
(``server_capabilities``, ``server_info``, ``protocol_version``, ``list_tools``, the
session's change stream). Failures are :class:`~mcp_operator.mcp.failures.McpFailure`
(and the probe's own bounds), which :mod:`~mcp_operator.mcp.errors` turns into reasons.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterable, AsyncIterator

import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_operator import __version__
from mcp_operator.mcp.errors import ProbeState, ResponseTooLarge, release
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.legacy_sse import LegacySseSession
from mcp_operator.mcp.messages import clamped
from mcp_operator.mcp.pages import MAX_DISCOVERED_TOOLS, Keep, ToolCount
from mcp_operator.mcp.probe_bodies import MAX_RESPONSE_BYTES, BoundedBody, Reservation
from mcp_operator.mcp.session import McpSession
from mcp_operator.mcp.session_wire import CLOSE_SECONDS
from mcp_operator.mcp.target import ProbeTarget
from mcp_operator.net.cancel import cancelling
from mcp_operator.net.http1 import Http1Response
from mcp_operator.net.pool import Http1Pool
from mcp_operator.net.tls import tls_context

CLIENT_INFO = {"name": "mcp-operator-probe", "version": __version__}
DISCOVER_SECONDS = 10.0
"""``server/discover`` unanswered this long: a legacy server (the SDK's own bound)."""
LATER_REVISION_FIELDS = ("ttlMs", "cacheScope", "resultType")
"""2026-07-28's fields of a ``tools/list`` result, dropped in a legacy session (as the SDK)."""


class ProbeClient:
    """One probe's conversation with a server, either transport (use :func:`probe_client`)."""

    def __init__(self, target: ProbeTarget, state: ProbeState, keep: Keep, pool: Http1Pool):
        self._state = state
        self._keep = keep
        self._count = ToolCount(MAX_DISCOVERED_TOOLS)
        self._page_share: Reservation | None = None
        """The byte budget's share of the last large page, held while it may be alive."""
        # The legacy transport's answers come on its event stream, read under the same bounds.
        session = (
            functools.partial(
                LegacySseSession, max_event_bytes=MAX_RESPONSE_BYTES, stream_body=self._bounded
            )
            if target.transport == "sse"
            else functools.partial(McpSession, discover_seconds=DISCOVER_SECONDS)
        )
        self.session: McpSession = session(
            target.url,
            pool,
            headers=target.headers,
            client_info=CLIENT_INFO,
            read_body=self._bounded,
            credentials=target.credentials,
        )

    @property
    def protocol_version(self) -> str | None:
        return self.session.protocol_version

    @property
    def negotiated_version(self) -> str:
        """The version the handshake agreed on (read after :meth:`open`)."""
        version = self.session.protocol_version
        if version is None:
            raise McpFailure("connection", f"{self.session.name} ended the session at once")
        return version

    @property
    def server_capabilities(self) -> types.ServerCapabilities:
        return self.session.capabilities

    @property
    def server_info(self) -> types.Implementation | None:
        return self.session.server_info

    @property
    def modern(self) -> bool:
        return self.protocol_version in MODERN_PROTOCOL_VERSIONS

    async def open(self) -> None:
        """Negotiate the era (:meth:`~mcp_operator.mcp.session.McpSession.connect`)."""
        self.session.discover_seconds = DISCOVER_SECONDS  # read now: tests shorten it
        await self.session.connect()

    async def list_tools(self, cursor: str | None = None) -> types.ListToolsResult:
        """One page, validated. Its share of the byte budget (when it was large) is held
        until the next page is asked for or the session ends: the caller lets go of a page
        before it asks for the next (:mod:`~mcp_operator.mcp.discovery` does)."""
        self.let_go()
        params = {} if cursor is None else {"cursor": cursor}
        raw = clamped(await self.session.request("tools/list", params))
        if not self.modern:  # 2026-07-28's fields are outside a legacy session's contract
            for key in LATER_REVISION_FIELDS:
                raw.pop(key, None)
        return types.ListToolsResult.model_validate(raw)

    async def close(self) -> None:
        """End a legacy session, within its own short deadline."""
        self.let_go()
        await self.session.close(CLOSE_SECONDS)

    def let_go(self) -> None:
        """Give back the last large page's share of the byte budget."""
        share, self._page_share = self._page_share, None
        if share is not None:
            share.give_back()

    def _hand_over(self, share: Reservation) -> None:
        self.let_go()
        self._page_share = share

    def _bounded(self, answer: Http1Response, kind: str) -> AsyncIterable[bytes]:
        """An answer's body under the probe's bounds, its tool lists counted and cut."""
        length = answer.headers.get("content-length", "")
        if length.isdigit() and int(length) > MAX_RESPONSE_BYTES:
            self._state.response_limit = MAX_RESPONSE_BYTES
            raise ResponseTooLarge(MAX_RESPONSE_BYTES)
        return BoundedBody(
            _Body(answer),
            self._state,
            MAX_RESPONSE_BYTES,
            kind=kind,
            keep=self._keep,
            count=self._count,
            handover=self._hand_over,
        )


@contextlib.asynccontextmanager
async def probe_client(
    target: ProbeTarget, state: ProbeState, keep: Keep
) -> AsyncIterator[ProbeClient]:
    """A :class:`ProbeClient` after the handshake; its session and connections end with
    the ``async with``.

    A failed probe ends its session too, but first lets go of what the failure still holds:
    the frames of the failure's traceback hold the pages being read when it happened (a
    ``TooManyTools`` page, parsed), and a hostile server that stalls the ``DELETE`` would
    otherwise keep every failed probe's page alive for the ``DELETE``'s whole deadline."""
    pool = Http1Pool(egress=target.egress, ssl_context=tls_context(target.verify_tls))
    client = ProbeClient(target, state, keep, pool)
    try:
        state.phase = "the handshake"
        await client.open()
        yield client
        state.phase = "closing the session"
    except BaseException as failure:
        release(failure)
        raise
    finally:
        client.let_go()
        try:
            if not cancelling():  # a failed probe ends its session too, a cancelled one not
                await client.close()
        finally:
            await pool.aclose()


class _Body:
    """An answer's body as :class:`~mcp_operator.mcp.probe_bodies.BoundedBody` reads one."""

    def __init__(self, answer: Http1Response) -> None:
        self._answer = answer

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._answer.aiter_bytes()

    async def aclose(self) -> None:
        await self._answer.aclose()
