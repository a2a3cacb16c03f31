"""The adapter's audit trail (``--audit``): one JSON line per ``tools/call`` it serves.

A line names the time, the verified caller (``serve.auth``: kind, namespace, ServiceAccount,
Pod, or OIDC subject; ``anonymous`` with ``--auth none``), the tool, the outcome (``ok``,
``tool_error`` for a result with ``isError``, ``error`` for a JSON-RPC error, the adapter's own
included; ``forwarded`` in front mode, which does not read answers, with the HTTP status)
and the duration — never arguments, results or messages. A tool name that is not a valid
tool name (1-128 of ``[A-Za-z0-9_.-]``) is written as ``(invalid)`` with a short hash, so no
text a caller made up reaches the trail. With the bridge's own line (which carries the run's
identity) it makes a call that reached a server without going through a bridge visible.
Lines go through the house's writer (``serve.audit``).
"""

from __future__ import annotations

import hashlib
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mcp_operator.adapter.records import CallSink
from mcp_operator.net import jsoncodec
from mcp_operator.serve.audit import AuditWriter
from mcp_operator.serve.auth.caller import CURRENT_CALLER, Caller

TOOL_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
INVALID = "(invalid)"


@dataclass(frozen=True, slots=True)
class CallRecord:
    time: datetime
    caller: Caller
    tool: str
    tool_sha256: str | None
    outcome: str
    duration_ms: float
    status: int | None = None

    def to_json_line(self) -> str:
        when = self.time.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        record: dict[str, Any] = {
            "time": when,
            "caller": self.caller.to_dict(),
            "tool": self.tool,
            "outcome": self.outcome,
            "durationMs": round(self.duration_ms, 3),
        }
        if self.tool_sha256 is not None:
            record["toolSha256"] = self.tool_sha256
        if self.status is not None:
            record["status"] = self.status
        return jsoncodec.ascii_line(record)


def tool_of(message: dict[str, Any]) -> tuple[str, str | None]:
    """The tool name of a ``tools/call`` for the trail, and a hash in place of a bad one."""
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    if isinstance(name, str) and TOOL_NAME.fullmatch(name):
        return name, None
    digest = hashlib.sha256(repr(name).encode("utf-8", "replace")).hexdigest()[:16]
    return INVALID, digest


def outcome_of(answer: dict[str, Any]) -> str:
    if "error" in answer:
        return "error"
    result = answer.get("result")
    return "tool_error" if isinstance(result, dict) and result.get("isError") is True else "ok"


class _AuditedSink:
    __slots__ = ("_audit", "_caller", "_hash", "_inner", "_started", "_tool")

    def __init__(self, audit: CallAudit, message: dict[str, Any], inner: CallSink) -> None:
        self._audit = audit
        self._inner = inner
        self._caller = CURRENT_CALLER.get()
        self._tool, self._hash = tool_of(message)
        self._started = time.perf_counter()

    def respond(self, message: dict[str, Any]) -> None:
        seconds = time.perf_counter() - self._started
        self._audit.write(self._caller, self._tool, self._hash, outcome_of(message), seconds)
        self._inner.respond(message)

    def related(self, message: dict[str, Any]) -> bool:
        return self._inner.related(message)

    def ask(self, message: dict[str, Any]) -> bool:
        return self._inner.ask(message)


class CallAudit:
    """Writes the line of every ``tools/call`` the adapter serves."""

    def __init__(
        self, writer: AuditWriter, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    ) -> None:
        self.writer = writer
        self._clock = clock

    def wrap(self, message: dict[str, Any], sink: CallSink) -> CallSink:
        """``sink`` that writes the call's line when it is answered (``tools/call`` only)."""
        if message.get("method") != "tools/call":
            return sink
        return _AuditedSink(self, message, sink)

    def write(
        self,
        caller: Caller,
        tool: str,
        tool_hash: str | None,
        outcome: str,
        seconds: float,
        status: int | None = None,
    ) -> None:
        self.writer.write(
            CallRecord(self._clock(), caller, tool, tool_hash, outcome, seconds * 1000, status)
        )


def from_flag(value: str | None) -> CallAudit | None:
    """``--audit -`` (stdout), ``--audit PATH`` (appended to), or nothing."""
    if not value:
        return None

    return CallAudit(
        AuditWriter(sys.stdout if value == "-" else None, None if value == "-" else value)
    )
