"""The bounded HTTP client of the probe, and :func:`connect`: an SDK client after the handshake.

Bounds, so that a slow, broken or hostile server cannot sink the operator
(documented in ``docs/status-bounds.md``): at most ``MAX_RESPONSE_BYTES`` in
one HTTP response body (and one SSE event), and ``MAX_PROBE_BYTES`` in all
responses of one probe together. Tool lists are counted and cut on the raw JSON
(:mod:`~mcp_operator.mcp.pages`) before the SDK turns them into objects, and
bodies held past ``FREE_BYTES`` share one byte budget across all probes
(:mod:`~mcp_operator.mcp.budget`). A verifying TLS context is built once and
reused by every probe.

:func:`connect` speaks either era: ``server/discover`` (2026-07-28) first, the
``initialize`` handshake (2025-11-25 and older) when the server does not answer
it; over Streamable HTTP or the legacy HTTP+SSE transport. What to do with the
session is left to :mod:`~mcp_operator.mcp.discovery` and
:mod:`~mcp_operator.mcp.watch`; what a failure means, to
:mod:`~mcp_operator.mcp.errors`.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import AsyncExitStack
from typing import Any, Protocol

import httpx2
import mcp
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation

from mcp_operator import __version__
from mcp_operator.mcp.budget import ByteBudget, shared_budget
from mcp_operator.mcp.errors import (
    ProbeError,
    ProbeState,
    ResponseTooLarge,
    refusal_error,
    release,
)
from mcp_operator.mcp.pages import MAX_DISCOVERED_TOOLS, Keep, SseSlimmer, ToolCount, slim_body
from mcp_operator.mcp.target import ProbeTarget, display_url
from mcp_operator.net.guard import GuardedTransport
from mcp_operator.net.tls import tls_context

MAX_RESPONSE_BYTES = 2 * 1024 * 1024
"""One HTTP response body (or SSE event) larger than this fails with ``ResponseTooLarge``: a
``tools/list`` page of a few hundred tools with rich schemas takes a few hundred KiB."""

MAX_PROBE_BYTES = 32 * 1024 * 1024
"""All response bodies of one probe together: more fails with ``ResponseTooLarge``."""

FREE_BYTES = 64 * 1024
"""A body or SSE event held up to this size needs no reservation from the shared
:class:`~mcp_operator.mcp.budget.ByteBudget`; a larger one reserves ``MAX_RESPONSE_BYTES``."""


PROBE_LIMITS = httpx2.Limits(max_connections=10, max_keepalive_connections=2)
"""Connections of one probe's client (it makes a few, one after the other)."""


def probe_state(target: ProbeTarget) -> ProbeState:
    """A fresh :class:`ProbeState` for one probe of ``target``."""
    return ProbeState(display_url(target.url), target.timeout_seconds)


class Reservation:
    """This body's share of the shared budget: none while small, a whole page once large."""

    def __init__(self, budget: ByteBudget) -> None:
        self.budget = budget
        self._held = 0

    @property
    def held(self) -> int:
        return self._held

    async def hold(self, pending: int) -> None:
        if pending > FREE_BYTES and not self._held:
            await self.budget.reserve(MAX_RESPONSE_BYTES)
            self._held = MAX_RESPONSE_BYTES

    def give_back(self) -> None:
        if self._held:
            self.budget.release(self._held)
            self._held = 0


class Body(Protocol):
    """A response body as :class:`BoundedBody` reads it (httpx2's, or the lean client's)."""

    def __aiter__(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


class BoundedBody(httpx2.AsyncByteStream):
    """A response body that fails past its byte bounds and has its tool lists cut on arrival.

    A JSON body is held whole, an SSE stream one event at a time, then passed on
    through :mod:`~mcp_operator.mcp.pages` (counted, and cut to ``keep``); any
    other body streams through. Holding more than ``FREE_BYTES`` takes a share of
    the process's :class:`~mcp_operator.mcp.budget.ByteBudget` until passed on; given
    ``handover``, a large body's share outlives the body and goes to ``handover``, whose
    caller gives it back once the page parsed from it is released.
    """

    def __init__(
        self,
        inner: Body,
        state: ProbeState,
        limit: int,
        *,
        kind: str,
        keep: Keep | None,
        count: ToolCount,
        handover: Callable[[Reservation], None] | None = None,
    ) -> None:
        self._handover = handover
        self._inner = inner
        self._state = state
        self._limit = limit
        self._kind = kind if keep is not None else "other"
        self._keep = keep or Keep()
        self._count = count
        self._reservation = Reservation(shared_budget())

    def _counted(self, chunk: bytes, received: int) -> None:
        self._state.received += len(chunk)
        if received > self._limit:
            self._state.response_limit = self._limit
            raise ResponseTooLarge(self._limit)
        if self._state.received > MAX_PROBE_BYTES:
            self._state.probe_limit = MAX_PROBE_BYTES
            raise ResponseTooLarge(MAX_PROBE_BYTES)

    async def __aiter__(self) -> AsyncGenerator[bytes, None]:
        try:
            if self._kind == "json":
                async for piece in self._json():
                    yield piece
            elif self._kind == "sse":
                async for piece in self._sse():
                    yield piece
            else:
                received = 0
                async for chunk in self._inner:
                    received += len(chunk)
                    self._counted(chunk, received)
                    yield chunk
        except ProbeError as error:
            self._state.failure = error
            release(error)  # the page it was read from, before its share of the budget
            raise
        except GeneratorExit:  # the reader has what it wanted (an SSE answer's event)
            self._hand_over()
            raise
        else:
            self._hand_over()
        finally:
            self._reservation.give_back()

    def _hand_over(self) -> None:
        """A large body's share goes to ``handover``: the page parsed from it holds as
        much."""
        if self._handover is not None and self._reservation.held:
            self._handover(self._reservation)
            self._reservation = Reservation(self._reservation.budget)

    async def _json(self) -> AsyncIterator[bytes]:
        body = bytearray()
        async for chunk in self._inner:
            body += chunk
            self._counted(chunk, len(body))
            await self._reservation.hold(len(body))
        whole = bytes(body)
        del body
        yield slim_body(whole, self._keep, self._count)

    async def _sse(self) -> AsyncIterator[bytes]:
        events = SseSlimmer(self._keep, self._count)
        async for chunk in self._inner:
            self._counted(chunk, 0)
            ready = events.feed(chunk)
            if events.pending > self._limit:  # one event larger than a page
                self._state.response_limit = self._limit
                raise ResponseTooLarge(self._limit)
            if events.pending:
                await self._reservation.hold(events.pending)
            elif len(ready) > FREE_BYTES and self._handover is not None:
                await self._reservation.hold(len(ready))  # for the page parsed from it
            else:
                self._reservation.give_back()
            if ready:
                yield ready
        rest = events.flush()
        if rest:
            yield rest

    async def aclose(self) -> None:
        self._reservation.give_back()
        await self._inner.aclose()


def http_client(
    target: ProbeTarget,
    state: ProbeState,
    timeout: httpx2.Timeout | None = None,
    keep: Keep | None = None,
    *,
    standalone_stream: bool = True,
) -> httpx2.AsyncClient:
    """An httpx2 client for ``target`` that counts and bounds every response body in ``state``
    and, given ``keep``, counts and cuts every tool list before the SDK sees it. Without
    ``standalone_stream`` it never opens Streamable HTTP's GET stream (see
    :class:`~mcp_operator.net.guard.GuardedTransport`)."""
    count = ToolCount(MAX_DISCOVERED_TOOLS)

    async def on_response(response: httpx2.Response) -> None:
        if response.request.method == "POST":
            status = response.status_code
            state.error_status = status if status >= 400 else None
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > MAX_RESPONSE_BYTES:
            state.response_limit = MAX_RESPONSE_BYTES
            raise ResponseTooLarge(MAX_RESPONSE_BYTES)
        if isinstance(response.stream, httpx2.AsyncByteStream):
            media = response.headers.get("content-type", "").partition(";")[0].strip().lower()
            kind = {"application/json": "json", "text/event-stream": "sse"}.get(media, "other")
            response.stream = BoundedBody(
                response.stream, state, MAX_RESPONSE_BYTES, kind=kind, keep=keep, count=count
            )

    # identity: a compressed body could inflate past the bound after it was counted.
    headers = {"accept-encoding": "identity", **target.headers}
    return httpx2.AsyncClient(
        headers=headers,
        timeout=timeout or httpx2.Timeout(target.timeout_seconds),
        transport=GuardedTransport(
            target.egress,
            functools.partial(refusal_error, state),
            verify=tls_context(target.verify_tls),
            limits=PROBE_LIMITS,
            standalone_stream=standalone_stream,
        ),
        event_hooks={"response": [on_response]},
    )


async def connect(
    stack: AsyncExitStack,
    target: ProbeTarget,
    state: ProbeState,
    *,
    message_handler: Any = None,
    http_timeout: httpx2.Timeout | None = None,
    keep: Keep | None = None,
    listen: bool = True,
) -> mcp.Client:
    """An SDK client after the handshake (2026 discovery first, then ``initialize``).

    Without ``listen``, a Streamable HTTP session opens no GET stream: nothing the server
    sends on its own is wanted (a probe). The client and its connections close with
    ``stack``.
    """
    transport: Any
    if target.transport == "sse":

        def factory(*_args: Any, **_kwargs: Any) -> httpx2.AsyncClient:
            return http_client(target, state, http_timeout, keep)  # sse_client enters and closes it

        transport = sse_client(
            target.url,
            timeout=target.timeout_seconds,
            sse_read_timeout=target.timeout_seconds if http_timeout is None else 86400,
            httpx_client_factory=factory,
        )
    else:
        http = await stack.enter_async_context(
            http_client(target, state, http_timeout, keep, standalone_stream=listen)
        )
        transport = streamable_http_client(
            target.url, http_client=http, max_sse_event_size=MAX_RESPONSE_BYTES
        )
    client_info = Implementation(name="mcp-operator-probe", version=__version__)
    state.phase = "the handshake"
    client: mcp.Client = await stack.enter_async_context(
        mcp.Client(
            transport,
            mode="auto",
            cache=None,
            client_info=client_info,
            message_handler=message_handler,
        )
    )
    return client
