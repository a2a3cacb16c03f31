"""The adapter's sessions in the one session table: what is kept of a client, and opening one.

The table itself (bounds, fairness per caller, expiry, eviction) is ``serve.sessions``;
the record is ``records.Session``. This module owns what the adapter adds:
``open_session``, which opens an adapter session for a caller with the few capability names
that routing needs (``serve.capabilities``, shared with the bridge).
"""

from __future__ import annotations

from mcp_operator.adapter.records import Session
from mcp_operator.serve.capabilities import ROUTED_CAPABILITIES, declared_capabilities
from mcp_operator.serve.sessions import SessionTable

__all__ = ["ROUTED_CAPABILITIES", "AdapterSessions", "declared_capabilities", "open_session"]

AdapterSessions = SessionTable[Session]
"""The adapter's session table."""


def open_session(
    table: AdapterSessions,
    *,
    caller: str,
    protocol_version: str,
    declared: frozenset[str],
    now: float,
) -> tuple[Session, list[Session]]:
    """Open a session for ``caller``; returns it and the sessions dropped to make room (end
    them at the router). Raises ``SessionLimitError`` when the fair rule finds no room."""

    def build(session_id: str) -> Session:
        return Session(
            id=session_id, protocol_version=protocol_version, declared=declared, last_active=now
        )

    return table.create(build, caller=caller, now=now)
