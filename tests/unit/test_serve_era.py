"""Which era an incoming request speaks, and which 2026-07-28 requests are admitted."""

from __future__ import annotations

import pytest
from mcp.shared.inbound import InboundLadderRejection
from mcp_types import SERVER_INFO_META_KEY as SERVER_INFO
from mcp_types.jsonrpc import HEADER_MISMATCH, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND

from mcp_operator.serve import era


def test_only_non_handshake_versions_select_the_stateless_entry() -> None:
    assert era.is_modern("2026-07-28") and era.is_modern("garbage")
    assert not era.is_modern(None) and not era.is_modern("2025-06-18")


ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
ROUTING = [
    (b"mcp-protocol-version", b"2026-07-28"),
    (b"mcp-method", b"tools/call"),
    (b"mcp-name", b"echo"),
]


def _call(**changes: object) -> dict[str, object]:
    body: dict[str, object] = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {}, "_meta": dict(ENVELOPE)},
    }
    body.update(changes)
    return body


def test_a_well_formed_2026_call_is_admitted_with_its_version() -> None:
    outcome = era.classify_modern(_call(), "2026-07-28", ROUTING)
    assert outcome == era.ModernCall(7, "tools/call", "2026-07-28")


def test_a_2026_notification_at_a_served_version_is_accepted() -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
    outcome = era.classify_modern(body, "2026-07-28", [])
    assert outcome == era.ModernNotification("notifications/cancelled")


def test_a_notification_at_an_unknown_version_is_refused_naming_the_served_ones() -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
    outcome = era.classify_modern(body, "2099-01-01", [])
    assert isinstance(outcome, era.Refusal) and outcome.status == 400
    assert outcome.message["id"] is None
    assert outcome.message["error"]["data"]["supported"] == ["2026-07-28"]


@pytest.mark.parametrize(
    "body",
    [
        [_call()],
        _call(jsonrpc="1.0"),
        _call(id=True),
        _call(id=None),
        _call(params=["echo"]),
        {"jsonrpc": "2.0", "method": 5},
    ],
)
def test_anything_but_one_request_object_is_an_invalid_request(body: object) -> None:
    outcome = era.classify_modern(body, "2026-07-28", ROUTING)
    assert isinstance(outcome, era.Refusal) and outcome.status == 400
    assert outcome.message["error"]["code"] == INVALID_REQUEST


def test_a_routing_header_sent_twice_is_a_header_mismatch() -> None:
    headers = [*ROUTING, (b"Mcp-Method", b"tools/list")]
    outcome = era.classify_modern(_call(), "2026-07-28", headers)
    assert isinstance(outcome, era.Refusal) and outcome.status == 400
    assert outcome.message["id"] == 7
    assert outcome.message["error"]["code"] == HEADER_MISMATCH
    assert "more than once" in outcome.message["error"]["message"]


def test_a_name_header_that_disagrees_with_the_body_is_a_header_mismatch() -> None:
    headers = [*ROUTING[:2], (b"mcp-name", b"other")]
    outcome = era.classify_modern(_call(), "2026-07-28", headers)
    assert isinstance(outcome, era.Refusal)
    assert outcome.message["error"]["code"] == HEADER_MISMATCH


def test_a_call_without_the_envelope_is_invalid_params() -> None:
    body = _call(params={"name": "echo", "arguments": {}})
    outcome = era.classify_modern(body, "2026-07-28", ROUTING)
    assert isinstance(outcome, era.Refusal) and outcome.status == 400
    assert outcome.message["error"]["code"] == INVALID_PARAMS


def test_an_unsupported_method_status_comes_from_the_sdk_table() -> None:
    rejection = InboundLadderRejection(code=METHOD_NOT_FOUND, message="no")
    assert era.refusal(rejection, "a").status == 404
    assert era.refusal(InboundLadderRejection(code=-1, message="odd"), "a").status == 400


def test_whitespace_around_header_values_is_not_part_of_them() -> None:
    padded = [(name, b"  " + value + b"\t ") for name, value in ROUTING]
    outcome = era.classify_modern(_call(), "2026-07-28", padded)
    assert outcome == era.ModernCall(7, "tools/call", "2026-07-28")


def test_only_the_routing_headers_are_read_for_the_ladder() -> None:
    headers = [(b"x-other", b"\xff"), *ROUTING, (b"accept", b"*/*"), (b"accept", b"a/b")]
    outcome = era.classify_modern(_call(), "2026-07-28", headers)
    assert outcome == era.ModernCall(7, "tools/call", "2026-07-28")
    missing = [header for header in headers if header[0] != b"mcp-name"]
    assert isinstance(era.classify_modern(_call(), "2026-07-28", missing), era.Refusal)


def test_a_relayed_result_loses_the_stamps_of_the_server_that_answered() -> None:
    info = {"name": "child", "version": "1"}
    stamped = era.modern_result("tools/call", "2026-07-28", {"content": []}, info)
    assert era.plain_result(stamped) == {"content": []}
    kept = {"resultType": "input_required", "_meta": {"a": 1, SERVER_INFO: info}, "x": 2}
    assert era.plain_result(kept) == {"resultType": "input_required", "_meta": {"a": 1}, "x": 2}
    assert kept["_meta"][SERVER_INFO] == info  # not changed in place
    assert era.plain_result({"tools": []}) == {"tools": []}
    assert era.plain_result(None) is None
    again = era.modern_result("tools/call", "2026-07-28", era.plain_result(stamped), {"name": "b"})
    assert again["_meta"][SERVER_INFO] == {"name": "b"}
