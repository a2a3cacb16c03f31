"""The probe's bounds on what it reads: every answer's body and event stream, counted, cut.

Bounds, so that a slow, broken or hostile server cannot sink the operator
(documented in ``docs/status-bounds.md``): at most ``MAX_RESPONSE_BYTES`` in
one HTTP response body (and one SSE event), and ``MAX_PROBE_BYTES`` in all
responses of one probe together. Tool lists are counted and cut on the raw JSON
(:mod:`~mcp_operator.mcp.pages`) before they are parsed, and bodies held past
``FREE_BYTES`` share one byte budget across all probes (:mod:`~mcp_operator.mcp.budget`).
:class:`BoundedBody` applies them to one body; the probe's session
(:mod:`~mcp_operator.mcp.probe_client`) reads every answer and event stream through it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Protocol

from mcp_operator.mcp.budget import ByteBudget, shared_budget
from mcp_operator.mcp.errors import ProbeError, ProbeState, ResponseTooLarge, release
from mcp_operator.mcp.pages import Keep, SseSlimmer, ToolCount, slim_body
from mcp_operator.mcp.target import ProbeTarget, display_url

MAX_RESPONSE_BYTES = 2 * 1024 * 1024
"""One HTTP response body (or SSE event) larger than this fails with ``ResponseTooLarge``: a
``tools/list`` page of a few hundred tools with rich schemas takes a few hundred KiB."""

MAX_PROBE_BYTES = 32 * 1024 * 1024
"""All response bodies of one probe together: more fails with ``ResponseTooLarge``."""

FREE_BYTES = 64 * 1024
"""A body or SSE event held up to this size needs no reservation from the shared
:class:`~mcp_operator.mcp.budget.ByteBudget`; a larger one reserves ``MAX_RESPONSE_BYTES``."""


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
    """A response body as :class:`BoundedBody` reads it."""

    def __aiter__(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


class BoundedBody:
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
