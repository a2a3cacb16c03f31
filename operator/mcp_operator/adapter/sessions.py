"""The table of legacy (handshake-era) HTTP sessions: create, look up, expire, reset.

Pure bookkeeping: no sockets, no clock of its own (callers pass ``now``). A
session is what one HTTP client's ``initialize`` opened: its negotiated
version, its capabilities (which decide whether sampling, elicitation or
roots requests may be routed to it), its calls in flight, its GET stream and
its resource subscriptions (the record itself is ``records.Session``). The
2026-07-28 era has no sessions.
"""

from __future__ import annotations

import secrets
from typing import Any

from mcp_operator.adapter.records import Session


class SessionLimitError(Exception):
    """The table is full: the caller answers 503."""


class SessionTable:
    """Sessions by id, bounded in count, expired after idling."""

    def __init__(self, *, max_sessions: int, idle_seconds: float) -> None:
        self._sessions: dict[str, Session] = {}
        self._max = max_sessions
        self._idle = idle_seconds

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(list(self._sessions.values()))

    def create(
        self,
        *,
        protocol_version: str,
        capabilities: dict[str, Any],
        client_info: dict[str, Any] | None,
        now: float,
    ) -> Session:
        """Open a session with an unguessable id; raises SessionLimitError when full."""
        if len(self._sessions) >= self._max:
            self.expire(now)
            if len(self._sessions) >= self._max:
                raise SessionLimitError(f"{self._max} sessions are open")
        session = Session(
            id=secrets.token_hex(16),
            protocol_version=protocol_version,
            capabilities=capabilities,
            client_info=client_info,
            last_active=now,
        )
        self._sessions[session.id] = session
        return session

    def get(self, session_id: str, now: float) -> Session | None:
        """The live session with this id, touched; None if unknown or idle too long."""
        session = self._sessions.get(session_id)
        if session is None:
            return None
        if self._idle_too_long(session, now):
            self._drop(session)
            return None
        session.last_active = now
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

    def _idle_too_long(self, session: Session, now: float) -> bool:
        busy = session.open_requests > 0 or session.stream is not None or session.calls
        return not busy and now - session.last_active > self._idle

    def _drop(self, session: Session) -> None:
        self._sessions.pop(session.id, None)
        session.closed = True
        if session.stream is not None:
            session.stream.close()
            session.stream = None
