"""What an AgentRun's status says after each reconcile: pure functions, no I/O, no clock.

The reconciler observes (:class:`Observed`): how the references resolved, whether
the bridge runs, and the Pod as the API server has it. :func:`status_patch` turns
that, with the previous status, into the merge patch of the ``status``
subresource; :func:`events` says which Events the change deserves (transitions,
never repetitions).

Conditions:

- ``ServersResolved``: True when every required server is usable and no two
  servers offer the same tool name; else the first blocking reason
  (``ServerNotFound``, ``ServerNotReady``, ``NotPermitted``,
  ``SecretNotShareable``, ``ToolNameCollision``). ``Unknown`` with
  ``BridgeDisabled`` when the bridge is off (the run does not use the servers).
- ``Bridge``: True (``Enabled``) or False (``Disabled``: by the run or operator-wide).
- ``Ready``: True while the agent Pod runs; False with the reason that keeps it
  from running (a refusal first: ``SecretNotOptedIn``, ``ServiceAccountNotOptedIn``,
  ``BridgeImageNotAllowed``, ``NameConflict``, ...), or ``Completed`` / ``Failed`` once it
  ended.
- ``Succeeded`` / ``Failed``: set once, when the Pod ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from mcp_operator.controller.agentrun.resolve import Resolution
from mcp_operator.controller.conditions import WantedCondition, find, merge
from mcp_operator.controller.events import Event

BridgeState = Literal["enabled", "disabled-by-run", "disabled-operator-wide"]


@dataclass(frozen=True)
class Observed:
    """What one reconcile of an AgentRun found."""

    resolution: Resolution
    bridge: BridgeState
    pod: Mapping[str, Any] | None
    """The agent Pod as the API server has it; ``None`` while it does not exist."""
    pod_name: str
    config_map_name: str | None
    """``None`` when the run has no bridge (and so no ConfigMap)."""
    bridge_url: str
    apply_error: str | None = None
    """Why creating the Pod or ConfigMap failed, if it did."""
    refused: tuple[str, str] | None = None
    """Why the run is not started (reason, message): a Secret or ServiceAccount not opted
    in, a bridge image not allowed, a child's name taken by another object."""
    pod_lost: bool = False
    """The Pod existed once and is gone: the run is not started again."""
    network: WantedCondition | None = None
    """The ``NetworkPolicy`` condition, when this pass applied (or removed) the policy."""

    @property
    def bridge_on(self) -> bool:
        return self.bridge == "enabled"

    @property
    def blocked(self) -> bool:
        """The run waits: the bridge needs servers that are not usable, or names collide."""
        return self.bridge_on and not self.resolution.ready


def status_patch(
    previous: Mapping[str, Any] | None,
    observed: Observed,
    *,
    generation: int | None,
    now: str,
) -> dict[str, Any]:
    """The merge patch for ``status`` (fields absent from the patch are kept as they are)."""
    previous = previous or {}
    patch: dict[str, Any] = {"observedGeneration": generation}
    wanted = [_servers_resolved(observed), _bridge(observed)]
    if observed.network is not None:
        wanted.append(observed.network)
    if observed.bridge_on:
        patch["servers"] = _servers(observed.resolution)
        patch["toolCount"] = observed.resolution.tool_count if not observed.blocked else 0
    else:
        patch["servers"] = []
        patch["toolCount"] = 0
    if observed.config_map_name is not None and not observed.blocked and not observed.refused:
        patch["configMapName"] = observed.config_map_name
    pod = observed.pod
    if pod is not None:
        patch["podName"] = observed.pod_name
        pod_status = pod.get("status") or {}
        if pod_status.get("startTime"):
            patch["startTime"] = pod_status["startTime"]
        phase = pod_status.get("phase") or "Pending"
        if phase in ("Succeeded", "Failed"):
            patch["completionTime"] = previous.get("completionTime") or _finished_at(pod) or now
        wanted += _phase_conditions(observed, phase, pod_status)
    elif observed.pod_lost:
        message = f"Pod {observed.pod_name} was deleted before the run finished"
        patch["completionTime"] = previous.get("completionTime") or now
        wanted.append(WantedCondition("Ready", "False", "PodLost", message))
        wanted.append(WantedCondition("Failed", "True", "PodLost", message))
    elif observed.refused is not None:
        wanted.append(WantedCondition("Ready", "False", *observed.refused))
    elif observed.blocked:
        blocking = _servers_resolved(observed)
        wanted.append(WantedCondition("Ready", "False", blocking.reason, blocking.message))
    elif observed.apply_error is not None:
        wanted.append(WantedCondition("Ready", "False", "ApplyFailed", observed.apply_error))
    else:
        wanted.append(
            WantedCondition("Ready", "False", "PodNotCreated", "The agent Pod is not created yet")
        )
    patch["conditions"] = merge(previous.get("conditions"), wanted, now=now, generation=generation)
    return patch


def _servers(resolution: Resolution) -> list[dict[str, Any]]:
    servers = []
    for binding in resolution.bindings:
        entry: dict[str, Any] = {
            "name": binding.name,
            "namespace": binding.namespace,
            "ready": binding.usable,
            "reason": binding.reason,
            "toolCount": binding.tool_count,
        }
        if binding.server is not None:
            entry["prefix"] = binding.server.effective_prefix
            status = binding.server.status
            if status is not None and status.url:
                entry["url"] = status.url
        servers.append(entry)
    return servers


def _servers_resolved(observed: Observed) -> WantedCondition:
    if not observed.bridge_on:
        return WantedCondition(
            "ServersResolved", "Unknown", "BridgeDisabled", "The run uses no MCP servers: no bridge"
        )
    resolution = observed.resolution
    if resolution.collisions:
        shown = "; ".join(resolution.collisions[:5])
        more = len(resolution.collisions) - 5
        message = f"Tool names collide: {shown}" + (f"; and {more} more" if more > 0 else "")
        message += " (give the servers distinct spec.toolsPrefix values or narrow the filters)"
        return WantedCondition("ServersResolved", "False", "ToolNameCollision", message)
    blocking = resolution.blocking
    if blocking:
        message = "; ".join(b.message for b in blocking)
        return WantedCondition("ServersResolved", "False", blocking[0].reason, message)
    usable = resolution.usable
    message = f"{len(usable)} of {len(resolution.bindings)} servers resolved, "
    message += f"{resolution.tool_count} tools"
    if resolution.skipped:
        message += "; optional servers skipped: " + "; ".join(
            f"{b.namespace}/{b.name} ({b.reason})" for b in resolution.skipped
        )
    return WantedCondition("ServersResolved", "True", "Resolved", message)


def _bridge(observed: Observed) -> WantedCondition:
    if observed.bridge == "disabled-by-run":
        return WantedCondition(
            "Bridge",
            "False",
            "Disabled",
            "spec.bridge.enabled is false: the agent runs without the bridge and without "
            "MCP_BRIDGE_URL",
        )
    if observed.bridge == "disabled-operator-wide":
        return WantedCondition(
            "Bridge",
            "False",
            "Disabled",
            "The bridge is disabled operator-wide: the agent runs without the bridge and "
            "without MCP_BRIDGE_URL",
        )
    return WantedCondition(
        "Bridge", "True", "Enabled", f"The agent reaches its tools at {observed.bridge_url}"
    )


def _phase_conditions(
    observed: Observed, phase: str, pod_status: Mapping[str, Any]
) -> list[WantedCondition]:
    name = observed.pod_name
    if phase == "Running":
        return [WantedCondition("Ready", "True", "Running", f"Pod {name} is running")]
    if phase == "Succeeded":
        message = f"Pod {name} completed"
        return [
            WantedCondition("Ready", "False", "Completed", message),
            WantedCondition("Succeeded", "True", "Completed", message),
        ]
    if phase == "Failed":
        reason = str(pod_status.get("reason") or "AgentFailed")
        message = f"Pod {name} failed: {_failure(pod_status)}"
        return [
            WantedCondition("Ready", "False", reason, message),
            WantedCondition("Failed", "True", reason, message),
        ]
    waiting = _waiting(pod_status)
    message = f"Pod {name} is {phase}" + (f": {waiting}" if waiting else "")
    return [WantedCondition("Ready", "False", "PodPending", message)]


def _agent_state(pod_status: Mapping[str, Any]) -> Mapping[str, Any]:
    for container in pod_status.get("containerStatuses") or ():
        if container.get("name") == "agent":
            state: Mapping[str, Any] = container.get("state") or {}
            return state
    return {}


def _finished_at(pod: Mapping[str, Any]) -> str | None:
    terminated = _agent_state(pod.get("status") or {}).get("terminated") or {}
    finished = terminated.get("finishedAt")
    return str(finished) if finished else None


def _failure(pod_status: Mapping[str, Any]) -> str:
    if pod_status.get("message"):
        return str(pod_status["message"])[:512]
    terminated = _agent_state(pod_status).get("terminated") or {}
    if terminated:
        why = terminated.get("reason") or "Error"
        return f"the agent exited with code {terminated.get('exitCode')} ({why})"
    return "no reason given"


def _waiting(pod_status: Mapping[str, Any]) -> str:
    waiting = _agent_state(pod_status).get("waiting") or {}
    if waiting.get("reason"):
        return str(waiting["reason"])
    if not pod_status.get("conditions"):
        return "no node has started it yet"
    return ""


_EVENT_TYPES = ("ServersResolved", "Ready", "Succeeded", "Failed")


def events(previous: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[Event]:
    """Events for the conditions that changed status or reason: transitions only."""
    previous = previous or {}
    found: list[Event] = []
    for type_ in _EVENT_TYPES:
        old = find(previous.get("conditions"), type_)
        now = find(new.get("conditions"), type_)
        if now is None:
            continue
        if old is not None and (old.get("status"), old.get("reason")) == (
            now.get("status"),
            now.get("reason"),
        ):
            continue
        if type_ == "Ready" and _said_elsewhere(new, now):
            continue
        kind: Literal["Normal", "Warning"] = "Normal"
        if now.get("status") == "False" or type_ == "Failed":
            kind = "Warning"
        found.append(Event(kind, str(now.get("reason")), str(now.get("message"))))
    return found


def _said_elsewhere(status: Mapping[str, Any], ready: Mapping[str, Any]) -> bool:
    """Whether another condition's Event already tells what ``Ready`` would say."""
    if find(status.get("conditions"), "Succeeded") or find(status.get("conditions"), "Failed"):
        return True
    resolved = find(status.get("conditions"), "ServersResolved")
    return resolved is not None and resolved.get("reason") == ready.get("reason")
