"""The agent's legacy (handshake-era) sessions: create, look up, expire, and their GET streams.

Pure bookkeeping, no sockets and no clock of its own (callers pass ``now``): a session is what
one ``initialize`` opened, with its negotiated version and at most one open GET stream, on
which the bridge sends ``notifications/tools/list_changed``. Bounded in count; a session idle
for longer than the limit (and without an open stream) is dropped. The 2026-07-28 era has no
sessions.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field

from mcp_operator.serve.sse import SseStream

MAX_SESSIONS = 256
IDLE_SECONDS = 3600.0


class SessionLimitError(Exception):
    """Every slot is taken by a live session: the caller answers 503."""


@dataclass
class AgentSession:
    """One legacy session of the agent."""

    id: str
    protocol_version: str
    last_active: float
    stream: SseStream | None = field(default=None, repr=False)


class SessionTable:
    """Sessions by id."""

    def __init__(self, max_sessions: int = MAX_SESSIONS, idle_seconds: float = IDLE_SECONDS):
        self._sessions: dict[str, AgentSession] = {}
        self._max = max_sessions
        self._idle = idle_seconds

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, protocol_version: str, now: float) -> AgentSession:
        if len(self._sessions) >= self._max:
            self.expire(now)
            if len(self._sessions) >= self._max:
                raise SessionLimitError(f"{self._max} sessions are open")
        session = AgentSession(secrets.token_hex(16), protocol_version, now)
        self._sessions[session.id] = session
        return session

    def get(self, session_id: str, now: float) -> AgentSession | None:
        session = self._sessions.get(session_id)
        if session is None:
            return None
        if session.stream is None and now - session.last_active > self._idle:
            self.remove(session_id)
            return None
        session.last_active = now
        return session

    def remove(self, session_id: str) -> AgentSession | None:
        session = self._sessions.pop(session_id, None)
        if session is not None and session.stream is not None:
            session.stream.close()
            session.stream = None
        return session

    def expire(self, now: float) -> None:
        for session in list(self._sessions.values()):
            if session.stream is None and now - session.last_active > self._idle:
                self.remove(session.id)

    def streams(self) -> Iterator[SseStream]:
        """The open GET streams."""
        for session in list(self._sessions.values()):
            if session.stream is not None:
                yield session.stream

    def close_streams(self) -> None:
        for stream in self.streams():
            stream.close()
