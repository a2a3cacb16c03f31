"""The one way tests wait for something that happens on its own time: :func:`eventually`.

Every test that polls (an object's status, an HTTP endpoint, a log line, a
process going away) asks this one helper, so that all of them poll the same
way, give up after a timeout they state, and fail with a message that says
what did not happen and what was seen last. It leaves *what* to check to the
caller: a check returns a value, and the wait is over when that value is truthy
(or passes the caller's ``until``). Async tests whose check must be awaited (an
MCP client's call, say) use :func:`eventually_async`, the same wait on the loop.

A wait is never a ``sleep``: a test that must know something happened waits for
what shows it (a log line, a metric, an answer), and a test that asserts something
did *not* happen first waits for what shows the moment it would have.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


def eventually(
    what: str,
    check: Callable[[], T],
    timeout: float = 30,
    *,
    until: Callable[[T], object] = bool,
    interval: float = 0.25,
    ignoring: tuple[type[Exception], ...] = (),
    explain: Callable[[], str] | None = None,
) -> T:
    """Call ``check`` until ``until`` holds for its result (by default: it is truthy); return it.

    ``check`` is called at once and then every ``interval`` seconds. An exception
    of a type in ``ignoring`` counts as "not yet" (a server that does not listen
    yet); any other exception ends the wait. After ``timeout`` seconds the wait
    fails with an ``AssertionError`` naming ``what``, the last result, and what
    ``explain`` returns (a log, say).
    """
    wait = _Wait(what, timeout, explain)
    while True:
        try:
            last: T | Exception = check()
        except ignoring as error:
            last = error
        if not isinstance(last, Exception) and until(last):
            return last
        wait.give_up_after(last)
        time.sleep(interval)


async def eventually_async(
    what: str,
    check: Callable[[], Awaitable[T]],
    # eventually's own parameter: a deadline between attempts, not one imposed on an attempt
    timeout: float = 30,  # noqa: ASYNC109
    *,
    until: Callable[[T], object] = bool,
    interval: float = 0.25,
    ignoring: tuple[type[Exception], ...] = (),
    explain: Callable[[], str] | None = None,
) -> T:
    """:func:`eventually` for a check that is awaited; the loop runs on between attempts.

    An attempt that is still running at the deadline is not cut short: ``check``
    bounds its own calls (a client's timeout), as a check of :func:`eventually` does.
    """
    wait = _Wait(what, timeout, explain)
    while True:
        try:
            last: T | Exception = await check()
        except ignoring as error:
            last = error
        if not isinstance(last, Exception) and until(last):
            return last
        wait.give_up_after(last)
        await asyncio.sleep(interval)


@dataclass
class _Wait:
    """The deadline of one wait, and the failure it ends in."""

    what: str
    timeout: float
    explain: Callable[[], str] | None

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.timeout

    def give_up_after(self, last: object) -> None:
        """Fail, naming what did not happen and ``last``, once the deadline has passed."""
        if time.monotonic() < self.deadline:
            return
        detail = f"\n{self.explain()}" if self.explain is not None else ""
        raise AssertionError(
            f"{self.what} did not happen within {self.timeout:g}s (last: {last!r}){detail}"
        )
