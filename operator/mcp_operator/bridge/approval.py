"""Human approval of a call the rules hold (``action: approve``): who is asked, and the answer.

:class:`Approver` is what the pipeline awaits for such a call: ``None`` lets the call go,
a :class:`~mcp_operator.bridge.errors.ToolError` refuses it (``approval_denied``, or
``approval_timeout`` when nobody answered in time: no answer is a denial). It records the
decision, who answered and how long it took in ``call.authorization["approval"]`` for the audit
line. Without an approver configured, a held call is refused (:func:`no_approver`).
"""

from __future__ import annotations

from typing import Protocol

from mcp_operator.bridge.errors import ToolError
from mcp_operator.bridge.hooks import Call
from mcp_operator.bridge.rules import Decision


class Approver(Protocol):
    """Asks a person whether a held call may go."""

    async def ask(self, call: Call, decision: Decision) -> ToolError | None:
        """``None``: approved; else the refusal. Records ``call.authorization["approval"]``."""
        ...


def _why(decision: Decision) -> str:
    reason = decision.rule.reason if decision.rule is not None else None
    return f" ({reason})" if reason else ""


def no_approver(exposed_name: str, decision: Decision) -> ToolError:
    """``approval_denied`` for a held call when this run has no way to ask anyone."""
    return ToolError(
        "approval_denied",
        f"{exposed_name} needs a person's approval{_why(decision)}, and this run has no "
        "approver configured, so the call was not sent. Do without it, or ask the run's "
        "owner to configure approval.",
        {"rule": decision.describe(), "approval": "unavailable"},
    )


def refused(exposed_name: str, decision: Decision, by: str | None) -> ToolError:
    """``approval_denied``: the person said no."""
    who = f" by {by}" if by else ""
    return ToolError(
        "approval_denied",
        f"The approval of {exposed_name}{_why(decision)} was refused{who}; the call was not "
        "sent. Do not call it again with the same arguments unless the situation changed.",
        {"rule": decision.describe(), "approval": "denied"},
    )


def timed_out(exposed_name: str, decision: Decision, seconds: float) -> ToolError:
    """``approval_timeout``: nobody answered in time (a denial)."""
    return ToolError(
        "approval_timeout",
        f"{exposed_name} needs a person's approval{_why(decision)}, and nobody answered "
        f"within {seconds:g} s, so the call was not sent (no answer is a refusal). It may be "
        "asked again later.",
        {"rule": decision.describe(), "approval": "timeout", "timeoutSeconds": seconds},
    )
