"""An AgentRun's status and Events: from resolution and Pod to conditions, transitions only."""

from __future__ import annotations

from typing import Any

from mcp_operator.controller.agentrun import resolve
from mcp_operator.controller.agentrun.status import Observed, events, status_patch
from mcp_operator.controller.conditions import find

from .test_agentrun_render import ready_server, run, servers

T1, T2, T3 = "2026-12-01T10:00:00Z", "2026-12-01T10:01:00Z", "2026-12-01T10:02:00Z"
RUN = run({"name": "docs"}, {"name": "extra", "optional": True})


def observed(pod: dict[str, Any] | None, *, found: bool = True, **kw: Any) -> Observed:
    known = servers(ready_server("docs")) if found else {}
    return Observed(
        resolution=resolve.resolve(RUN, known),
        bridge=kw.pop("bridge", "enabled"),
        pod=pod,
        pod_name="triage",
        config_map_name="triage-bridge",
        bridge_url="http://127.0.0.1:7800/mcp",
        **kw,
    )


def pod(phase: str, **status: Any) -> dict[str, Any]:
    return {"status": {"phase": phase, **status}}


def condition(patch: dict[str, Any], type_: str) -> tuple[str, str]:
    found = find(patch["conditions"], type_)
    assert found is not None, type_
    return found["status"], found["reason"]


def test_a_missing_required_server_keeps_the_run_waiting_without_a_pod() -> None:
    patch = status_patch(None, observed(None, found=False), generation=1, now=T1)
    assert condition(patch, "ServersResolved") == ("False", "ServerNotFound")
    assert condition(patch, "Ready") == ("False", "ServerNotFound")
    assert "podName" not in patch and "configMapName" not in patch
    assert patch["toolCount"] == 0
    assert [e.reason for e in events(None, patch)] == ["ServerNotFound"]


def test_resolved_servers_and_a_pending_pod_report_the_servers_and_the_skipped_optional_one() -> (
    None
):
    patch = status_patch(None, observed(pod("Pending")), generation=1, now=T1)
    assert condition(patch, "ServersResolved") == ("True", "Resolved")
    assert "extra (ServerNotFound)" in find(patch["conditions"], "ServersResolved")["message"]
    assert condition(patch, "Ready") == ("False", "PodPending")
    assert condition(patch, "Bridge") == ("True", "Enabled")
    assert [(s["name"], s["ready"], s["reason"]) for s in patch["servers"]] == [
        ("docs", True, "Resolved"),
        ("extra", False, "ServerNotFound"),
    ]
    assert patch["toolCount"] == 2
    assert patch["podName"] == "triage" and patch["configMapName"] == "triage-bridge"


def test_a_run_goes_running_then_succeeded_with_one_event_per_transition() -> None:
    pending = status_patch(None, observed(pod("Pending")), generation=1, now=T1)
    running = status_patch(pending, observed(pod("Running", startTime=T2)), generation=1, now=T2)
    assert condition(running, "Ready") == ("True", "Running")
    assert running["startTime"] == T2
    assert [e.reason for e in events(pending, running)] == ["Running"]
    assert events(running, running) == []
    finished = pod(
        "Succeeded",
        startTime=T2,
        containerStatuses=[
            {"name": "agent", "state": {"terminated": {"finishedAt": T3, "exitCode": 0}}}
        ],
    )
    done = status_patch(running, observed(finished), generation=1, now="2026-12-01T11:00:00Z")
    assert condition(done, "Succeeded") == ("True", "Completed")
    assert condition(done, "Ready") == ("False", "Completed")
    assert done["completionTime"] == T3
    assert [(e.type, e.reason) for e in events(running, done)] == [("Normal", "Completed")]


def test_a_failed_agent_reports_its_exit_code_and_the_deadline_its_reason() -> None:
    crashed = pod(
        "Failed",
        containerStatuses=[
            {"name": "agent", "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}
        ],
    )
    patch = status_patch(None, observed(crashed), generation=1, now=T1)
    assert condition(patch, "Failed") == ("True", "AgentFailed")
    assert "exited with code 3" in find(patch["conditions"], "Failed")["message"]
    assert patch["completionTime"] == T1
    deadline = pod("Failed", reason="DeadlineExceeded", message="Pod was active too long")
    patch = status_patch(None, observed(deadline), generation=1, now=T1)
    assert condition(patch, "Failed") == ("True", "DeadlineExceeded")


def test_with_the_bridge_off_the_status_says_so_and_servers_do_not_block() -> None:
    off = observed(pod("Pending"), found=False, bridge="disabled-by-run")
    patch = status_patch(None, off, generation=1, now=T1)
    assert condition(patch, "Bridge") == ("False", "Disabled")
    assert "spec.bridge.enabled is false" in find(patch["conditions"], "Bridge")["message"]
    assert condition(patch, "ServersResolved") == ("Unknown", "BridgeDisabled")
    assert condition(patch, "Ready") == ("False", "PodPending")
    assert patch["servers"] == [] and patch["toolCount"] == 0
    wide = status_patch(None, observed(None, bridge="disabled-operator-wide"), generation=1, now=T1)
    assert "operator-wide" in find(wide["conditions"], "Bridge")["message"]


def test_a_collision_names_both_servers_and_how_to_fix_it() -> None:
    agent_run = run({"name": "a"}, {"name": "b"})
    resolution = resolve.resolve(
        agent_run,
        servers(
            ready_server("a", toolsPrefix="gh", tools=("echo",)),
            ready_server("b", toolsPrefix="gh", tools=("echo",)),
        ),
    )
    blocked = Observed(resolution, "enabled", None, "triage", "triage-bridge", "http://x")
    patch = status_patch(None, blocked, generation=1, now=T1)
    message = find(patch["conditions"], "ServersResolved")["message"]
    assert condition(patch, "Ready") == ("False", "ToolNameCollision")
    assert "gh_echo is offered by agents/a and agents/b" in message
    assert "toolsPrefix" in message
