"""The generic per-object worker: its schedule, on virtual time, with any kind of object."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from mcp_operator.controller.settings import ScheduleSettings
from mcp_operator.controller.worker import LoopClock, Next, Worker
from mcp_operator.kube import NotFound
from tests.unit.fakes import FakeClock, settle


@dataclass
class Thing:
    """Not a Kubernetes model: the worker does not care what it schedules."""

    name: str
    answers: list[Next | Exception] = field(default_factory=list)
    runs: list[float] = field(default_factory=list)


def worker(
    clock: FakeClock,
    *,
    run: Callable[[Thing], Awaitable[Next]] | None = None,
    on_end: Callable[[str], None] | None = None,
    **settings: float,
) -> Worker[Thing]:
    async def scripted(thing: Thing) -> Next:
        thing.runs.append(clock.time)
        answer = thing.answers[min(len(thing.runs), len(thing.answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    return Worker(
        run or scripted,
        ScheduleSettings(**settings),  # type: ignore[arg-type]
        kind="Thing",
        describe=lambda thing: thing.name,
        clock=clock,
        uniform=lambda low, high: high,  # the largest spread, so that it shows
        on_end=on_end,
    )


async def test_a_successful_run_comes_back_after_its_interval_spread_by_jitter() -> None:
    clock = FakeClock()
    things = worker(clock, jitter=0.1)
    thing = Thing("a", [Next(100.0)])
    things.start("a", thing)
    await clock.run_until(lambda: len(thing.runs) == 3)
    assert thing.runs == [0.0, 110.0, 220.0]
    await things.stop()


async def test_failures_back_off_doubling_with_jitter_and_capped() -> None:
    clock = FakeClock()
    things = worker(clock, initial_backoff_seconds=1, max_backoff_seconds=4, jitter=0.5)
    thing = Thing("a", [Next(None, failed=True)])
    things.start("a", thing)
    await clock.run_until(lambda: len(thing.runs) == 5)
    gaps = [later - earlier for earlier, later in zip(thing.runs, thing.runs[1:], strict=False)]
    assert gaps == [1.5, 3.0, 6.0, 6.0]
    await things.stop()


async def test_a_failing_run_retries_no_later_than_the_interval_it_asks_for() -> None:
    clock = FakeClock()
    things = worker(clock, initial_backoff_seconds=8, max_backoff_seconds=300, jitter=0)
    thing = Thing("a", [Next(10.0, failed=True)])
    things.start("a", thing)
    await clock.run_until(lambda: len(thing.runs) == 4)
    assert thing.runs == [0.0, 8.0, 18.0, 28.0]
    await things.stop()


async def test_an_unexpected_error_backs_off_and_a_change_starts_the_back_off_over() -> None:
    clock = FakeClock()
    things = worker(clock, initial_backoff_seconds=1, max_backoff_seconds=64, jitter=0)
    thing = Thing("a", [RuntimeError("bug")])
    things.start("a", thing)
    await clock.run_until(lambda: len(thing.runs) == 4)  # at 0, 1, 3, 7; next due at 15
    assert thing.runs == [0.0, 1.0, 3.0, 7.0]
    things.wake("a")  # woken, but nothing changed: the back-off goes on
    await clock.advance(0)
    assert thing.runs[-1] == 7.0 and len(thing.runs) == 5
    things.wake("a", changed=True)
    await clock.advance(0)
    await clock.run_until(lambda: len(thing.runs) == 7)
    assert thing.runs[-1] - thing.runs[-2] == 1.0  # counting from the first delay again
    await things.stop()


async def test_a_run_that_finds_its_object_gone_leaves_no_entry() -> None:
    clock = FakeClock()
    ended: list[str] = []
    things = worker(clock, on_end=ended.append)
    things.start("a", Thing("a", [NotFound(404, "gone")]))
    await clock.run_until(lambda: len(things) == 0)
    assert ended == ["a"] and "a" not in things
    things.start("a", Thing("a", [Next(None)]))  # its next event starts it anew
    assert len(things) == 1
    await things.stop()


async def test_a_run_that_asks_to_end_leaves_no_entry_and_runs_no_more() -> None:
    """An object the controller deleted itself (an AgentRun after its TTL) ends its worker
    by the run's answer, not by an exception."""
    clock = FakeClock()
    ended: list[str] = []
    things = worker(clock, on_end=ended.append)
    thing = Thing("a", [Next(1.0, ended=True)])
    things.start("a", thing)
    await clock.run_until(lambda: len(things) == 0)
    await clock.advance(10)
    assert ended == ["a"] and thing.runs == [0.0]
    await things.stop()


async def test_stop_cancels_every_worker() -> None:
    clock = FakeClock()
    things = worker(clock)
    for name in "abc":
        things.start(name, Thing(name, [Next(None)]))
    await clock.advance(0)
    tasks = [task for task in asyncio.all_tasks() if task.get_name().startswith("Thing-")]
    assert len(tasks) == 3
    await things.stop()
    assert len(things) == 0 and all(task.done() for task in tasks)


async def test_stop_ends_a_worker_whose_run_swallowed_the_cancellation() -> None:
    """A library in the run may turn our cancellation into an error of its own (anyio's
    closed streams do): the worker still ends instead of running again, so stop returns."""
    clock = FakeClock()
    started = asyncio.Event()
    runs = 0

    async def swallowing(thing: Thing) -> Next:
        nonlocal runs
        runs += 1
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise RuntimeError("the stream was closed") from None  # as anyio's do
        return Next(None)

    things = worker(clock, run=swallowing, initial_backoff_seconds=0.0, jitter=0.0)
    things.start("a", Thing("a"))
    await started.wait()
    await asyncio.wait_for(things.stop(), timeout=5)
    assert runs == 1, "the worker ran again after it was cancelled"


async def test_the_global_limit_is_one_semaphore_for_all_objects() -> None:
    clock = FakeClock()
    inside: list[str] = []
    release = asyncio.Event()

    async def run(thing: Thing) -> Next:
        async with things.limit:
            inside.append(thing.name)
            await release.wait()
        return Next(None)

    things = worker(clock, run=run, max_concurrent=2)
    for name in "abcd":
        things.start(name, Thing(name))
    await clock.advance(0)
    assert len(inside) == 2
    release.set()
    await clock.advance(0)
    assert sorted(inside) == ["a", "b", "c", "d"]
    await things.stop()


async def test_an_update_reaches_the_next_run_without_waking_it() -> None:
    clock = FakeClock()
    seen: list[str] = []

    async def run(thing: Thing) -> Next:
        seen.append(thing.name)
        return Next(60.0)

    things = worker(clock, run=run, jitter=0)
    things.start("a", Thing("first"))
    await clock.advance(0)
    things.update("a", Thing("second"))
    await clock.advance(59)
    assert seen == ["first"]
    await clock.advance(1)
    assert seen == ["first", "second"] and things.get("a") == Thing("second")
    await things.stop()


async def test_the_real_clock_returns_on_its_timer_or_when_woken_with_no_task_of_its_own() -> None:
    """One task per object, not two: the wait is a timer, not ``asyncio.wait_for``."""
    clock = LoopClock()
    wake = asyncio.Event()
    before = len(asyncio.all_tasks())
    waiting = asyncio.create_task(clock.wait(wake, 3600))
    await settle()  # the wait has started (and any task of its own with it)
    assert len(asyncio.all_tasks()) == before + 1, "the wait started a task of its own"
    wake.set()
    await asyncio.wait_for(waiting, timeout=5)

    wake.clear()
    await asyncio.wait_for(clock.wait(wake, 0.01), timeout=5)  # the timer
    assert wake.is_set()
