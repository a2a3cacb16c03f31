"""Pinned tool definitions in MCPServer status: the ToolsChanged condition, its Event, and
strict pinning with its approval annotation (mcp_operator.controller.mcpserver.pins)."""

from __future__ import annotations

from typing import Any

from mcp_operator.controller.conditions import find
from mcp_operator.controller.mcpserver.pins import APPROVED_TOOLS_ANNOTATION, set_digest
from mcp_operator.controller.mcpserver.status import Outcome, events, remembered, status_patch

T0, T1, T2, T3 = (f"2026-01-01T00:0{i}:00Z" for i in range(4))
A, B, C = "a" * 64, "b" * 64, "c" * 64


def tool(name: str, sha: str | None) -> dict[str, Any]:
    item: dict[str, Any] = {"name": f"srv_{name}", "originalName": name}
    if sha is not None:
        item["definitionSha256"] = sha
    return item


def probed(tools: list[dict[str, Any]], mode: str = "pin", approved: str | None = None) -> Outcome:
    fields = {"tools": tools, "toolCount": len(tools), "discoveredToolCount": len(tools)}
    return Outcome(
        "probed", probe_fields=fields, pinning=mode, approved_tools=approved, server="srv"
    )


def step(previous: dict[str, Any] | None, outcome: Outcome, now: str) -> dict[str, Any]:
    """The status after a reconcile, as the fleet keeps it (``remembered``)."""
    patch = status_patch(previous, outcome, generation=1, url="u", now=now)
    merged = {**(previous or {}), **patch}
    kept = remembered(merged)
    assert kept is not None
    return kept


def test_a_changed_definition_is_repinned_and_reported_with_an_event_naming_it() -> None:
    first = step(None, probed([tool("echo", A), tool("add", B)]), T0)
    pins = find(first["conditions"], "ToolsChanged")
    assert pins is not None and (pins["status"], pins["reason"]) == ("False", "Pinned")
    second = step(first, probed([tool("echo", C), tool("add", B), tool("new", A)]), T1)
    assert [t.get("definitionSha256") for t in second["tools"]] == [C, B, A]
    condition = find(second["conditions"], "ToolsChanged")
    assert condition is not None and condition["status"] == "True"
    assert "added: srv_new; changed: srv_echo" in condition["message"]
    [event] = [e for e in events(first, second) if e.reason == "ToolsChanged"]
    assert "1 tools added, 0 removed, 1 changed" in event.message
    assert "changed: srv_echo" in event.message
    # Nothing changed at the next probe: no Event, the condition stays.
    third = step(second, probed([tool("echo", C), tool("add", B), tool("new", A)]), T2)
    assert [e for e in events(second, third) if e.reason == "ToolsChanged"] == []


def test_strict_pinning_keeps_the_old_pin_until_the_annotation_approves_the_new_set() -> None:
    first = step(None, probed([tool("echo", A)], "strict"), T0)
    assert first["tools"][0]["definitionSha256"] == A  # trust on first use
    observed = [tool("echo", C), tool("new", B)]
    second = step(first, probed(observed, "strict"), T1)
    assert second["tools"] == [tool("echo", A), tool("new", None)]  # bridges refuse both
    condition = find(second["conditions"], "ToolsChanged")
    assert condition is not None and condition["reason"] == "ApprovalRequired"
    wanted = set_digest(observed)
    assert f"{APPROVED_TOOLS_ANNOTATION}={wanted}" in condition["message"]
    assert [e.reason for e in events(first, second)] == ["ToolsChanged", "ToolsApprovalRequired"]
    # The pending change stays pending at the next probe, with no new Event.
    third = step(second, probed(observed, "strict"), T2)
    assert third["tools"] == second["tools"]
    assert events(second, third) == []
    # A stale approval does not approve.
    stale = step(third, probed(observed, "strict", approved=set_digest([tool("echo", C)])), T2)
    assert stale["tools"] == second["tools"]
    approved = step(stale, probed(observed, "strict", approved=wanted), T3)
    assert approved["tools"] == observed
    condition = find(approved["conditions"], "ToolsChanged")
    assert condition is not None and (condition["status"], condition["reason"]) == (
        "False",
        "Approved",
    )
