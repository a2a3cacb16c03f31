"""The compiled bridge's PII policy held to the Python bridge's assertions, and both bridges
held to the same observable behaviour on results.

The home test (``test_bridge.py``'s, on its module ``bridge`` whose servers block and redact
arguments) runs here again against the compiled bridge. The tests below it run against both
bridges (``program``): a scripted upstream answers with personal data in a result's text,
its ``structuredContent`` and a resource's ``blob``, and the servers' policies detect, redact
or block results. A ``blob`` that is plain text rather than base64 is the Python bridge's
known defect (it forwards it unscanned); the compiled bridge decides by content, and the
Python side of that test is an expected failure until the Python bridge is fixed.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from mcp import Client

from tests.protocol.test_bridge import (
    EMAIL,
    bridge,
    counted,
    managed_url,
    test_pii_block_mode_stops_an_email_and_redact_mode_rewrites_it,
)
from tests.protocol.test_probe_wire import (
    INITIALIZED,
    Answer,
    Seen,
    Start,
    json_answer,
    result,
    scripted,
)
from tests.support import needs
from tests.support.bridge_run import bridge_of, server_entry
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.timeout(180),
    needs.mark(needs.node_missing()),
    pytest.mark.usefixtures("compiled_bridge"),
]

__all__ = [
    "bridge",
    "counted",
    "managed_url",
    "scripted",
    "test_pii_block_mode_stops_an_email_and_redact_mode_rewrites_it",
]


BUDGET = 2 * 1024 * 1024
"""Characters of one direction the bridges scan for personal data (MAX_SCAN_CHARS)."""
HUGE = BUDGET + 100_000

TOOLS = [
    {"name": "report", "inputSchema": {"type": "object"}},
    {"name": "note", "inputSchema": {"type": "object"}},
    {"name": "encoded", "inputSchema": {"type": "object"}},
    {"name": "count", "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
    {"name": "huge", "inputSchema": {"type": "object"}},
]
REPORT = {
    "content": [{"type": "text", "text": f"owner {EMAIL}"}],
    "structuredContent": {"owner": EMAIL},
}
PLAIN_BLOB = {"content": [{"type": "resource", "resource": {"uri": "x:/n", "blob": f"to {EMAIL}"}}]}
ENCODED_BLOB = {
    "content": [
        {
            "type": "resource",
            "resource": {"uri": "x:/n", "blob": base64.b64encode(f"to {EMAIL}".encode()).decode()},
        }
    ]
}
RESULTS: dict[str, dict[str, Any]] = {
    "report": REPORT,
    "note": PLAIN_BLOB,
    "encoded": ENCODED_BLOB,
    "count": {"content": [{"type": "text", "text": "counted"}]},
    "huge": {"content": [{"type": "text", "text": f"{EMAIL} " + "x" * HUGE}]},
}


def upstream(seen: Seen) -> Answer:
    """A legacy server whose tools answer with personal data in every place a result has."""
    if seen.verb == "DELETE":
        return 200, {}, b""
    if seen.method == "initialize":
        return json_answer(result(seen, INITIALIZED), **{"mcp-session-id": "s-1"})
    if seen.method == "notifications/initialized":
        return 202, {}, b""
    if seen.method == "tools/list":
        return json_answer(result(seen, {"tools": TOOLS}))
    if seen.method == "tools/call":
        assert seen.message is not None
        return json_answer(result(seen, RESULTS[seen.message["params"]["name"]]))
    return json_answer({"jsonrpc": "2.0", "id": 0, "error": {"code": -32601, "message": "no"}})


def servers(url: str) -> list[dict[str, Any]]:
    return [
        server_entry(f"s-{mode}", url, mode, policy={"pii": {"results": mode}})
        for mode in ("detect", "redact", "block")
    ]


async def calls(url: str, *names: str) -> list[Any]:
    async with Client(url, mode="legacy") as agent:
        return [await agent.call_tool(name, {}) for name in names]


async def test_results_are_detected_redacted_and_blocked_by_mode(
    program: str, scripted: Start
) -> None:
    source = await scripted(upstream)
    async with bridge_of(servers(source.url)) as running:
        detected, redacted, blocked = await calls(
            running.url, "detect_report", "redact_report", "block_report"
        )
        lines = eventually("three audit lines", running.audit_lines, 10, until=len)
        log = running.log()
    assert not detected.is_error and detected.content[0].text == f"owner {EMAIL}"
    assert not redacted.is_error and redacted.content[0].text == "owner [REDACTED:email]"
    assert redacted.structured_content == {"owner": "[REDACTED:email]"}
    assert blocked.is_error and blocked.structured_content["code"] == "pii_blocked"
    hint = blocked.structured_content["hint"]
    assert "email x2" in hint and EMAIL not in hint and "executed" in hint
    assert blocked.structured_content["kinds"] == {"email": 2}
    assert blocked.structured_content["direction"] == "results"
    by_tool = {line["tool"]: line for line in lines}
    assert by_tool["detect_report"]["pii"] == {"results": {"email": 2}}
    assert by_tool["detect_report"]["outcome"] == "ok"
    assert by_tool["redact_report"]["pii"] == {"results": {"email": 2}}
    assert by_tool["block_report"]["outcome"] == "pii_blocked"
    assert EMAIL not in log, "a value reached the bridge's log or audit"


async def test_a_blob_of_base64_text_is_decoded_redacted_and_blocked(
    program: str, scripted: Start
) -> None:
    source = await scripted(upstream)
    async with bridge_of(servers(source.url)) as running:
        redacted, blocked = await calls(running.url, "redact_encoded", "block_encoded")
    blob = redacted.content[0].resource.blob
    assert base64.b64decode(blob).decode() == "to [REDACTED:email]"
    assert blocked.is_error and blocked.structured_content["code"] == "pii_blocked"


@pytest.mark.parametrize(
    "program",
    [
        pytest.param(
            "python",
            marks=pytest.mark.xfail(
                strict=True, reason="known defect: the Python bridge forwards a plain-text blob"
            ),
        ),
        "compiled",
    ],
    indirect=True,
)
async def test_plain_text_under_a_key_named_blob_is_scanned_as_text(
    program: str, scripted: Start
) -> None:
    source = await scripted(upstream)
    async with bridge_of(servers(source.url)) as running:
        redacted, blocked = await calls(running.url, "redact_note", "block_note")
    assert blocked.is_error and blocked.structured_content["code"] == "pii_blocked"
    assert blocked.structured_content["kinds"] == {"email": 1}
    assert not redacted.is_error
    assert redacted.content[0].resource.blob == "to [REDACTED:email]"


async def test_arguments_are_blocked_before_they_leave_and_redacted_on_the_way(
    program: str, scripted: Start
) -> None:
    source = await scripted(upstream)
    policies = [
        server_entry("a-block", source.url, "ablk", policy={"pii": {"arguments": "block"}}),
        server_entry("a-redact", source.url, "ared", policy={"pii": {"arguments": "redact"}}),
    ]
    async with bridge_of(policies) as running:
        async with Client(running.url, mode="legacy") as agent:
            blocked = await agent.call_tool("ablk_report", {"to": EMAIL})
            invalid = await agent.call_tool("ablk_count", {"n": EMAIL})
            redacted = await agent.call_tool("ared_report", {"to": f"by {EMAIL}"})
        lines = eventually(
            "three audit lines", running.audit_lines, 10, until=lambda x: len(x) >= 3
        )
    sent = [
        seen.message["params"]
        for seen in source.seen
        if seen.message is not None and seen.method == "tools/call"
    ]
    assert sent == [{"name": "report", "arguments": {"to": "by [REDACTED:email]"}}]
    assert blocked.is_error and blocked.structured_content["code"] == "pii_blocked"
    assert blocked.structured_content["kinds"] == {"email": 1}
    assert blocked.structured_content["direction"] == "arguments"
    assert "the call was not sent" in blocked.structured_content["hint"]
    assert EMAIL not in json.dumps(blocked.structured_content)
    assert invalid.is_error and invalid.structured_content["code"] == "invalid_arguments"
    assert not redacted.is_error
    by_tool = {line["tool"]: line for line in lines}
    assert by_tool["ablk_report"]["outcome"] == "pii_blocked"
    assert by_tool["ablk_report"]["attempts"] == 0
    assert by_tool["ablk_report"]["pii"] == {"arguments": {"email": 1}}
    # Validation refused it first, and the scan still counted what it carried.
    assert by_tool["ablk_count"]["pii"] == {"arguments": {"email": 1}}
    assert by_tool["ared_report"]["pii"] == {"arguments": {"email": 1}}


async def test_a_result_beyond_the_scan_budget_is_redacted_in_part_and_said_so_or_withheld(
    program: str, scripted: Start
) -> None:
    source = await scripted(upstream)
    async with bridge_of(servers(source.url)) as running:
        redacted, blocked = await calls(running.url, "redact_huge", "block_huge")
        lines = eventually("two audit lines", running.audit_lines, 10, until=len)
    assert not redacted.is_error
    assert redacted.content[0].text.startswith("[REDACTED:email] xxx")
    assert len(redacted.content[0].text) == len("[REDACTED:email] ") + HUGE
    note = redacted.content[-1].text
    assert f"only the first {BUDGET} characters" in note and "not scanned" in note
    assert blocked.is_error and blocked.structured_content["code"] == "pii_unscannable"
    assert blocked.structured_content["maxChars"] == BUDGET
    assert "executed" in blocked.structured_content["hint"]
    by_tool = {line["tool"]: line for line in lines}
    assert by_tool["redact_huge"]["piiUnscanned"] == ["results"]
    assert by_tool["redact_huge"]["pii"] == {"results": {"email": 1}}
    assert by_tool["block_huge"]["outcome"] == "pii_unscannable"
