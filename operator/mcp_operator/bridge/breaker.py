"""A circuit breaker per server: stop calling a server that keeps failing, try it again later.

closed → open after ``failureThreshold`` consecutive failures → half-open once ``openSeconds``
have passed (one trial call at a time is let through) → closed on that call's success, open
again on its failure. Pure: the caller passes ``now`` (a monotonic clock, in seconds) to every
method. What counts as a failure (an unreachable server, a timeout; not a JSON-RPC error) is
the pipeline's decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

State = Literal["closed", "open", "half-open"]


@dataclass
class CircuitBreaker:
    """The breaker of one server."""

    failure_threshold: int
    open_seconds: float
    failures: int = 0
    """Consecutive failures so far."""
    opened_at: float | None = None
    """When the circuit last opened; ``None`` while closed."""
    trial_in_flight: bool = False
    """Half-open: the one trial call is running."""

    def state(self, now: float) -> State:
        if self.opened_at is None:
            return "closed"
        if now - self.opened_at < self.open_seconds:
            return "open"
        return "half-open"

    def remaining_open(self, now: float) -> float:
        """Seconds until the circuit lets a trial call through (0 when it would now)."""
        if self.opened_at is None:
            return 0.0
        return max(0.0, self.opened_at + self.open_seconds - now)

    def allow(self, now: float) -> bool:
        """Whether a call may go out now; in half-open state, claims the one trial."""
        state = self.state(now)
        if state == "closed":
            return True
        if state == "open" or self.trial_in_flight:
            return False
        self.trial_in_flight = True
        return True

    def record_success(self, now: float) -> None:
        self.failures = 0
        self.opened_at = None
        self.trial_in_flight = False

    def record_failure(self, now: float) -> None:
        self.failures += 1
        half_open_trial = self.trial_in_flight
        self.trial_in_flight = False
        if half_open_trial or self.failures >= self.failure_threshold:
            self.opened_at = now

    def release(self) -> None:
        """A claimed trial ended with no verdict (the call was cancelled): let another try."""
        self.trial_in_flight = False
