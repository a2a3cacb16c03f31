"""Audit records (mcp_operator.bridge.audit): the JSON line's fields, the canonical hash of
the arguments, and no values."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta, timezone

from mcp_operator.bridge.audit import AuditRecord, arguments_digest, canonical_json


def record(**overrides: object) -> AuditRecord:
    fields: dict[str, object] = {
        "time": datetime(2026, 12, 1, 7, 30, 0, 123456, tzinfo=UTC),
        "run": "agents/triage",
        "server": "tools/github",
        "tool": "github_get_issue",
        "original_tool": "get_issue",
        "outcome": "ok",
        "duration_ms": 1.23456,
        "attempts": 1,
        "arguments_sha256": arguments_digest({"number": 7}),
    }
    return AuditRecord(**(fields | overrides))  # type: ignore[arg-type]


def test_the_line_is_one_json_object_with_every_field() -> None:
    line = record(pii={"arguments": {"email": 2}, "results": {}}).to_json_line()
    assert line.endswith("\n") and line.count("\n") == 1
    assert json.loads(line) == {
        "time": "2026-12-01T07:30:00.123Z",
        "run": "agents/triage",
        "server": "tools/github",
        "tool": "github_get_issue",
        "originalTool": "get_issue",
        "outcome": "ok",
        "durationMs": 1.235,
        "attempts": 1,
        "argumentsSha256": hashlib.sha256(b'{"number":7}').hexdigest(),
        "pii": {"arguments": {"email": 2}},
    }


def test_the_time_is_written_in_utc() -> None:
    local = datetime(2026, 12, 1, 8, 30, tzinfo=timezone(timedelta(hours=1)))
    assert json.loads(record(time=local).to_json_line())["time"] == "2026-12-01T07:30:00.000Z"


def test_a_refused_call_has_no_server_and_no_attempts() -> None:
    line = record(server=None, original_tool=None, outcome="not_allowlisted", attempts=0)
    parsed = json.loads(line.to_json_line())
    assert parsed["server"] is None and parsed["attempts"] == 0
    assert parsed["outcome"] == "not_allowlisted"


def test_an_unchecked_schema_is_flagged() -> None:
    assert json.loads(record(schema_unchecked=True).to_json_line())["schemaUnchecked"] is True
    assert "schemaUnchecked" not in json.loads(record().to_json_line())


def test_the_hash_is_of_canonical_json_so_key_order_does_not_matter() -> None:
    assert arguments_digest({"a": 1, "b": [1, "é"]}) == arguments_digest({"b": [1, "é"], "a": 1})
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'
    assert arguments_digest({"a": 1}) != arguments_digest({"a": 2})


def test_the_arguments_themselves_are_not_in_the_line() -> None:
    secret = {"email": "alice@example.com", "card": "4111111111111111"}
    line = record(arguments_sha256=arguments_digest(secret)).to_json_line()
    assert "alice" not in line and "4111" not in line


def test_the_run_pods_identity_is_named_when_known_and_left_out_otherwise() -> None:
    who = {"namespace": "agents", "serviceAccount": "triager", "pod": "triage"}
    parsed = json.loads(record(identity=who).to_json_line())
    assert parsed["identity"] == who
    assert "identity" not in json.loads(record().to_json_line())
