"""A per-object worker schedule, the same for every controller: one asyncio task per object.

A controller hands :class:`Worker` the objects it watches, keyed by uid, and one
``run`` function that reconciles one object and says when to run again
(:class:`Next`). The worker owns the rest of the schedule:

- one task per object; it runs at once, then again when woken
  (:meth:`Worker.wake`) or when the delay the run asked for has passed;
- a successful run asks for its interval (spread by jitter, so that objects
  created together drift apart) or for none (wait to be woken);
- a failed run backs off: doubling from the first delay, capped, spread by
  jitter; a wake that says the object changed starts the back-off over;
- one global concurrency limit (:attr:`Worker.limit`), which ``run`` holds
  around its expensive steps (the MCPServer fleet: a probe and the status write
  that reports it, so results never pile up waiting for the API server);
- a run that asks to end (:attr:`Next.ended`: the controller deleted the object,
  an AgentRun after its TTL) ends the task, and so does a run that raises
  :class:`~mcp_operator.kube.NotFound` (the object is gone). A task that ends for
  any reason leaves no entry behind, so the next event of the object starts a
  new one instead of waking a dead one;
- :meth:`Worker.stop` cancels every task; a task ends after its run even when
  something in the run swallowed the cancellation, so stopping never waits
  for a task that keeps going.

Time is injected (:class:`Clock`): tests run the schedule on a fake clock
instead of sleeping. What a run does, which changes wake which object and what
status says are the controller's business.

Why not kopf daemons or timers: both need a finalizer per object (kopf's
daemons must be stopped before deletion), and a finalizer is for state that
garbage collection cannot reach; an in-memory schedule needs none. Why not
kopf's change handlers: they persist progress in annotations (an extra write
per change) and would re-run on every status patch we make.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import random
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from mcp_operator.controller.settings import ScheduleSettings
from mcp_operator.controller.slots import Slots
from mcp_operator.kube import NotFound
from mcp_operator.net.cancel import cancelling

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Clock(Protocol):
    """Where the worker (and the controller) get the time and wait for it."""

    def now(self) -> datetime.datetime:
        """The current wall-clock time, timezone-aware."""
        ...

    async def wait(self, wake: asyncio.Event, delay: float | None) -> None:
        """Return when ``wake`` is set or ``delay`` seconds have passed (``None``: never)."""
        ...


class LoopClock:
    """The real clock: the system's wall clock and the event loop's timers."""

    def now(self) -> datetime.datetime:
        return datetime.datetime.now(datetime.UTC)

    async def wait(self, wake: asyncio.Event, delay: float | None) -> None:
        # A timer that sets ``wake``, not ``asyncio.wait_for``: that wraps the wait in a task
        # of its own, a second task per object for as long as the fleet runs.
        if delay is None:
            await wake.wait()
            return
        timer = asyncio.get_running_loop().call_later(max(delay, 0.0), wake.set)
        try:
            await wake.wait()
        finally:
            timer.cancel()


@dataclass(frozen=True)
class Next:
    """What one run asks of the schedule."""

    after: float | None
    """Seconds until the next regular run; ``None`` waits until woken. For a failed run, the
    cap of the back-off (``None``: the settings' cap)."""
    failed: bool = False
    """Back off: the next run comes after the doubling retry delay."""
    ended: bool = False
    """The object's life here is over (the run deleted it): no next run, the task ends."""


@dataclass
class _Entry(Generic[T]):
    item: T
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    failures: int = 0


class Worker(Generic[T]):
    """One task per object, each running ``run(item)`` on the schedule described above."""

    def __init__(
        self,
        run: Callable[[T], Awaitable[Next]],
        settings: ScheduleSettings,
        *,
        kind: str,
        describe: Callable[[T], str],
        clock: Clock | None = None,
        uniform: Callable[[float, float], float] = random.uniform,
        on_end: Callable[[str], None] | None = None,
        observe_wait: Callable[[float], None] | None = None,
    ) -> None:
        self._run = run
        self.settings = settings
        self._kind = kind
        self._describe = describe
        self.clock: Clock = clock or LoopClock()
        self._uniform = uniform
        self._on_end = on_end
        self._entries: dict[str, _Entry[T]] = {}
        self.limit = Slots(settings.max_concurrent, observe_wait=observe_wait)
        """The global concurrency limit: ``run`` holds it around its expensive step
        (``observe_wait`` hears how long each run waited for it)."""

    def start(self, uid: str, item: T) -> None:
        """Start the worker of a new object; it runs at once."""
        if uid in self._entries:
            raise ValueError(f"{self._kind} {uid} already has a worker")
        entry = _Entry(item)
        self._entries[uid] = entry
        entry.task = asyncio.create_task(self._loop(uid, entry), name=f"{self._kind}-{uid}")

    def update(self, uid: str, item: T) -> None:
        """Give the object's next run a newer ``item`` (without waking it)."""
        entry = self._entries.get(uid)
        if entry is not None:
            entry.item = item

    def wake(self, uid: str, *, changed: bool = False) -> None:
        """Run the object's reconcile now; ``changed`` (the object or an input changed) also
        starts its back-off over."""
        entry = self._entries.get(uid)
        if entry is not None:
            if changed:
                entry.failures = 0
            entry.wake.set()

    def forget(self, uid: str) -> None:
        """Stop the object's worker (it was deleted)."""
        entry = self._entries.pop(uid, None)
        if entry is not None:
            if entry.task is not None:
                entry.task.cancel()
            self._ended(uid)

    def get(self, uid: str) -> T | None:
        entry = self._entries.get(uid)
        return entry.item if entry is not None else None

    def __len__(self) -> int:
        return len(self._entries)

    def items(self) -> Iterator[T]:
        """The objects with a worker, as last given (for metrics)."""
        return iter([entry.item for entry in self._entries.values()])

    def __contains__(self, uid: object) -> bool:
        return uid in self._entries

    async def stop(self) -> None:
        """Cancel every task and wait for them to end."""
        tasks = [entry.task for entry in self._entries.values() if entry.task is not None]
        uids = list(self._entries)
        self._entries.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for uid in uids:
            self._ended(uid)

    # -- the schedule ------------------------------------------------------------------

    async def _loop(self, uid: str, entry: _Entry[T]) -> None:
        try:
            while True:
                entry.wake.clear()
                try:
                    asked = await self._run(entry.item)
                except NotFound:
                    return  # the object is gone; its next event (if any) starts anew
                except Exception:
                    logger.exception(
                        "Reconcile of %s %s failed unexpectedly",
                        self._kind,
                        self._describe(entry.item),
                    )
                    asked = Next(None, failed=True)
                if cancelling():
                    return  # a library in the run swallowed our cancellation: end anyway
                if asked.ended:
                    return
                await self.clock.wait(entry.wake, self._delay(entry, asked))
        finally:
            if self._entries.get(uid) is entry:
                del self._entries[uid]
                self._ended(uid)

    def _delay(self, entry: _Entry[T], asked: Next) -> float | None:
        if not asked.failed:
            entry.failures = 0
            return None if asked.after is None else self._spread(asked.after)
        entry.failures += 1
        exponent = min(entry.failures - 1, 30)
        backoff = self.settings.initial_backoff_seconds * float(2**exponent)
        cap = self.settings.max_backoff_seconds if asked.after is None else asked.after
        return self._spread(min(backoff, self.settings.max_backoff_seconds, cap))

    def _spread(self, delay: float) -> float:
        spread = delay * self.settings.jitter
        return delay + self._uniform(-spread, spread) if spread else delay

    def _ended(self, uid: str) -> None:
        if self._on_end is not None:
            self._on_end(uid)
