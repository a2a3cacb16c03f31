"""The structured tool error: what every failure of a call becomes before the agent sees it.

A failure is never a bare JSON-RPC error or a stack trace: it is a ``CallToolResult`` with
``isError: true`` whose ``structuredContent`` carries a stable ``code`` (exactly the audit
outcome codes) and a ``hint`` a model can act on. This module owns the codes, the error type,
its rendering, and the failure type by which an upstream call function reports how it failed.
Writing the hints for each situation is the job of the step that fails (validation, hooks,
the pipeline).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.scrub import Scrubber

ErrorCode = Literal[
    "not_allowlisted",
    "invalid_arguments",
    "pii_blocked",
    "pii_unscannable",
    "hook_failed",
    "upstream_unavailable",
    "upstream_error",
    "circuit_open",
    "timeout",
    "cancelled",
    "upstream_unauthorized",
    "insufficient_scope",
    "definition_changed",
    "policy_denied",
    "rate_limited",
    "approval_denied",
    "approval_timeout",
]

ERROR_CODES: tuple[ErrorCode, ...] = get_args(ErrorCode)
"""Every code a failed call can carry; with ``ok`` they are the audit outcomes."""

OutcomeCode = Literal["ok", "invalid_request"] | ErrorCode
"""An audit outcome: ``ok``, a failed call's code, or ``invalid_request`` for a request the
bridge could not read as a call (bad JSON, wrong types), answered with a JSON-RPC error."""

MAX_HINT_CHARS = 2000
"""A hint is cut to this many characters (it goes into a model's context)."""


@dataclass(frozen=True)
class ToolError:
    """A failed call as the agent sees it: a stable ``code``, a ``hint``, and facts to act on."""

    code: ErrorCode
    hint: str
    details: Mapping[str, Any] = field(default_factory=dict)
    """Extra machine-readable facts (``fields``, ``retryAfterSeconds``, ``similar``, …)."""

    def masked(self, scrubber: Scrubber) -> ToolError:
        """This error with every header value in use masked in its hint and details (an
        upstream can echo the credential it was sent into the message it fails with)."""
        if not scrubber:
            return self
        return ToolError(self.code, scrubber(self.hint), scrubber.json(dict(self.details)))

    def to_result(self) -> dict[str, Any]:
        """The MCP ``CallToolResult``: ``isError``, the text for models that read only
        ``content``, and ``structuredContent`` with code, hint and details."""
        hint = self.hint if len(self.hint) <= MAX_HINT_CHARS else self.hint[: MAX_HINT_CHARS - 1]
        structured = {"code": self.code, "hint": hint, **self.details}
        return {
            "content": [{"type": "text", "text": f"{self.code}: {hint}"}],
            "structuredContent": structured,
            "isError": True,
        }


UpstreamFailure = McpFailure
"""How an upstream call function says a call failed: the session's one failure type
(:class:`~mcp_operator.mcp.failures.McpFailure`), passed on as the wire gave it. Its message
may quote the server, so the pipeline masks it with the header values in use before the
agent sees it; ``transient`` says whether trying again may succeed (only such failures are
retried); ``code`` is the JSON-RPC error code when the server answered with one."""


class UpstreamUnavailable(McpFailure):
    """The server could not be reached or lost the call (how a test's fake upstream says
    it): transient; counts against the circuit breaker."""

    def __init__(self, message: str) -> None:
        super().__init__("connection", message)


class UpstreamMisconfigured(McpFailure):
    """The bridge cannot call the server as configured (a header value it must not send):
    nothing was sent, and repeating the call cannot help until the configuration changes
    (the pipeline catches it before any retry decision)."""

    def __init__(self, message: str) -> None:
        super().__init__("connect", message)


class UpstreamRejected(McpFailure):
    """The server answered the call with a JSON-RPC error (it is up, but said no)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__("rpc", message, code=code)


class CallCancelled(McpFailure):
    """The agent cancelled the call (``notifications/cancelled``, or a 2026-07-28 agent closed
    its request): the server was told and nobody waits for its answer. Not the server's
    fault: it counts neither for nor against its circuit breaker."""

    def __init__(self, message: str) -> None:
        super().__init__("rpc", message)
