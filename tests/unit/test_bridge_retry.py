"""Retry decisions (mcp_operator.bridge.retry): only transient failures of read-only or
idempotent tools, bounded attempts, exponential backoff with full jitter, the deadline."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_operator.api.bridge_policy import RetryPolicy
from mcp_operator.bridge.errors import UpstreamRejected, UpstreamUnavailable
from mcp_operator.bridge.retry import backoff_bound_ms, next_delay, retry_safe

POLICY = RetryPolicy(max_attempts=3, initial_backoff_ms=100, max_backoff_ms=250)
READ_ONLY = {"readOnlyHint": True}


def delay(
    attempt: int = 1,
    failure: BaseException | None = None,
    annotations: dict[str, Any] | None = None,
    remaining: float = 30.0,
    random: float = 0.5,
) -> float | None:
    return next_delay(
        attempt=attempt,
        failure=failure or UpstreamUnavailable("connection refused"),
        annotations=READ_ONLY if annotations is None else annotations,
        policy=POLICY,
        remaining_seconds=remaining,
        random=lambda: random,
    )


@pytest.mark.parametrize(
    ("annotations", "safe"),
    [
        ({"readOnlyHint": True}, True),
        ({"idempotentHint": True}, True),
        ({"readOnlyHint": False, "idempotentHint": True}, True),
        ({}, False),
        ({"readOnlyHint": False}, False),
        ({"destructiveHint": False}, False),
        ({"readOnlyHint": "true"}, False),
    ],
)
def test_only_read_only_or_idempotent_tools_are_retry_safe(
    annotations: dict[str, Any], safe: bool
) -> None:
    assert retry_safe(annotations) is safe
    assert (delay(annotations=annotations) is not None) is safe


def test_a_transient_failure_is_retried_up_to_max_attempts_minus_one_times() -> None:
    assert delay(attempt=1) is not None
    assert delay(attempt=2) is not None
    assert delay(attempt=3) is None


@pytest.mark.parametrize(
    "failure",
    [UpstreamRejected("bad params", -32602), ValueError("bug"), TimeoutError()],
)
def test_other_failures_are_never_retried(failure: BaseException) -> None:
    assert delay(failure=failure) is None


def test_the_backoff_doubles_up_to_its_cap() -> None:
    assert [backoff_bound_ms(a, POLICY) for a in (1, 2, 3, 4)] == [100, 200, 250, 250]


def test_full_jitter_spreads_the_wait_from_zero_to_the_bound() -> None:
    assert delay(attempt=2, random=0.0) == 0.0
    assert delay(attempt=2, random=0.5) == pytest.approx(0.1)
    assert delay(attempt=2, random=0.999) == pytest.approx(0.1998)


def test_no_retry_whose_wait_would_pass_the_deadline() -> None:
    assert delay(attempt=1, random=0.5, remaining=0.04) is None
    assert delay(attempt=1, random=0.5, remaining=0.06) == pytest.approx(0.05)


def test_a_single_attempt_policy_never_retries() -> None:
    once = RetryPolicy(max_attempts=1)
    assert (
        next_delay(
            attempt=1,
            failure=UpstreamUnavailable("reset"),
            annotations=READ_ONLY,
            policy=once,
            remaining_seconds=30,
            random=lambda: 0.5,
        )
        is None
    )
