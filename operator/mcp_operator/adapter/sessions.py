"""The adapter's sessions in the one session table: what is kept of a client, and opening one.

The table itself (bounds, fairness per caller, expiry, eviction) is ``serve.sessions``;
the record is ``records.Session``. This module owns what the adapter adds: the few
capability names that routing needs (whether sampling, elicitation or roots requests may
be routed to a session; never the client's own objects, which any client could make
megabytes large), and ``open_session``, which opens an adapter session for a caller.
"""

from __future__ import annotations

from mcp_operator.adapter.records import Session
from mcp_operator.serve.sessions import SessionTable

AdapterSessions = SessionTable[Session]
"""The adapter's session table."""

ROUTED_CAPABILITIES: dict[str, tuple[str, ...]] = {
    "sampling": ("context", "tools"),
    "elicitation": ("form", "url"),
    "roots": ("listChanged",),
    "tasks": (),
}
"""Client capabilities worth remembering, with the sub-capabilities kept as ``name.sub``."""


def declared_capabilities(capabilities: object) -> frozenset[str]:
    """The routed capabilities a client declared in ``initialize``: a handful of names.

    ``{"sampling": {"tools": {}}, "roots": {}}`` -> ``{"sampling", "sampling.tools", "roots"}``.
    A capability counts when its value is an object; a sub-capability when it is an
    object or ``true``. Anything else in the client's capabilities is dropped.
    """
    if not isinstance(capabilities, dict):
        return frozenset()
    names: list[str] = []
    for name, subs in ROUTED_CAPABILITIES.items():
        value = capabilities.get(name)
        if not isinstance(value, dict):
            continue
        names.append(name)
        names.extend(
            f"{name}.{sub}"
            for sub in subs
            if isinstance(value.get(sub), dict) or value.get(sub) is True
        )
    return frozenset(names)


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
