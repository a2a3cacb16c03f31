"""The global concurrency limit of a worker, counted: how many wait, and for how long.

A :class:`Slots` is an ``asyncio.Semaphore`` that also knows how many callers
are queued for a slot right now and reports each caller's wait once it gets
one, for the operator's queue metrics (:mod:`mcp_operator.controller.metrics`).
Which step holds a slot is the reconcile's business (the probe).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from types import TracebackType


class Slots:
    """``async with slots:`` holds one of ``size`` slots."""

    def __init__(
        self,
        size: int,
        *,
        observe_wait: Callable[[float], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._semaphore = asyncio.Semaphore(size)
        self._observe_wait = observe_wait
        self._monotonic = monotonic
        self.waiting = 0
        """Callers queued for a slot right now (the queue depth)."""

    async def __aenter__(self) -> None:
        started = self._monotonic()
        self.waiting += 1
        try:
            await self._semaphore.acquire()
        finally:
            self.waiting -= 1
        if self._observe_wait is not None:
            self._observe_wait(self._monotonic() - started)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._semaphore.release()

    def locked(self) -> bool:
        return self._semaphore.locked()
