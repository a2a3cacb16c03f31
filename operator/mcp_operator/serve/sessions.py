"""The one table of legacy (handshake-era) HTTP sessions, shared by the adapter and the bridge.

Pure bookkeeping: no sockets, no clock of its own (callers pass ``now``). A session is what
one ``initialize`` opened; the table knows of it only what its bounds need: its id, the
caller that opened it, when it was last used, its GET stream, and whether it is in a call
(``LegacySession.in_call``). Each server keeps what else it needs in a subclass of
``LegacySession`` (the adapter: capabilities, calls in flight, subscriptions).

**Fair by caller.** Sessions are counted per caller: the key that the endpoint derives from
the request (``client_address`` until authenticated identities exist; a parameter, so that
an identity can take its place). When the table is full, a caller's fair share is the table
divided among the callers that hold sessions, the newcomer included:

- a caller at or over its share makes room among **its own** sessions: the least recently
  used idle one (no call, no open GET stream) goes, or, with none idle, it is refused
  (``SessionLimitError``, 503) — a flood of ``initialize`` from one caller evicts only its
  own sessions;
- a caller under its share takes the place of the least recently used session **without a
  call in flight** of the caller most over its share: there a held GET stream does not
  protect a session, it counts against its own caller's share (the stream is closed with
  the session) — so one caller's held streams cannot lock another caller out;
- a session in a call is never evicted.

Idle sessions (no call, no stream) expire after ``idle_seconds``. The 2026-07-28 era has no
sessions.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

Headers = dict[bytes, str]
CallerKey = Callable[[Mapping[str, Any], Headers], str]
"""Who is asking, from a request: the key sessions are counted by."""


def client_address(scope: Mapping[str, Any], headers: Headers) -> str:
    """The caller key until authenticated identities exist: the client's network address."""
    client = scope.get("client")
    return str(client[0]) if client else ""


class StreamSink(Protocol):
    """Where messages for a session go outside any one call: its GET (or legacy SSE) stream."""

    def push(self, message: dict[str, Any]) -> bool:
        """Queue ``message``; False when the stream is closed or full (the message is dropped)."""
        ...

    def close(self) -> None:
        """End the stream (the session ended or the child restarted)."""
        ...


@dataclass(eq=False, slots=True, kw_only=True)
class LegacySession:
    """What the table knows of one legacy session."""

    id: str
    protocol_version: str
    last_active: float
    caller: str = ""
    """The key of the caller that opened it (``CallerKey``); set by the table."""
    stream: StreamSink | None = None
    open_requests: int = 0
    """HTTP requests being served for this session right now (keeps it from idling out)."""
    closed: bool = False

    def in_call(self) -> bool:
        """Whether the session is serving something now: such a session is never evicted."""
        return self.open_requests > 0


class SessionLimitError(Exception):
    """No session may make room for this caller's new one: the caller answers 503."""


S = TypeVar("S", bound=LegacySession)


def _idle(session: LegacySession) -> bool:
    return session.stream is None and not session.in_call()


def _least_recently_used(sessions: Iterable[S]) -> S | None:
    return min(sessions, key=lambda session: session.last_active, default=None)


class SessionTable(Generic[S]):
    """Sessions by id and by caller; bounded, fair, expiring.

    A lookup only stamps ``last_active``: the least recently used session is found when
    one must make room (a full table), so the hot path keeps no order.
    """

    def __init__(
        self, *, max_sessions: int, idle_seconds: float, replace_own_idle: bool = True
    ) -> None:
        self._sessions: dict[str, S] = {}
        self._by_caller: dict[str, dict[str, S]] = {}
        """Each caller's sessions by id."""
        self._max = max_sessions
        self._idle = idle_seconds
        self._replace_own_idle = replace_own_idle
        """Whether a caller at its share may replace its own idle session (else it waits for
        one to expire)."""
        self.evicted = 0
        """Sessions dropped to make room for new ones since start."""

    @property
    def max_sessions(self) -> int:
        return self._max

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[S]:
        return iter(list(self._sessions.values()))

    def count(self, caller: str) -> int:
        """How many sessions ``caller`` holds."""
        own = self._by_caller.get(caller)
        return len(own) if own is not None else 0

    def create(self, build: Callable[[str], S], *, caller: str, now: float) -> tuple[S, list[S]]:
        """Open a session for ``caller``: ``build`` makes the record for a new unguessable id.

        Returns it and the sessions dropped to make room, expired or evicted (the caller ends
        them). Raises SessionLimitError when the table is full and the fair rule finds no
        session to evict.
        """
        evicted: list[S] = []
        if len(self._sessions) >= self._max:
            evicted.extend(self.expire(now))
        if len(self._sessions) >= self._max:
            victim = self._victim(caller)
            if victim is None:
                raise SessionLimitError(f"all {self._max} sessions are busy or not this caller's")
            self._drop(victim)
            self.evicted += 1
            evicted.append(victim)
        session = build(new_session_id())
        session.caller = caller
        session.last_active = now
        self._sessions[session.id] = session
        self._by_caller.setdefault(caller, {})[session.id] = session
        return session, evicted

    def can_admit(self) -> bool:
        """Whether a new session would be accepted now without taking a busy one's place."""
        return len(self._sessions) < self._max or any(map(_idle, self._sessions.values()))

    def get(self, session_id: str, now: float) -> S | None:
        """The live session with this id, touched; None if unknown or idle too long."""
        session = self._sessions.get(session_id)
        if session is None:
            return None
        if self._idle_too_long(session, now):
            self._drop(session)
            return None
        session.last_active = now
        return session

    def owner(self, session_id: str) -> str | None:
        """The key of the caller that opened the session with this id (not touched), or None."""
        session = self._sessions.get(session_id)
        return session.caller if session is not None else None

    def remove(self, session_id: str) -> S | None:
        """Drop one session (DELETE); returns it so the caller can cancel its calls."""
        session = self._sessions.get(session_id)
        if session is not None:
            self._drop(session)
        return session

    def expire(self, now: float) -> list[S]:
        """Drop every session idle for longer than the limit; returns them."""
        expired = [s for s in self._sessions.values() if self._idle_too_long(s, now)]
        for session in expired:
            self._drop(session)
        return expired

    def clear(self) -> list[S]:
        """Drop every session (the child restarted: clients must re-initialize)."""
        sessions = list(self._sessions.values())
        for session in sessions:
            self._drop(session)
        return sessions

    def streams(self) -> Iterator[StreamSink]:
        """The open GET streams."""
        for session in list(self._sessions.values()):
            if session.stream is not None:
                yield session.stream

    def close_streams(self) -> None:
        """End every GET stream (shutdown); the sessions stay."""
        for stream in list(self.streams()):
            stream.close()

    def _victim(self, caller: str) -> S | None:
        """The session that makes room for ``caller``'s new one, by the fair rule."""
        callers = len(self._by_caller) + (caller not in self._by_caller)
        share = max(1, self._max // callers)
        if self.count(caller) >= share:
            if not self._replace_own_idle:
                return None
            return _least_recently_used(filter(_idle, self._by_caller[caller].values()))
        over = sorted(
            (own for key, own in self._by_caller.items() if len(own) > share and key != caller),
            key=len,
            reverse=True,
        )
        for own in over:
            victim = _least_recently_used(s for s in own.values() if not s.in_call())
            if victim is not None:
                return victim
        return None

    def _idle_too_long(self, session: S, now: float) -> bool:
        return now - session.last_active > self._idle and _idle(session)

    def _drop(self, session: S) -> None:
        self._sessions.pop(session.id, None)
        own = self._by_caller.get(session.caller)
        if own is not None:
            own.pop(session.id, None)
            if not own:
                del self._by_caller[session.caller]
        session.closed = True
        if session.stream is not None:
            session.stream.close()
            session.stream = None


def new_session_id() -> str:
    """An unguessable session id (128 bits, hex)."""
    return secrets.token_hex(16)
