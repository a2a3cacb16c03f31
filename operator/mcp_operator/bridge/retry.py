"""Retry decisions: which failed attempts are tried again, and after how long.

Only a transient upstream failure (:class:`~mcp_operator.bridge.errors.UpstreamUnavailable`)
of a tool the server annotated ``readOnlyHint`` or ``idempotentHint`` true is retried, at most
``maxAttempts - 1`` times, with exponential backoff and full jitter (the wait is uniform in
``[0, min(maxBackoffMs, initialBackoffMs * 2**(attempt-1))]``), and never past the call's
deadline. Any other call is never repeated: it may have had effects. Pure: the caller passes
the random source and the time left; sleeping is the pipeline's job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mcp_operator.api.bridge_policy import RetryPolicy
from mcp_operator.bridge.errors import UpstreamFailure


def retry_safe(annotations: Mapping[str, Any]) -> bool:
    """Whether the tool's annotations say repeating a call is harmless."""
    return annotations.get("readOnlyHint") is True or annotations.get("idempotentHint") is True


def backoff_bound_ms(attempt: int, policy: RetryPolicy) -> float:
    """The upper bound of the wait after failed attempt number ``attempt`` (1-based)."""
    return float(min(policy.max_backoff_ms, policy.initial_backoff_ms * 2 ** (attempt - 1)))


def next_delay(
    *,
    attempt: int,
    failure: BaseException,
    annotations: Mapping[str, Any],
    policy: RetryPolicy,
    remaining_seconds: float,
    random: Callable[[], float],
) -> float | None:
    """Seconds to wait before attempt ``attempt + 1``, or ``None`` when there is none.

    ``attempt`` is the number of the attempt that just failed with ``failure``;
    ``remaining_seconds`` is the time left before the call's deadline; ``random`` returns a
    float in ``[0, 1)``.
    """
    if not isinstance(failure, UpstreamFailure) or not failure.transient:
        return None
    if not retry_safe(annotations) or attempt >= policy.max_attempts:
        return None
    delay = random() * backoff_bound_ms(attempt, policy) / 1000.0
    if delay >= remaining_seconds:
        return None
    return delay
