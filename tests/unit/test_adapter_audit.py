"""The adapter's audit line (adapter/audit.py): who, which tool, what came of it, never a value."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from mcp_operator.adapter.audit import CallAudit, outcome_of, tool_of
from mcp_operator.serve.audit import AuditWriter
from mcp_operator.serve.auth.caller import ANONYMOUS, CURRENT_CALLER, Caller


class Sink:
    def __init__(self) -> None:
        self.answers: list[dict[str, Any]] = []

    def respond(self, message: dict[str, Any]) -> None:
        self.answers.append(message)

    def related(self, message: dict[str, Any]) -> bool:
        return False

    def ask(self, message: dict[str, Any]) -> bool:
        return False


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        ({"result": {"content": []}}, "ok"),
        ({"result": {"content": [], "isError": True}}, "tool_error"),
        ({"result": {"isError": "yes"}}, "ok"),
        ({"error": {"code": -32603, "message": "x"}}, "error"),
    ],
)
def test_the_outcome_says_ok_tool_error_or_error(answer: dict[str, Any], outcome: str) -> None:
    assert outcome_of(answer) == outcome


@pytest.mark.parametrize("name", ["rm -rf /", "", "a" * 129, None, 7, "naïve", "x\ny"])
def test_a_name_that_is_no_tool_name_is_never_written(name: Any) -> None:
    tool, digest = tool_of({"params": {"name": name}})
    assert tool == "(invalid)" and digest is not None and len(digest) == 16


def test_a_call_is_written_once_answered_with_the_caller_of_its_request() -> None:
    out = io.StringIO()
    when = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)
    audit = CallAudit(AuditWriter(out, None), clock=lambda: when)
    caller = Caller(kind="serviceaccount", namespace="team", service_account="agent", pod="p")
    token = CURRENT_CALLER.set(caller)
    try:
        message = {"method": "tools/call", "params": {"name": "echo", "arguments": {"k": "v42"}}}
        sink = Sink()
        wrapped = audit.wrap(message, sink)
    finally:
        CURRENT_CALLER.reset(token)
    assert audit.wrap({"method": "tools/list"}, sink) is sink
    assert out.getvalue() == ""
    wrapped.respond({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"text": "v42"}]}})
    line = json.loads(out.getvalue())
    assert line["caller"] == {"kind": "serviceaccount", "namespace": "team",
                              "serviceAccount": "agent", "pod": "p"}  # fmt: skip
    assert (line["tool"], line["outcome"], line["time"]) == (
        "echo",
        "ok",
        "2026-12-02T05:00:00.000Z",
    )
    assert "v42" not in out.getvalue() and len(sink.answers) == 1
    assert CURRENT_CALLER.get() is ANONYMOUS
