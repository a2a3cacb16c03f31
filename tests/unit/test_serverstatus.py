"""What MCPServer status says after each kind of reconcile outcome."""

from __future__ import annotations

from mcp_operator.controller.conditions import WantedCondition, find, merge
from mcp_operator.controller.mcpserver.status import Outcome, events, status_patch

T0, T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z", "2026-01-01T00:10:00Z"

TOOLS = [
    {"name": "srv_echo", "originalName": "echo", "description": "Echo", "annotations": {}},
    {"name": "srv_add", "originalName": "add", "description": "Add", "annotations": {}},
]


def probed(tools: list[dict[str, object]] = TOOLS, warnings: tuple[str, ...] = ()) -> Outcome:
    fields = {
        "tools": tools,
        "toolCount": len(tools),
        "discoveredToolCount": len(tools) + 1,
        "serverInfo": {"name": "s", "version": "1", "protocolVersion": "2025-06-18"},
    }
    return Outcome("probed", probe_fields=fields, warnings=warnings)


def apply(status: dict[str, object], patch: dict[str, object]) -> dict[str, object]:
    merged = dict(status)
    merged.update(patch)
    return merged


def test_a_successful_probe_fills_tools_and_makes_the_server_ready() -> None:
    patch = status_patch(None, probed(), generation=3, url="http://x/mcp", now=T0)
    assert patch["toolCount"] == 2
    assert patch["discoveredToolCount"] == 3
    assert patch["lastProbeTime"] == T0
    assert patch["observedGeneration"] == 3
    ready = find(patch["conditions"], "Ready")
    assert ready is not None and ready["status"] == "True"
    assert find(patch["conditions"], "Probed")["reason"] == "ToolsDiscovered"  # type: ignore[index]


def test_a_failed_probe_keeps_the_last_tools_and_says_since_when() -> None:
    first = status_patch(None, probed(), generation=1, url="u", now=T0)
    failure = Outcome("failed", "Unreachable", "could not connect")
    second = status_patch(first, failure, generation=1, url="u", now=T1)
    assert "tools" not in second and "toolCount" not in second
    ready = find(second["conditions"], "Ready")
    assert ready is not None
    assert (ready["status"], ready["reason"]) == ("False", "ProbeFailed")
    assert f"failing since {T1}" in ready["message"]
    assert f"keeping 2 tools from the last successful probe at {T0}" in ready["message"]
    third = status_patch(apply(first, second), failure, generation=1, url="u", now=T2)
    probed_condition = find(third["conditions"], "Probed")
    assert probed_condition is not None
    assert probed_condition["lastTransitionTime"] == T1
    assert f"failing since {T1}" in probed_condition["message"]


def test_a_missing_secret_is_the_ready_reason() -> None:
    failure = Outcome(
        "failed",
        "SecretNotFound",
        "Secret ns/token (key 'k') was not found",
        ready_reason="SecretNotFound",
    )
    patch = status_patch(None, failure, generation=1, url="u", now=T0)
    ready = find(patch["conditions"], "Ready")
    assert ready is not None and ready["reason"] == "SecretNotFound"
    assert "ns/token" in ready["message"]


def test_invalid_spec_is_reported_without_touching_tools() -> None:
    patch = status_patch(
        {"tools": TOOLS},
        Outcome("invalid", "InvalidSpec", "spec.url: bad"),
        generation=2,
        url=None,
        now=T0,
    )
    assert "tools" not in patch
    ready = find(patch["conditions"], "Ready")
    assert ready is not None and (ready["reason"], ready["message"]) == (
        "InvalidSpec",
        "spec.url: bad",
    )


def test_transition_time_moves_only_when_status_flips() -> None:
    first = merge(None, [WantedCondition("Ready", "True", "A", "a")], now=T0, generation=1)
    second = merge(first, [WantedCondition("Ready", "True", "B", "b")], now=T1, generation=1)
    third = merge(second, [WantedCondition("Ready", "False", "C", "c")], now=T2, generation=1)
    assert second[0]["lastTransitionTime"] == T0
    assert third[0]["lastTransitionTime"] == T2


def test_events_are_posted_on_transitions_not_repetitions() -> None:
    first = status_patch(None, probed(), generation=1, url="u", now=T0)
    assert [e.reason for e in events(None, first)] == ["ToolsDiscovered"]
    again = apply(first, status_patch(first, probed(), generation=1, url="u", now=T1))
    assert events(first, again) == []
    fewer = apply(again, status_patch(again, probed(TOOLS[:1]), generation=1, url="u", now=T1))
    changed = events(again, fewer)
    assert [e.reason for e in changed] == ["ToolsChanged"]
    assert "0 tools added, 1 removed" in changed[0].message
    failed = apply(
        fewer, status_patch(fewer, Outcome("failed", "Timeout", "t"), generation=1, url="u", now=T2)
    )
    assert [e.type for e in events(fewer, failed)] == ["Warning"]
    assert events(failed, failed) == []


def test_server_info_keys_a_server_stopped_sending_are_removed() -> None:
    outcome = probed()
    fields = dict(outcome.probe_fields)
    fields["serverInfo"] = {"protocolVersion": "2026-07-28"}
    patch = status_patch(
        None, Outcome("probed", probe_fields=fields), generation=1, url="u", now=T0
    )
    assert patch["serverInfo"] == {"name": None, "version": None, "protocolVersion": "2026-07-28"}
