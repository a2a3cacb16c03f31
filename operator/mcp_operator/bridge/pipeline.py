"""The one call pipeline: validate → before-hooks → call → after-hooks → normalise-error.

Every ``tools/call`` the agent makes goes through :meth:`CallPipeline.call`, and nowhere else
decides what happens to a call. It yields the result for the agent (the upstream's
``CallToolResult``, or a structured tool error) and the audit record.

1. **validate**: the exposed name must be in the catalog and pass the server's filter layers
   (``not_allowlisted``), its live definition must be the pinned one (``definition_changed``,
   :mod:`~mcp_operator.bridge.pinning`), the arguments must match the tool's schema
   (``invalid_arguments``); then **authorize**: the authorization rules
   (``policy_denied``, :mod:`~mcp_operator.bridge.rules`) and the rate limits
   (``rate_limited``, :mod:`~mcp_operator.bridge.ratelimit`);
2. **before-hooks**, always, even when validation refused the call (PII on the arguments);
   a hook that says a value is large (``offload``) runs in a worker thread for it;
   then, for a call the rules hold for approval, the **approval** (``approval_denied``,
   ``approval_timeout``, :mod:`~mcp_operator.bridge.approval`), after the hooks so that the
   person sees the arguments that would be sent;
3. **call**, unless refused: the injected upstream call function, under the call's deadline
   (``timeout``; for an approved call it starts once the person answered), the server's
   circuit breaker (``circuit_open``) and the retry rules
   (``upstream_unavailable`` once they give up; ``upstream_error`` when the server said no;
   ``cancelled`` when the agent cancelled the call, :mod:`~mcp_operator.bridge.relay`;
   ``upstream_unauthorized`` / ``insufficient_scope`` when its authorization layer or the
   token endpoint did, :mod:`~mcp_operator.bridge.unauthorized`);
4. **after-hooks**, always (PII on the result);
5. **normalise-error**: any failure becomes :meth:`ToolError.to_result`, with every header
   value in use masked (:class:`~mcp_operator.mcp.scrub.Scrubber`, the probe's; the pool
   gives it, :attr:`CallPipeline.scrubber`): whatever the upstream client below put in a
   failure, and the text of a ``CallToolResult`` that says ``isError``, reach neither the
   agent nor the audit with a credential in them. The audit record names only catalog tools
   (a made-up name is ``(unknown)`` with :func:`~mcp_operator.bridge.audit.tool_digest`).

No sockets and no clock of its own: the caller injects the upstream call, a :class:`Clock`
(monotonic time, wall time, sleep) and the random source of the retry jitter. Upstream
sessions, the HTTP front and metrics are other modules' jobs.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from mcp_operator.api.bridge import BridgeConfig, UpstreamServer
from mcp_operator.bridge import pinning
from mcp_operator.bridge.approval import Approver, no_approver
from mcp_operator.bridge.audit import UNKNOWN_TOOL, AuditRecord, arguments_digest, tool_digest
from mcp_operator.bridge.breaker import CircuitBreaker
from mcp_operator.bridge.catalog import Catalog, server_key
from mcp_operator.bridge.errors import (
    CallCancelled,
    ErrorCode,
    OutcomeCode,
    ToolError,
    UpstreamFailure,
    UpstreamMisconfigured,
)
from mcp_operator.bridge.hooks import Call, CallOutcome, Hook
from mcp_operator.bridge.overrides import fixed_named
from mcp_operator.bridge.ratelimit import RateLimiter, limited
from mcp_operator.bridge.retry import next_delay, retry_safe
from mcp_operator.bridge.rules import ALLOWED, Decision, RuleBook, denied
from mcp_operator.bridge.unauthorized import unauthorized
from mcp_operator.bridge.validate import ArgumentValidator, invalid_arguments
from mcp_operator.mcp.naming import cut, quoted
from mcp_operator.mcp.scrub import NOTHING

logger = logging.getLogger(__name__)

MAX_LISTED_TOOLS = 10
"""A refusal hint names at most this many tools the agent may call instead."""

UpstreamCall = Callable[[UpstreamServer, str, Mapping[str, Any]], Awaitable[Mapping[str, Any]]]
"""``(server, original tool name, arguments)`` → the server's ``CallToolResult``; raises
:class:`~mcp_operator.bridge.errors.UpstreamFailure` subclasses for failures."""

MAX_UPSTREAM_MESSAGE = 300
"""An upstream's error message is cut to this many characters in a hint."""


class Clock(Protocol):
    """Time as the caller provides it."""

    def monotonic(self) -> float:
        """Seconds on a monotonic clock (durations, deadlines, the breakers)."""
        ...

    def now(self) -> datetime:
        """Wall-clock time, timezone-aware (the audit record)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait between attempts."""
        ...


@dataclass(frozen=True)
class CallReport:
    """The pipeline's answer to one call."""

    result: dict[str, Any]
    """The ``CallToolResult`` for the agent."""
    audit: AuditRecord


def _nobody(_server: str) -> tuple[str | None, str | None]:
    return None, None


class CallPipeline:
    """The call pipeline of one bridge: its configuration, catalog, hooks and breakers."""

    def __init__(
        self,
        config: BridgeConfig,
        catalog: Catalog,
        *,
        upstream: UpstreamCall,
        clock: Clock,
        random: Callable[[], float],
        hooks: Sequence[Hook] = (),
        validator: ArgumentValidator | None = None,
        approver: Approver | None = None,
    ) -> None:
        self.upstream = upstream
        self.clock = clock
        self.random = random
        self.hooks = list(hooks)
        self.validator = validator or ArgumentValidator()
        self.breakers: dict[str, CircuitBreaker] = {}
        self.scrubber = NOTHING
        """Masks the header values in use (set by whoever reads them: the upstream pool)."""
        self.upstream_identity: Callable[[str], tuple[str | None, str | None]] = _nobody
        """The subject and actor of the token a server (by key) is called with, for the
        audit line (set from the upstream pool)."""
        self.problems: dict[str, str] = {}
        """Why a server cannot be called at all, by server key (set from the upstream pool);
        named in the hint of a refused call that names one of its tools."""
        self.limiter = RateLimiter()
        self.approver: Approver | None = approver
        """Asks a person about calls that the rules hold for approval (none: refused)."""
        self.reconfigure(config, catalog)

    def reconfigure(self, config: BridgeConfig, catalog: Catalog) -> None:
        """Take a new configuration and catalog; breakers of servers that stay keep state."""
        self.config = config
        self.catalog = catalog
        self.run = f"{config.run.namespace}/{config.run.name}"
        who = config.identity
        self.identity = (
            None
            if who is None
            else {
                "namespace": who.namespace,
                "serviceAccount": who.service_account,
                **({"pod": who.pod} if who.pod else {}),
            }
        )
        self.servers = {server_key(s): s for s in config.servers}
        breakers: dict[str, CircuitBreaker] = {}
        for key, server in self.servers.items():
            policy = server.policy.circuit_breaker
            breaker = self.breakers.get(key) or CircuitBreaker(
                policy.failure_threshold, policy.open_seconds
            )
            breaker.failure_threshold = policy.failure_threshold
            breaker.open_seconds = policy.open_seconds
            breakers[key] = breaker
        self.breakers = breakers
        self.rules = RuleBook(config, catalog)
        self.limiter.forget_others(catalog.entries)

    def listing(self) -> list[dict[str, Any]]:
        """The agent's ``tools/list``: the catalog's listing without the tools the rules
        deny whatever the arguments (:class:`~mcp_operator.bridge.rules.RuleBook`)."""
        hidden = self.rules.hidden
        return [tool for tool in self.catalog.listing() if tool.get("name") not in hidden]

    # -- the steps ---------------------------------------------------------------------------

    def _allowed_near(self, exposed_name: str) -> list[str]:
        """The callable tools of the server whose prefix ``exposed_name`` starts with, else all."""
        names = self.catalog.names()
        head = exposed_name.split("_", 1)[0] + "_"
        return [name for name in names if name.startswith(head)] or names

    def _broken_servers(self, exposed_name: str) -> list[str]:
        """The servers that cannot be called whose prefix ``exposed_name`` starts with."""
        return sorted(
            key
            for key, server in self.servers.items()
            if key in self.problems and exposed_name.startswith(f"{server.prefix}_")
        )

    def _validate(self, call: Call) -> None:
        """Resolve and check the call; set ``call.refusal`` (and ``call.schema_problem``)."""
        entry = self.catalog.get(call.exposed_name)
        server = self.servers.get(entry.server) if entry is not None else None
        if entry is None or server is None or not server.allows(entry.original_name):
            similar = self.catalog.similar(call.exposed_name)
            allowed = similar or self._allowed_near(call.exposed_name)
            shown = allowed[:MAX_LISTED_TOOLS]
            if similar:
                listing = f" Similar tools you may call: {', '.join(shown)}."
            elif shown:
                more = len(allowed) - len(shown)
                listing = f" Tools you may call: {', '.join(shown)}" + (
                    f" and {more} more (tools/list shows them all)." if more > 0 else "."
                )
            else:
                listing = " This agent may call no tools right now."
            broken = self._broken_servers(call.exposed_name)
            details: dict[str, Any] = {"similar": similar, "allowed": shown}
            if broken:
                listing += "".join(
                    f" Server {key} cannot be called: {self.scrubber(self.problems[key])}."
                    for key in broken
                )
                details["misconfigured"] = broken
            call.refusal = ToolError(
                "not_allowlisted",
                f"The tool {quoted(call.exposed_name)} is not available to this agent; the "
                f"call was not sent.{listing}",
                details,
            )
            return
        call.entry, call.server = entry, server
        if entry.drift is not None:
            call.refusal = pinning.refusal(
                entry.exposed_name, server, entry.original_name, entry.drift, entry.sha256
            )
            return
        verdict = self.validator.check(entry, call.arguments)
        if not verdict.ok:
            call.refusal = invalid_arguments(entry, verdict)
        elif call.arguments is None:
            call.arguments = {}
        if call.refusal is None and entry.fixed_arguments and isinstance(call.arguments, dict):
            named = sorted(set(call.arguments) & set(entry.fixed_arguments))
            if named:
                call.refusal = fixed_named(entry.exposed_name, named)
            else:
                call.arguments = {**call.arguments, **entry.fixed_arguments}
        call.schema_problem = verdict.schema_problem
        if verdict.schema_problem is not None and call.refusal is None:
            logger.warning("Forwarded %s unchecked: %s", entry.exposed_name, verdict.schema_problem)

    def _authorize(self, call: Call) -> Decision:
        """The rules' verdict, then the rate limits; sets ``call.refusal`` when refused."""
        assert call.entry is not None and call.server is not None
        decision = self.rules.decide(call.entry.exposed_name, call.arguments)
        if decision.rule is not None:
            call.authorization.update(rule=decision.describe(), action=decision.action)
        if decision.action == "deny":
            call.refusal = denied(call.entry.exposed_name, decision)
            return decision
        wait = self.limiter.take(call.server, call.entry, self.clock.monotonic())
        if wait > 0.0:
            call.refusal = limited(call.entry.exposed_name, call.entry.server, wait)
        return decision

    async def _approve(self, call: Call, decision: Decision) -> None:
        """Hold the call until a person answers (the approver), or refuse it."""
        assert call.entry is not None
        if self.approver is None:
            call.authorization["approval"] = {"decision": "unavailable"}
            call.refusal = no_approver(call.entry.exposed_name, decision)
            return
        try:
            call.refusal = await self.approver.ask(call, decision)
        except CallCancelled:  # the agent cancelled while it was being asked
            call.refusal = self._cancelled(call)

    async def _before(self, call: Call) -> None:
        for hook in self.hooks:
            try:
                if _offloaded(hook, call, "arguments", call.arguments):
                    refusal = await asyncio.to_thread(hook.before_call, call)
                else:
                    refusal = hook.before_call(call)
            except Exception as error:
                refusal = _hook_failed(hook, call, error, "before")
            if call.refusal is None:
                call.refusal = refusal

    async def _after(self, call: Call, outcome: CallOutcome) -> None:
        for hook in self.hooks:
            try:
                if _offloaded(hook, call, "results", outcome.result):
                    await asyncio.to_thread(hook.after_call, call, outcome)
                else:
                    hook.after_call(call, outcome)
            except Exception as error:
                outcome.result = None
                outcome.error = _hook_failed(hook, call, error, "after")

    async def _send(self, call: Call, outcome: CallOutcome, deadline: float) -> None:
        """Call the upstream under deadline, breaker and retry rules; fill ``outcome``."""
        assert call.entry is not None and call.server is not None
        entry, server = call.entry, call.server
        breaker = self.breakers[entry.server]
        while True:
            now = self.clock.monotonic()
            if not breaker.allow(now):
                outcome.error = self._circuit_open(call, breaker, now)
                return
            outcome.attempts += 1
            try:
                # asyncio.timeout, not wait_for: no extra task per call on the hot path.
                async with asyncio.timeout(max(0.0, deadline - now)):
                    result = await self.upstream(server, entry.original_name, call.arguments)
            except asyncio.CancelledError:
                breaker.release()
                raise
            except TimeoutError:
                breaker.record_failure(self.clock.monotonic())
                outcome.error = self._timeout(call)
                return
            except CallCancelled:
                breaker.release()
                outcome.error = self._cancelled(call)
                return
            except UpstreamMisconfigured as error:
                breaker.release()
                outcome.attempts -= 1  # nothing was sent
                outcome.error = self._misconfigured(call, error)
                return
            except Exception as error:
                if isinstance(error, UpstreamFailure) and not error.transient:
                    breaker.record_success(self.clock.monotonic())  # it answered: it is up
                    refused = unauthorized(call.entry.server if call.entry else "?", error)
                    outcome.error = self._rejected(call, error) if refused is None else refused
                    return
                now = self.clock.monotonic()
                breaker.record_failure(now)
                delay = next_delay(
                    attempt=outcome.attempts,
                    failure=error,
                    annotations=entry.annotations,
                    policy=server.policy.retry,
                    remaining_seconds=deadline - now,
                    random=self.random,
                )
                if delay is None or breaker.state(now) == "open":
                    outcome.error = self._unavailable(call, error, outcome.attempts, breaker, now)
                    return
                await self.clock.sleep(delay)
                continue
            breaker.record_success(self.clock.monotonic())
            outcome.result = result
            return

    # -- the hints ---------------------------------------------------------------------------

    def _circuit_open(self, call: Call, breaker: CircuitBreaker, now: float) -> ToolError:
        server = call.entry.server if call.entry else "?"
        wait = math.ceil(breaker.remaining_open(now))
        when = f"in {wait} s" if wait else "once the trial call in flight has finished"
        return ToolError(
            "circuit_open",
            f"Server {server} is unavailable: its recent calls failed, so the bridge stopped "
            f"calling it and will try again {when}. The call was not sent. Tools of other "
            "servers keep working.",
            {"server": server, "retryAfterSeconds": wait},
        )

    def _timeout(self, call: Call) -> ToolError:
        server = call.entry.server if call.entry else "?"
        seconds = call.policy.timeout_seconds
        return ToolError(
            "timeout",
            f"Server {server} did not answer {call.exposed_name} within {seconds} s. The call "
            "may still have run: check its effect before repeating it.",
            {"server": server, "timeoutSeconds": seconds},
        )

    def _cancelled(self, call: Call) -> ToolError:
        server = call.entry.server if call.entry else "?"
        return ToolError(
            "cancelled",
            f"The call to {call.exposed_name} was cancelled by the agent; server {server} was "
            "told to stop. It may have partly run.",
            {"server": server},
        )

    def _rejected(self, call: Call, error: UpstreamFailure) -> ToolError:
        server = call.entry.server if call.entry else "?"
        code = f" (JSON-RPC error {error.code})" if error.code is not None else ""
        message = cut(self.scrubber(str(error)) or "no message", MAX_UPSTREAM_MESSAGE)
        hint = f"Server {server} refused {call.exposed_name}{code}: {message}"
        if call.schema_problem is not None:
            hint += (
                f" Note: the bridge could not check these arguments because the tool's "
                f"schema is broken ({call.schema_problem}); compare them with its description."
            )
        return ToolError("upstream_error", hint, {"server": server, "rpcCode": error.code})

    def _misconfigured(self, call: Call, error: UpstreamMisconfigured) -> ToolError:
        server = call.entry.server if call.entry else "?"
        reason = cut(self.scrubber(str(error)), MAX_UPSTREAM_MESSAGE)
        return ToolError(
            "upstream_unavailable",
            f"Server {server} cannot be called: {reason}. The call was not sent; calling "
            "again will not help until its configuration is fixed. Tools of other servers "
            "keep working.",
            {"server": server, "attempts": 0, "misconfigured": True},
        )

    def _unavailable(
        self,
        call: Call,
        error: Exception,
        attempts: int,
        breaker: CircuitBreaker,
        now: float,
    ) -> ToolError:
        entry = call.entry
        assert entry is not None
        reason = cut(self.scrubber(str(error)) or type(error).__name__, MAX_UPSTREAM_MESSAGE)
        if not isinstance(error, UpstreamFailure):
            reason = f"{type(error).__name__}: {reason}"
        tries = "once" if attempts == 1 else f"{attempts} times"
        hint = f"Server {entry.server} could not be reached (tried {tries}): {reason}."
        if attempts == 1 and not retry_safe(entry.annotations):
            hint += (
                f" {entry.exposed_name} is not marked read-only or idempotent, so the bridge "
                "did not retry it; it may or may not have run."
            )
        wait = math.ceil(breaker.remaining_open(now))
        if breaker.state(now) == "open":
            hint += f" The bridge will not call this server for {wait} s."
        hint += " Tools of other servers keep working."
        details = {"server": entry.server, "attempts": attempts, "retryAfterSeconds": wait}
        return ToolError("upstream_unavailable", hint, details)

    # -- the pipeline ------------------------------------------------------------------------

    async def call(self, exposed_name: str, arguments: Any) -> CallReport:
        """Run one ``tools/call`` through every step; never raises for a failed call."""
        started = self.clock.monotonic()
        arrived = self.clock.now()
        digest = arguments_digest(arguments)
        call = Call(run=self.run, exposed_name=exposed_name, arguments=arguments)
        self._validate(call)
        decision = self._authorize(call) if call.refusal is None else ALLOWED
        await self._before(call)
        sending = started
        if call.refusal is None and decision.action == "approve":
            await self._approve(call, decision)
            sending = self.clock.monotonic()  # the timeout is the call's, not the person's
        outcome = CallOutcome(error=call.refusal)
        if call.refusal is None:
            deadline = sending + call.policy.timeout_seconds
            await self._send(call, outcome, deadline)
        await self._after(call, outcome)

        code: OutcomeCode
        if outcome.error is not None:
            result = outcome.error.masked(self.scrubber).to_result()
            code = outcome.error.code
        else:
            result = dict(outcome.result or {})
            code = "upstream_error" if result.get("isError") is True else "ok"
            if code == "upstream_error":
                result = self.scrubber.json(result)
        known = self.catalog.get(exposed_name) is not None
        subject, actor = self.upstream_identity(call.entry.server) if call.entry else (None, None)
        audit = AuditRecord(
            time=arrived,
            run=self.run,
            identity=self.identity,
            server=call.entry.server if call.entry else None,
            tool=exposed_name if known else UNKNOWN_TOOL,
            tool_sha256=None if known else tool_digest(exposed_name),
            original_tool=call.entry.original_name if call.entry else None,
            outcome=code,
            duration_ms=(self.clock.monotonic() - started) * 1000.0,
            attempts=outcome.attempts,
            arguments_sha256=digest,
            pii={direction: dict(counts) for direction, counts in call.pii.items()},
            schema_unchecked=call.schema_problem is not None,
            pii_unscanned=tuple(call.pii_unscanned),
            upstream_subject=subject,
            upstream_actor=actor,
            policy=dict(call.authorization),
        )
        return CallReport(result=result, audit=audit)

    def unreadable(self, sent: Any) -> AuditRecord:
        """The audit record of a request that could not be read as a call (bad JSON, wrong
        types, a refused HTTP request): ``invalid_request``, with a hash of what was sent."""
        return AuditRecord(
            time=self.clock.now(),
            run=self.run,
            identity=self.identity,
            server=None,
            tool=UNKNOWN_TOOL,
            tool_sha256=tool_digest(sent),
            original_tool=None,
            outcome="invalid_request",
            duration_ms=0.0,
            attempts=0,
            arguments_sha256=None,
        )


def _offloaded(hook: Hook, call: Call, direction: str, value: Any) -> bool:
    """Whether the hook asks for a worker thread for this value of the call (a large scan must
    not stall the calls of other sessions on the event loop)."""
    offload = getattr(hook, "offload", None)
    return value is not None and callable(offload) and bool(offload(call, direction, value))


def _hook_failed(hook: Hook, call: Call, error: Exception, when: str) -> ToolError:
    """A crashing hook fails closed: the call (or its result) is stopped, as by a policy, with
    a code of its own (a fault of the bridge is not the agent's personal data)."""
    name = getattr(hook, "name", type(hook).__name__)
    tool = call.entry.exposed_name if call.entry is not None else UNKNOWN_TOOL
    logger.error("Bridge hook %s failed %s %s: %s", name, when, tool, type(error).__name__)
    code: ErrorCode = "hook_failed"
    stopped = "the call was not sent" if when == "before" else "its result was withheld"
    return ToolError(
        code,
        f"The bridge's policy hook {name} failed on this call, so {stopped}. This is a fault "
        "of the bridge, not of the arguments; report it rather than retrying.",
        {"hook": name},
    )
