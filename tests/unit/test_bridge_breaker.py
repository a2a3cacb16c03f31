"""The per-server circuit breaker (mcp_operator.bridge.breaker): every transition, with the
clock passed in."""

from __future__ import annotations

from mcp_operator.bridge.breaker import CircuitBreaker


def tripped(now: float = 100.0) -> CircuitBreaker:
    breaker = CircuitBreaker(failure_threshold=3, open_seconds=30)
    for _ in range(3):
        breaker.record_failure(now)
    return breaker


def test_it_stays_closed_below_the_threshold() -> None:
    breaker = CircuitBreaker(failure_threshold=3, open_seconds=30)
    breaker.record_failure(1.0)
    breaker.record_failure(2.0)
    assert breaker.state(3.0) == "closed" and breaker.allow(3.0)
    assert breaker.remaining_open(3.0) == 0.0


def test_a_success_resets_the_count_of_consecutive_failures() -> None:
    breaker = CircuitBreaker(failure_threshold=3, open_seconds=30)
    breaker.record_failure(1.0)
    breaker.record_failure(2.0)
    breaker.record_success(3.0)
    breaker.record_failure(4.0)
    breaker.record_failure(5.0)
    assert breaker.state(6.0) == "closed"


def test_it_opens_after_the_threshold_and_says_for_how_long() -> None:
    breaker = tripped(now=100.0)
    assert breaker.state(100.0) == "open"
    assert not breaker.allow(110.0)
    assert breaker.remaining_open(110.0) == 20.0
    assert breaker.remaining_open(129.5) == 0.5


def test_it_turns_half_open_after_open_seconds_and_lets_one_trial_through() -> None:
    breaker = tripped(now=100.0)
    assert breaker.state(130.0) == "half-open"
    assert breaker.allow(130.0)
    assert not breaker.allow(130.1), "a second call waits for the trial"
    assert breaker.remaining_open(130.1) == 0.0


def test_a_successful_trial_closes_it() -> None:
    breaker = tripped(now=100.0)
    assert breaker.allow(131.0)
    breaker.record_success(131.5)
    assert breaker.state(131.5) == "closed" and breaker.allow(131.6) and breaker.allow(131.7)


def test_a_failed_trial_opens_it_again_for_open_seconds() -> None:
    breaker = tripped(now=100.0)
    assert breaker.allow(131.0)
    breaker.record_failure(132.0)
    assert breaker.state(132.0) == "open"
    assert breaker.remaining_open(132.0) == 30.0
    assert breaker.state(162.0) == "half-open"


def test_a_cancelled_trial_lets_another_call_try() -> None:
    breaker = tripped(now=100.0)
    assert breaker.allow(131.0)
    breaker.release()
    assert breaker.allow(131.1)
