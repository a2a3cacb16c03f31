"""Human approval of a call the rules hold (``action: approve``): who is asked, and the answer.

:class:`Approver` is what the pipeline awaits for such a call: ``None`` lets the call go,
a :class:`~mcp_operator.bridge.errors.ToolError` refuses it (``approval_denied``, or
``approval_timeout`` when nobody answered in time: no answer is a denial). It records the
decision, who answered and how long it took in ``call.authorization["approval"]`` for the
audit line. Without an approver configured, a held call is refused (:func:`no_approver`).

:class:`AgentApprover` asks the agent itself (its human) when the agent declared the
``elicitation`` capability: an ``elicitation/create`` in form mode through the call's relay
(:meth:`~mcp_operator.bridge.relay.CallRelay.ask_agent`: a legacy agent gets it on the call's
SSE stream, a 2026-07-28 agent as an ``input_required`` round), whose form has one boolean,
``approve`` (default false). ``accept`` with ``approve: true`` approves; anything else
(``decline``, ``cancel``, an ``accept`` without it) refuses; no answer within the run's
``approval.elicitation.timeoutSeconds`` (default 300) is
``approval_timeout``; the answer's ``by`` is ``agent``. Only an answer to the question as sent
counts: one the agent sent before it was asked, or on another session, answers nothing
(the relay's ``fresh``). An agent that did not declare it is not asked: the webhook is, when
the run has one, else the call is refused.

:class:`WebhookApprover` asks the run's approval webhook (an unattended run's way to reach a
person): a ``POST`` of the held call as JSON (run, identity, server, tool, its arguments as
they would be sent, the rule), signed with HMAC-SHA256 over the exact body with the key of a
mounted Secret (``X-Mcp-Operator-Signature: sha256=<hex>``; ``id`` and ``time`` in the body
let the receiver refuse a replay), on the bridge's pool and so under its egress policy. The
answer is read up to 64 KiB and must be ``200`` with ``{"approved": true|false, "by": "..."}``;
anything else, or no answer within ``timeoutSeconds``, refuses the call.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import re
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Protocol

from mcp_operator.api.bridge import ApprovalWebhook, BridgeConfig
from mcp_operator.bridge.errors import ToolError
from mcp_operator.bridge.hooks import Call
from mcp_operator.bridge.relay import AgentRefusal, current
from mcp_operator.bridge.rules import Decision
from mcp_operator.mcp.session import Pool
from mcp_operator.net.post import post

logger = logging.getLogger(__name__)

SIGNATURE_HEADER: Final = "X-Mcp-Operator-Signature"
MAX_ANSWER_BYTES: Final = 64 * 1024
MAX_BY_CHARS: Final = 128
APPROVE_FIELD: Final = "approve"
"""The form's one field: ``true`` in an ``accept`` approves the call."""
APPROVAL_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        APPROVE_FIELD: {
            "type": "boolean",
            "title": "Approve this call",
            "description": "True lets the call go; false or declining refuses it.",
            "default": False,
        }
    },
    "required": [APPROVE_FIELD],
}
"""The ``requestedSchema`` of the question (a flat object of primitives, as elicitation's form
mode requires)."""
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")


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


def signature(key: bytes, body: bytes) -> str:
    """The value of :data:`SIGNATURE_HEADER` for ``body``: ``sha256=<hex HMAC-SHA256>``."""
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


class WebhookApprover:
    """Asks the approval webhook (see the module)."""

    def __init__(
        self,
        config: BridgeConfig,
        webhook: ApprovalWebhook,
        pool: Pool,
        *,
        monotonic: Callable[[], float],
        now: Callable[[], datetime],
    ) -> None:
        self.config = config
        self.webhook = webhook
        self.pool = pool
        self.monotonic = monotonic
        self.now = now

    def _body(self, call: Call, decision: Decision) -> bytes:
        assert call.entry is not None
        identity = self.config.identity
        message: dict[str, Any] = {
            "id": str(uuid.uuid4()),
            "time": self.now().isoformat(),
            "run": call.run,
            "identity": identity.model_dump(by_alias=True) if identity is not None else None,
            "server": call.entry.server,
            "tool": call.entry.exposed_name,
            "originalTool": call.entry.original_name,
            "arguments": call.arguments,
            "rule": decision.describe(),
            "reason": decision.rule.reason if decision.rule is not None else None,
        }
        return json.dumps(message, separators=(",", ":"), default=repr).encode()

    async def ask(self, call: Call, decision: Decision) -> ToolError | None:
        assert call.entry is not None
        name = call.entry.exposed_name
        started = self.monotonic()

        def record(verdict: str, by: str | None = None) -> None:
            waited = round((self.monotonic() - started) * 1000.0, 1)
            call.authorization["approval"] = {"decision": verdict, "by": by, "waitedMs": waited}

        try:
            key = (await asyncio.to_thread(Path(self.webhook.secret_file).read_bytes)).strip()
        except OSError as error:
            logger.error("Approval webhook key %s unreadable: %s", self.webhook.secret_file,
                         error.strerror)  # fmt: skip
            record("unavailable")
            return _unavailable(name, decision, "its signing key cannot be read")
        body = self._body(call, decision)
        headers = {"content-type": "application/json", SIGNATURE_HEADER: signature(key, body)}
        seconds = float(self.webhook.timeout_seconds)
        try:
            async with asyncio.timeout(seconds):
                status, answer = await post(
                    self.pool, self.webhook.url, headers, body, max_bytes=MAX_ANSWER_BYTES
                )
        except TimeoutError:
            record("timeout")
            return timed_out(name, decision, seconds)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            logger.warning("Approval webhook not reached: %s", type(error).__name__)
            record("unavailable")
            return _unavailable(name, decision, "it could not be reached")
        approved, by = _verdict(status, answer)
        if approved is None:
            record("unavailable")
            return _unavailable(name, decision, f"its answer was not understood (HTTP {status})")
        record("approved" if approved else "denied", by)
        return None if approved else refused(name, decision, by)


def _verdict(status: int, answer: bytes) -> tuple[bool | None, str | None]:
    """``(approved, by)`` from the webhook's answer; ``approved`` is None when it is not one."""
    if status != 200:
        return None, None
    try:
        parsed = json.loads(answer)
    except ValueError:
        return None, None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("approved"), bool):
        return None, None
    by = parsed.get("by")
    shown = _UNPRINTABLE.sub("?", by)[:MAX_BY_CHARS] if isinstance(by, str) and by else None
    return parsed["approved"], shown


def _unavailable(exposed_name: str, decision: Decision, why: str) -> ToolError:
    return ToolError(
        "approval_denied",
        f"{exposed_name} needs a person's approval{_why(decision)}, and the approval webhook "
        f"gave none: {why}. The call was not sent (no approval is a refusal).",
        {"rule": decision.describe(), "approval": "unavailable"},
    )


class AgentApprover:
    """Asks the calling agent through elicitation, else ``fallback`` (see the module)."""

    def __init__(
        self,
        fallback: Approver | None,
        *,
        monotonic: Callable[[], float],
        seconds: float,
    ) -> None:
        self.fallback = fallback
        self.monotonic = monotonic
        self.seconds = seconds

    @staticmethod
    def question(call: Call, decision: Decision) -> dict[str, Any]:
        """The ``elicitation/create`` params: the tool, why, and the arguments to be sent."""
        assert call.entry is not None
        shown = json.dumps(call.arguments, separators=(",", ":"), default=repr)
        if len(shown) > 2000:
            shown = shown[:2000] + "…"
        return {
            "mode": "form",
            "message": (
                f"Allow the call of {call.entry.exposed_name} (server {call.entry.server})"
                f"{_why(decision)} with the arguments {shown}? Accept with approve true to "
                "let it go; decline to refuse it."
            ),
            "requestedSchema": APPROVAL_SCHEMA,
        }

    async def ask(self, call: Call, decision: Decision) -> ToolError | None:
        assert call.entry is not None
        name = call.entry.exposed_name
        relay = current()
        params = self.question(call, decision)
        started = self.monotonic()

        def record(verdict: str) -> None:
            waited = round((self.monotonic() - started) * 1000.0, 1)
            call.authorization["approval"] = {
                "decision": verdict,
                "by": "agent",
                "waitedMs": waited,
            }

        try:
            async with asyncio.timeout(self.seconds):
                answer = await relay.ask_agent("elicitation/create", params) if relay else None
        except TimeoutError:
            record("timeout")
            return timed_out(name, decision, self.seconds)
        except AgentRefusal as refusal:
            logger.info("The agent could not be asked to approve %s: %s", name, refusal.message)
            record("unavailable")
            return refused(name, decision, "agent")
        if answer is None:  # the agent did not declare elicitation
            if self.fallback is not None:
                return await self.fallback.ask(call, decision)
            call.authorization["approval"] = {"decision": "unavailable"}
            return no_approver(name, decision)
        approved = approves(answer)
        record("approved" if approved else "denied")
        return None if approved else refused(name, decision, "agent")


def approves(answer: Any) -> bool:
    """Whether an ``elicitation/create`` result approves: ``accept`` with ``approve: true``
    (the boolean itself, not a truthy string)."""
    if not isinstance(answer, dict) or answer.get("action") != "accept":
        return False
    content = answer.get("content")
    return isinstance(content, dict) and content.get(APPROVE_FIELD) is True
