"""The call policy of the bridge file: how calls to one server are governed, and tightening.

This module owns the policy part of the bridge configuration (:mod:`mcp_operator.api.bridge`):

- the models of one server's effective policy (:class:`CallPolicy`: PII modes, retries, the
  timeout, the circuit breaker, authorization rules, rate limits, approval);
- what a run asks of that policy (:class:`CallPolicyOverride`);
- :func:`tighten`: the effective policy of one server for one run, where the run may only
  make the server's defaults stricter. Pure.

Enforcing the policy is the bridge's job.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints, field_validator, model_validator

from mcp_operator.api.common import ConfigModel, Glob, Globs
from mcp_operator.api.expressions import MAX_EXPRESSION_CHARS, check_expression

PiiMode = Literal["off", "detect", "redact", "block"]
"""What PII scanning does in one direction: nothing, report, rewrite, or refuse the call."""

PII_MODE_ORDER: tuple[PiiMode, ...] = ("off", "detect", "redact", "block")
"""PII modes from the most lenient to the strictest (``tighten`` keeps the stricter)."""


class PiiPolicy(ConfigModel):
    """PII scanning per direction."""

    arguments: PiiMode = "off"
    """Mode for a call's arguments, scanned before the call leaves the Pod."""
    results: PiiMode = "off"
    """Mode for a call's result, scanned before the agent sees it."""


class RetryPolicy(ConfigModel):
    """Retries of transient upstream failures (only for read-only or idempotent tools)."""

    max_attempts: int = Field(default=3, ge=1, le=5)
    """Attempts in all: 3 is one call and two retries; 1 never retries."""
    initial_backoff_ms: int = Field(default=100, ge=1, le=60_000)
    """Upper bound of the first wait (full jitter: the wait is uniform in [0, bound])."""
    max_backoff_ms: int = Field(default=2000, ge=1, le=300_000)
    """Cap of the bound, which doubles after each attempt."""

    @model_validator(mode="after")
    def _ordered(self) -> RetryPolicy:
        if self.initial_backoff_ms > self.max_backoff_ms:
            raise ValueError("initialBackoffMs must not be greater than maxBackoffMs")
        return self


class CircuitBreakerPolicy(ConfigModel):
    """When the bridge stops calling a server that keeps failing, and for how long."""

    failure_threshold: int = Field(default=5, ge=1, le=1000)
    """Consecutive failed calls that open the circuit."""
    open_seconds: int = Field(default=30, ge=1, le=3600)
    """Seconds the circuit stays open before one trial call is let through."""


class Rule(ConfigModel):
    """An authorization rule (``spec.policy.rules`` of the MCPServer, ``spec.bridge.policy.
    rules`` of the AgentRun), evaluated by :mod:`mcp_operator.bridge.rules`."""

    match: Annotated[str, StringConstraints(min_length=1, max_length=MAX_EXPRESSION_CHARS)]
    """A CEL expression over ``caller``, ``server``, ``tool`` and ``arguments``."""
    action: Literal["allow", "deny", "approve"]
    """What a call the expression matches gets."""
    reason: Annotated[str, StringConstraints(max_length=512)] | None = None
    """Said to the agent when the rule refuses a call (the hint of ``policy_denied``)."""
    layer: Literal["server", "run"] = "server"
    """Whose rule: the server's (first) or the run's, which may only add restrictions."""

    @field_validator("match")
    @classmethod
    def _compiles(cls, value: str) -> str:
        return check_expression(value)


class RateLimit(ConfigModel):
    """A token bucket per matching tool (``spec.policy.rateLimits``, ``spec.bridge.policy.
    rateLimits``), kept by :mod:`mcp_operator.bridge.ratelimit`."""

    tools: Annotated[list[Glob], Field(min_length=1, max_length=64)]
    """Globs on the original or the exposed tool name."""
    per_minute: int = Field(ge=1, le=100_000)
    """Tokens added per minute."""
    burst: int | None = Field(default=None, ge=1, le=10_000)
    """Most tokens held at once (calls in a burst); unset: ``perMinute``."""
    layer: Literal["server", "run"] = "server"
    """Whose limit (every limit that matches applies)."""


class CallPolicy(ConfigModel):
    """How calls to one server are governed (the effective policy, after :func:`tighten`)."""

    pii: PiiPolicy = Field(default_factory=PiiPolicy)
    """PII scanning of arguments and results."""
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    """Retries of transient failures."""
    timeout_seconds: int = Field(default=30, ge=1, le=3600)
    """Deadline of one call, all attempts and waits included."""
    circuit_breaker: CircuitBreakerPolicy = Field(default_factory=CircuitBreakerPolicy)
    """The per-server circuit breaker."""
    rules: Annotated[list[Rule], Field(max_length=128)] = Field(default_factory=list)
    """Authorization rules, the server's then the run's."""
    rate_limits: Annotated[list[RateLimit], Field(max_length=64)] = Field(default_factory=list)
    """Rate limits, the server's and the run's (all that match apply)."""
    require_approval: Globs = Field(default_factory=list)
    """Tools (globs on the original or exposed name) every call of which waits for a
    person's approval (the server's and the run's)."""
    approve_destructive: bool = False
    """Every call of a tool that may be destructive (its pinned ``destructiveHint`` is not
    false and it is not ``readOnlyHint``; unknown counts as destructive) waits for approval."""


# -- policy tightening ---------------------------------------------------------------------


class PiiOverride(ConfigModel):
    """A run's PII modes; unset means the server's."""

    arguments: PiiMode | None = None
    """The run's mode for arguments; kept only when stricter than the server's."""
    results: PiiMode | None = None
    """The run's mode for results; kept only when stricter than the server's."""


class RetryOverride(ConfigModel):
    """A run's retry settings; unset means the server's."""

    max_attempts: int | None = Field(default=None, ge=1, le=5)
    """Kept when fewer than the server's."""
    initial_backoff_ms: int | None = Field(default=None, ge=1, le=60_000)
    """Kept when longer than the server's (gentler on the server)."""
    max_backoff_ms: int | None = Field(default=None, ge=1, le=300_000)
    """Kept when longer than the server's."""


class CircuitBreakerOverride(ConfigModel):
    """A run's circuit breaker settings; unset means the server's."""

    failure_threshold: int | None = Field(default=None, ge=1, le=1000)
    """Kept when lower than the server's (the circuit opens sooner)."""
    open_seconds: int | None = Field(default=None, ge=1, le=3600)
    """Kept when longer than the server's."""


class CallPolicyOverride(ConfigModel):
    """What a run asks of a server's call policy; :func:`tighten` keeps only what is stricter."""

    pii: PiiOverride = Field(default_factory=PiiOverride)
    """The run's PII modes."""
    retry: RetryOverride = Field(default_factory=RetryOverride)
    """The run's retry settings."""
    timeout_seconds: int | None = Field(default=None, ge=1, le=3600)
    """Kept when shorter than the server's."""
    circuit_breaker: CircuitBreakerOverride = Field(default_factory=CircuitBreakerOverride)
    """The run's circuit breaker settings."""
    rules: Annotated[list[Rule], Field(max_length=64)] = Field(default_factory=list)
    """The run's rules: they come after the server's and can only add restrictions."""
    rate_limits: Annotated[list[RateLimit], Field(max_length=32)] = Field(default_factory=list)
    """The run's rate limits: they apply besides the server's."""
    require_approval: Globs = Field(default_factory=list)
    """The run's tools that wait for approval, besides the server's."""
    approve_destructive: bool = False
    """The run asks approval for every destructive tool (kept when either asks)."""


def stricter_pii(first: PiiMode, second: PiiMode | None) -> PiiMode:
    """The stricter of two PII modes (``off`` < ``detect`` < ``redact`` < ``block``)."""
    if second is None:
        return first
    return max(first, second, key=PII_MODE_ORDER.index)


def _low(server: int, run: int | None) -> int:
    return server if run is None else min(server, run)


def _high(server: int, run: int | None) -> int:
    return server if run is None else max(server, run)


def tighten(server_default: CallPolicy, run_override: CallPolicyOverride | None) -> CallPolicy:
    """The effective policy: the server's defaults, made stricter (never looser) by the run.

    Stricter means: the stricter PII mode per direction; fewer attempts; a shorter timeout;
    longer backoffs (gentler on the server); a circuit that opens after fewer failures and
    stays open longer; the run's rules after the server's (:mod:`~mcp_operator.bridge.rules`
    lets them only add restrictions) and its rate limits besides the server's. An unset run
    field keeps the server's value. Pure.
    """
    if run_override is None:
        return server_default.model_copy(deep=True)
    run = run_override
    base = server_default
    return CallPolicy(
        pii=PiiPolicy(
            arguments=stricter_pii(base.pii.arguments, run.pii.arguments),
            results=stricter_pii(base.pii.results, run.pii.results),
        ),
        retry=RetryPolicy(
            max_attempts=_low(base.retry.max_attempts, run.retry.max_attempts),
            initial_backoff_ms=_high(base.retry.initial_backoff_ms, run.retry.initial_backoff_ms),
            max_backoff_ms=_high(base.retry.max_backoff_ms, run.retry.max_backoff_ms),
        ),
        timeout_seconds=_low(base.timeout_seconds, run.timeout_seconds),
        circuit_breaker=CircuitBreakerPolicy(
            failure_threshold=_low(
                base.circuit_breaker.failure_threshold, run.circuit_breaker.failure_threshold
            ),
            open_seconds=_high(base.circuit_breaker.open_seconds, run.circuit_breaker.open_seconds),
        ),
        rules=[*base.rules, *(r.model_copy(update={"layer": "run"}) for r in run.rules)],
        require_approval=list(dict.fromkeys([*base.require_approval, *run.require_approval])),
        approve_destructive=base.approve_destructive or run.approve_destructive,
        rate_limits=[
            *base.rate_limits,
            *(limit.model_copy(update={"layer": "run"}) for limit in run.rate_limits),
        ],
    )
