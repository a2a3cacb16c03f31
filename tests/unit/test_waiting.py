"""The tests' one wait: it returns what the check saw, and fails saying what did not happen."""

from __future__ import annotations

import pytest

from tests.support.waiting import eventually, eventually_async


def test_eventually_returns_the_first_result_that_passes() -> None:
    results = iter([0, 0, 7])
    assert eventually("a value", lambda: next(results), 5, interval=0) == 7


async def test_eventually_async_awaits_the_check_and_counts_ignored_errors_as_not_yet() -> None:
    calls = 0

    async def check() -> int:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise ConnectionError("not listening yet")
        return calls

    assert (
        await eventually_async("a server", check, 5, interval=0, ignoring=(ConnectionError,)) == 3
    )


async def test_eventually_async_fails_naming_what_did_not_happen_and_the_last_result() -> None:
    async def check() -> list[str]:
        return ["other"]

    with pytest.raises(
        AssertionError, match=r"the tool did not happen within 0.2s \(last: \['other'\]\)\nlog"
    ):
        await eventually_async(
            "the tool",
            check,
            0.2,
            until=lambda seen: "tool" in seen,
            interval=0.05,
            explain=lambda: "log",
        )


async def test_eventually_async_ends_at_an_error_it_does_not_ignore() -> None:
    async def check() -> int:
        raise KeyError("broken")

    with pytest.raises(KeyError):
        await eventually_async("a value", check, 5, interval=0)
