"""A byte budget shared by every probe of one process: how many response bytes are held at once.

A probe holds a response body (or an SSE event) in memory until it is complete,
because the page is counted and cut as a whole (:mod:`~mcp_operator.mcp.pages`).
Small bodies are free; a body that grows past ``free_bytes`` must first reserve
the largest size a page may have from the :class:`ByteBudget`, and waits while
other probes hold it all. Whole reservations, taken at once and given back when
the body is passed on, cannot deadlock: every holder finishes or hits its
probe deadline. Reading bodies is :mod:`~mcp_operator.mcp.probe_bodies`' job.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections import deque

DEFAULT_BUDGET_BYTES = 16 * 1024 * 1024
"""Response bytes all probes of the process may hold past their free share at once."""


class ByteBudget:
    """Bytes reserved and given back, first come first served, within one event loop."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.held = 0
        self.peak = 0
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()

    async def reserve(self, size: int) -> None:
        """Wait until ``size`` bytes (at most ``total``) are free, then hold them."""
        size = min(size, self.total)
        if not self._waiting and self.held + size <= self.total:
            self._take(size)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, future)
        self._waiting.append(entry)
        try:
            await future
        except BaseException:
            if future.done() and not future.cancelled():
                self.release(size)  # granted while being cancelled: give it back
            else:
                with contextlib.suppress(ValueError):
                    self._waiting.remove(entry)
                self._wake()
            raise

    def release(self, size: int) -> None:
        """Give back bytes taken by :meth:`reserve` (the same ``size``)."""
        self.held -= min(size, self.total)
        self._wake()

    def _take(self, size: int) -> None:
        self.held += size
        self.peak = max(self.peak, self.held)

    def _wake(self) -> None:
        while self._waiting:
            size, future = self._waiting[0]
            if future.done():
                self._waiting.popleft()
                continue
            if self.held + size > self.total:
                return
            self._waiting.popleft()
            self._take(size)
            future.set_result(None)


_budgets: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ByteBudget] = (
    weakref.WeakKeyDictionary()
)


def shared_budget(total: int = DEFAULT_BUDGET_BYTES) -> ByteBudget:
    """The budget of the running event loop (one per loop: futures cannot cross loops)."""
    loop = asyncio.get_running_loop()
    budget = _budgets.get(loop)
    if budget is None:
        budget = _budgets[loop] = ByteBudget(total)
    return budget
