"""The table of legacy (handshake-era) HTTP sessions: create, look up, evict, expire, reset.

Pure bookkeeping: no sockets, no clock of its own (callers pass ``now``). A
session is what one HTTP client's ``initialize`` opened: its negotiated
version, the few capability names that routing needs (whether sampling,
elicitation or roots requests may be routed to it; never the client's own
objects, which any client could make megabytes large), its calls in flight,
its GET stream and its resource subscriptions (the record itself is
``records.Session``). The table is bounded: when it is full, a new session
takes the place of the least recently used idle one, so that a flood of
``initialize`` requests cannot lock clients out; only when every session is
busy (a call in flight or a GET stream open) is a new one refused. The
2026-07-28 era has no sessions.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Iterator

from mcp_operator.adapter.records import Session

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


class SessionLimitError(Exception):
    """Every session is busy and the table is full: the caller answers 503."""


def _busy(session: Session) -> bool:
    return session.open_requests > 0 or session.stream is not None or bool(session.calls)


class SessionTable:
    """Sessions by id, least recently used first; bounded in count, expired after idling."""

    def __init__(self, *, max_sessions: int, idle_seconds: float) -> None:
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._max = max_sessions
        self._idle = idle_seconds
        self.evicted = 0
        """Idle sessions dropped to make room for new ones since start."""

    @property
    def max_sessions(self) -> int:
        return self._max

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[Session]:
        return iter(list(self._sessions.values()))

    def create(
        self, *, protocol_version: str, declared: frozenset[str], now: float
    ) -> tuple[Session, list[Session]]:
        """Open a session with an unguessable id; returns it and the sessions evicted for it.

        When the table is full, the least recently used idle session makes room
        (the caller ends it at the router). Raises SessionLimitError when every
        session is busy.
        """
        evicted: list[Session] = []
        if len(self._sessions) >= self._max:
            victim = self._least_recently_used_idle()
            if victim is None:
                raise SessionLimitError(f"all {self._max} sessions are busy")
            self._drop(victim)
            self.evicted += 1
            evicted.append(victim)
        session = Session(
            id=secrets.token_hex(16),
            protocol_version=protocol_version,
            declared=declared,
            last_active=now,
        )
        self._sessions[session.id] = session
        return session, evicted

    def can_admit(self) -> bool:
        """Whether a new session would be accepted now (room, or an idle session to evict)."""
        return len(self._sessions) < self._max or self._least_recently_used_idle() is not None

    def get(self, session_id: str, now: float) -> Session | None:
        """The live session with this id, touched; None if unknown or idle too long."""
        session = self._sessions.get(session_id)
        if session is None:
            return None
        if self._idle_too_long(session, now):
            self._drop(session)
            return None
        session.last_active = now
        self._sessions.move_to_end(session_id)
        return session

    def remove(self, session_id: str) -> Session | None:
        """Drop one session (DELETE); returns it so the caller can cancel its calls."""
        session = self._sessions.get(session_id)
        if session is not None:
            self._drop(session)
        return session

    def expire(self, now: float) -> list[Session]:
        """Drop every session idle for longer than the limit; returns them."""
        expired = [s for s in self._sessions.values() if self._idle_too_long(s, now)]
        for session in expired:
            self._drop(session)
        return expired

    def clear(self) -> list[Session]:
        """Drop every session (the child restarted: clients must re-initialize)."""
        sessions = list(self._sessions.values())
        for session in sessions:
            self._drop(session)
        return sessions

    def _least_recently_used_idle(self) -> Session | None:
        for session in self._sessions.values():
            if not _busy(session):
                return session
        return None

    def _idle_too_long(self, session: Session, now: float) -> bool:
        return not _busy(session) and now - session.last_active > self._idle

    def _drop(self, session: Session) -> None:
        self._sessions.pop(session.id, None)
        session.closed = True
        if session.stream is not None:
            session.stream.close()
            session.stream = None
