"""The one way tests wait for something that happens on its own time: :func:`eventually`.

Every test that polls (an object's status, an HTTP endpoint, a log line, a
process going away) asks this one helper, so that all of them poll the same
way, give up after a timeout they state, and fail with a message that says
what did not happen and what was seen last. It leaves *what* to check to the
caller: a check returns a value, and the wait is over when that value is truthy
(or passes the caller's ``until``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
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
    deadline = time.monotonic() + timeout
    while True:
        try:
            last: T | Exception = check()
        except ignoring as error:
            last = error
        if not isinstance(last, Exception) and until(last):
            return last
        if time.monotonic() >= deadline:
            detail = f"\n{explain()}" if explain is not None else ""
            raise AssertionError(
                f"{what} did not happen within {timeout:g}s (last: {last!r}){detail}"
            )
        time.sleep(interval)
