"""The audit trail: one JSON line per call, with outcome and facts, never a value.

A record names the time, run, the run Pod's identity (``identity``: namespace, ServiceAccount,
Pod — the caller a server's own log names), server, exposed and original tool, the outcome
code (``ok``,
one of :data:`~mcp_operator.bridge.errors.ERROR_CODES`, or ``invalid_request`` for a request
that was not a readable call), duration, attempts, the PII kinds and counts found in each
direction, and a SHA-256 of the canonical JSON of the arguments (to match a call across logs
without storing it). Argument and result values, hints and upstream messages are never part
of it, and neither is a name the agent made up: ``tool`` is a catalog name or ``(unknown)``,
with a short hash of what was sent (``toolSha256``). Writing the lines to stdout or a file is
the front's job.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mcp_operator.bridge.errors import OutcomeCode
from mcp_operator.net import jsoncodec

UNKNOWN_TOOL = "(unknown)"
"""The ``tool`` of a record whose name is not in the catalog (the name is never written)."""

TOOL_HASH_CHARS = 16
"""Hex digits of the SHA-256 of an unknown tool name kept in ``toolSha256``."""


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, UTF-8 kept: the same value always gives the same text."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
    )


def arguments_digest(arguments: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of ``arguments``."""
    return hashlib.sha256(canonical_json(arguments).encode("utf-8", "surrogatepass")).hexdigest()


def tool_digest(sent: Any) -> str:
    """The short hash of a tool name (or whatever stood in its place) that is not a catalog
    name: enough to group repeated attempts, never the name itself."""
    return arguments_digest(sent)[:TOOL_HASH_CHARS]


@dataclass(frozen=True)
class AuditRecord:
    """The audit facts of one call."""

    time: datetime
    """When the call arrived (wall clock, UTC)."""
    run: str
    """``namespace/name`` of the AgentRun."""
    server: str | None
    """``namespace/name`` of the server, when the exposed name resolved to one."""
    tool: str
    """The exposed name the agent called when it is a catalog name, else ``(unknown)``."""
    original_tool: str | None
    """The server's name for it, when resolved."""
    outcome: OutcomeCode
    duration_ms: float
    attempts: int
    """Calls sent upstream (0 when refused before the call)."""
    arguments_sha256: str | None
    """``None`` when the request could not be read as a call."""
    pii: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """``{"arguments": {kind: count}, "results": {kind: count}}``; directions with nothing
    found are left out."""
    schema_unchecked: bool = False
    """The tool's schema was broken, so the arguments went unchecked."""
    tool_sha256: str | None = None
    """:func:`tool_digest` of the name sent, when ``tool`` is ``(unknown)``."""
    pii_unscanned: tuple[str, ...] = ()
    """Directions too large to scan whole for PII (only their first part was scanned)."""
    identity: Mapping[str, str] | None = None
    """The run Pod's ``namespace``, ``serviceAccount`` and ``pod``: who the bridge called
    the servers as."""
    upstream_subject: str | None = None
    """Whom the server's token names as its subject (``sub``), when the bridge presents an
    OAuth token that is a JWT: for a token exchange, the run's ServiceAccount."""
    upstream_actor: str | None = None
    """Whom it names as the acting party (``act.sub``, RFC 8693 §4.1), when it does."""
    policy: Mapping[str, Any] = field(default_factory=dict)
    """What the authorization rules and the approval decided: ``rule``, ``action``,
    ``approval`` (``{decision, by, waitedMs}``); left out when no rule decided."""

    def to_dict(self) -> dict[str, Any]:
        when = self.time.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        record: dict[str, Any] = {
            "time": when,
            "run": self.run,
            **({"identity": dict(self.identity)} if self.identity is not None else {}),
            "server": self.server,
            "tool": self.tool,
            "originalTool": self.original_tool,
            "outcome": self.outcome,
            "durationMs": round(self.duration_ms, 3),
            "attempts": self.attempts,
            "argumentsSha256": self.arguments_sha256,
            "pii": {direction: dict(counts) for direction, counts in self.pii.items() if counts},
        }
        if self.tool_sha256 is not None:
            record["toolSha256"] = self.tool_sha256
        if self.pii_unscanned:
            record["piiUnscanned"] = list(self.pii_unscanned)
        if self.schema_unchecked:
            record["schemaUnchecked"] = True
        if self.upstream_subject is not None:
            record["upstreamSubject"] = self.upstream_subject
        if self.upstream_actor is not None:
            record["upstreamActor"] = self.upstream_actor
        if self.policy:
            record["policy"] = dict(self.policy)
        return record

    def to_json_line(self) -> str:
        """One line of JSON, newline-terminated, ASCII only (whatever a sink's encoding)."""
        return jsoncodec.ascii_line(self.to_dict())
