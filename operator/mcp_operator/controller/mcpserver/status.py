"""What an MCPServer's status says after each reconcile: pure functions, no I/O.

The reconciler decides an :class:`Outcome` (probed, failed, invalid, suspended,
not probed); :func:`status_patch` turns it, with the previous status, into the
merge patch for the ``status`` subresource, and :func:`events` says which
Events the change deserves (:mod:`mcp_operator.controller.status_writer` does
the writing and posting). Keeping this pure is what lets the unit tests pin
down the promises users rely on: a failed probe keeps the last known tools and
says since when the server is failing; ``lastTransitionTime`` moves only when a
condition flips.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp_operator.controller.conditions import WantedCondition, find, invalid_spec, merge
from mcp_operator.controller.events import Event
from mcp_operator.controller.mcpserver.pins import SHA, Pinning, changes, pin

SERVER_INFO_KEYS = ("name", "version", "protocolVersion")

Kind = Literal["probed", "failed", "invalid", "suspended", "not-probed"]


@dataclass(frozen=True)
class Outcome:
    """The result of one reconcile of one MCPServer."""

    kind: Kind
    reason: str = ""
    message: str = ""
    probe_fields: Mapping[str, Any] = field(default_factory=dict)
    """tools, toolCount, discoveredToolCount, serverInfo (``report.status_fields``)."""
    warnings: Sequence[str] = ()
    deployed: WantedCondition | None = None
    """The ``Deployed`` condition of a managed server, ``None`` for an external one."""
    ready_reason: str = "ProbeFailed"
    """The ``Ready`` reason of a failure: ``ProbeFailed``, or what stopped us before probing
    (``SecretNotFound``, ``ApplyFailed``, ...)."""
    pinning: Pinning = "pin"
    """``spec.toolsPinning`` (:mod:`~mcp_operator.controller.mcpserver.pins`)."""
    approved_tools: str | None = None
    """The approval annotation's value (``strict`` pinning)."""
    server: str = ""
    """The MCPServer's name, for the approval command in the ``ToolsChanged`` message."""
    network: WantedCondition | None = None
    """The ``NetworkPolicy`` condition of a managed server, ``None`` for an external one."""
    isolation: WantedCondition | None = None
    """The ``Isolation`` condition of a managed server (who besides bridges holds a key),
    ``None`` for an external one."""


def probed_reason(outcome: Outcome) -> str:
    """The ``Probed`` reason of a probe's outcome, decided here alone (the condition and the
    probe metrics say the same): ``ToolsDiscovered`` (``...WithWarnings``) or the failure's."""
    if outcome.kind == "probed":
        return "ToolsDiscoveredWithWarnings" if outcome.warnings else "ToolsDiscovered"
    return outcome.reason


def status_patch(
    previous: Mapping[str, Any] | None,
    outcome: Outcome,
    *,
    generation: int | None,
    url: str | None,
    now: str,
) -> dict[str, Any]:
    """The merge patch for ``status`` (fields absent from the patch are kept as they are)."""
    previous = previous or {}
    patch: dict[str, Any] = {"observedGeneration": generation}
    if url is not None:
        patch["url"] = url
    wanted: list[WantedCondition] = []
    if outcome.deployed is not None:
        wanted.append(outcome.deployed)
    if outcome.network is not None:
        wanted.append(outcome.network)
    if outcome.isolation is not None:
        wanted.append(outcome.isolation)

    if outcome.kind == "probed":
        patch.update(outcome.probe_fields)
        pinned = pin(
            outcome.probe_fields.get("tools") or [],
            previous.get("tools"),
            mode=outcome.pinning,
            approved=outcome.approved_tools,
            server=outcome.server,
        )
        patch["tools"] = pinned.tools
        if pinned.condition is not None:
            wanted.append(pinned.condition)
        # A merge patch keeps keys it does not mention: null removes what an earlier probe
        # said and this one does not (a server that stopped reporting its version).
        patch["serverInfo"] = {key: None for key in SERVER_INFO_KEYS} | dict(
            outcome.probe_fields.get("serverInfo") or {}
        )
        patch["lastProbeTime"] = now
        exposed = outcome.probe_fields.get("toolCount", 0)
        discovered = outcome.probe_fields.get("discoveredToolCount", 0)
        message = f"Discovered {discovered} tools, {exposed} exposed after filters"
        if outcome.warnings:
            message += "; " + "; ".join(outcome.warnings)
        wanted.append(WantedCondition("Probed", "True", probed_reason(outcome), message))
        wanted.append(_ready_after(outcome.deployed, "Ready", f"Serving {exposed} tools"))
    elif outcome.kind == "failed":
        probed_before = find(previous.get("conditions"), "Probed")
        since = now
        if probed_before is not None and probed_before.get("status") == "False":
            since = str(probed_before.get("lastTransitionTime") or now)
        message = f"{outcome.message} (failing since {since})"
        kept = len(previous.get("tools") or [])
        if kept and previous.get("lastProbeTime"):
            message += (
                f"; keeping {kept} tools from the last successful probe at "
                f"{previous['lastProbeTime']}"
            )
        wanted.append(WantedCondition("Probed", "False", probed_reason(outcome), message))
        wanted.append(WantedCondition("Ready", "False", outcome.ready_reason, message))
    elif outcome.kind == "invalid":
        wanted.append(invalid_spec(outcome.message))
    elif outcome.kind == "suspended":
        wanted.append(WantedCondition("Probed", "Unknown", "Suspended", "Probing is suspended"))
        wanted.append(WantedCondition("Ready", "False", "Suspended", "spec.suspend is true"))
    elif outcome.kind == "not-probed":
        wanted.append(
            WantedCondition("Probed", "Unknown", "ProbeDisabled", "spec.probe.enabled is false")
        )
        wanted.append(
            _ready_after(
                outcome.deployed, "ProbeDisabled", "Not probed: spec.probe.enabled is false"
            )
        )
    patch["conditions"] = merge(previous.get("conditions"), wanted, now=now, generation=generation)
    return patch


def remembered(status: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What the fleet keeps of a status between reconciles: what :func:`status_patch`,
    :func:`events` and the metrics read of the previous status (the conditions, the last
    probe time, the tool names), not the tools' descriptions and annotations, which at
    10,000 servers took most of the operator's memory."""
    if status is None:
        return None
    kept = {
        key: status[key] for key in ("conditions", "lastProbeTime", "toolCount") if key in status
    }
    if "tools" in status:
        kept["tools"] = [
            {key: tool[key] for key in ("name", "originalName", SHA) if key in tool}
            for tool in status["tools"] or []
        ]
    return kept


def _ready_after(deployed: WantedCondition | None, reason: str, message: str) -> WantedCondition:
    """Ready is True only when the Deployment (if any) is available too."""
    if deployed is not None and deployed.status != "True":
        return WantedCondition("Ready", "False", deployed.reason, deployed.message)
    return WantedCondition("Ready", "True", reason, message)


def events(previous: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[Event]:
    """Events that a status change deserves: transitions, not repetitions."""
    previous = previous or {}
    old_probed = find(previous.get("conditions"), "Probed")
    new_probed = find(new.get("conditions"), "Probed")
    result: list[Event] = []
    if new_probed is None:
        return result
    old_state = old_probed.get("status") if old_probed else None
    new_state = new_probed.get("status")
    if new_state == "True":
        if old_state != "True":
            result.append(Event("Normal", "ToolsDiscovered", str(new_probed.get("message"))))
        else:
            seen = changes(previous.get("tools"), new.get("tools") or [])
            if seen:
                count = new.get("toolCount", len(new.get("tools") or []))
                result.append(
                    Event(
                        "Normal",
                        "ToolsChanged",
                        f"{len(seen.added)} tools added, {len(seen.removed)} removed, "
                        f"{len(seen.changed)} changed; {count} exposed ({seen.sentence()})",
                    )
                )
        old_pins = find(previous.get("conditions"), "ToolsChanged")
        new_pins = find(new.get("conditions"), "ToolsChanged")
        if (
            new_pins is not None
            and new_pins.get("reason") == "ApprovalRequired"
            and (old_pins is None or old_pins.get("message") != new_pins.get("message"))
        ):
            result.append(Event("Warning", "ToolsApprovalRequired", str(new_pins.get("message"))))
        if new_probed.get("reason") == "ToolsDiscoveredWithWarnings" and (
            old_probed is None or old_probed.get("message") != new_probed.get("message")
        ):
            result.append(Event("Warning", "ToolWarnings", str(new_probed.get("message"))))
    elif new_state == "False" and (
        old_state != "False"
        or (old_probed and old_probed.get("reason") != new_probed.get("reason"))
    ):
        # What stopped the server before any probe is named as itself (a taken name is not
        # the server's failure); a probe's own failures are ProbeFailed.
        reason = "NameConflict" if new_probed.get("reason") == "NameConflict" else "ProbeFailed"
        result.append(Event("Warning", reason, str(new_probed.get("message"))))
    return result
