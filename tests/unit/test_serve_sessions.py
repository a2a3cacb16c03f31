"""The one session table's fairness: sessions counted per caller, eviction only of the caller
over its share, held GET streams counted against their own caller (pure, virtual time)."""

from __future__ import annotations

import pytest

from mcp_operator.serve.sessions import (
    LegacySession,
    SessionLimitError,
    SessionTable,
    client_address,
)


class Stream:
    closed = False

    def push(self, message: object) -> bool:
        return True

    def close(self) -> None:
        self.closed = True


def table(size: int, **options: bool) -> SessionTable[LegacySession]:
    return SessionTable(max_sessions=size, idle_seconds=1800, **options)


def open_for(sessions: SessionTable[LegacySession], caller: str, now: float) -> LegacySession:
    def build(session_id: str) -> LegacySession:
        return LegacySession(id=session_id, protocol_version="2025-11-25", last_active=now)

    return sessions.create(build, caller=caller, now=now)[0]


def test_one_callers_flood_of_initializes_never_evicts_another_callers_idle_session() -> None:
    sessions = table(4)
    victim = open_for(sessions, "10.0.0.2", 0)
    flood = [open_for(sessions, "10.0.0.3", now) for now in range(1, 101)]
    assert sessions.get(victim.id, 200) is victim and not victim.closed
    assert sessions.count("10.0.0.3") == 3 and sessions.evicted == 97
    assert all(s.closed for s in flood[:-3]) and not any(s.closed for s in flood[-3:])


def test_held_streams_of_one_caller_do_not_stop_another_callers_initialize() -> None:
    sessions = table(4)
    held = [open_for(sessions, "10.0.0.2", now) for now in range(4)]
    streams = [Stream() for _ in held]
    for session, stream in zip(held, streams, strict=True):
        session.stream = stream
    assert not sessions.can_admit()
    with pytest.raises(SessionLimitError):
        open_for(sessions, "10.0.0.2", 5)  # its own share is full of its own busy sessions
    newcomer = open_for(sessions, "10.0.0.3", 6)
    assert sessions.get(newcomer.id, 7) is newcomer
    assert held[0].closed and streams[0].closed  # the over-share caller's least recent one
    assert not any(s.closed for s in held[1:])


def test_a_session_in_a_call_is_never_evicted_for_another_caller() -> None:
    sessions = table(2)
    calling = [open_for(sessions, "10.0.0.2", now) for now in range(2)]
    for session in calling:
        session.open_requests = 1
    with pytest.raises(SessionLimitError):
        open_for(sessions, "10.0.0.3", 3)
    calling[1].open_requests = 0
    calling[1].stream = Stream()
    newcomer = open_for(sessions, "10.0.0.3", 4)
    assert calling[1].closed and not calling[0].closed and not newcomer.closed


def test_the_caller_most_over_its_share_makes_room_and_shares_follow_the_callers() -> None:
    sessions = table(6)
    big = [open_for(sessions, "big", now) for now in range(4)]
    small = [open_for(sessions, "small", now) for now in (4, 5)]
    third = open_for(sessions, "third", 6)  # share 6 // 3 = 2: only "big" is over it
    assert big[0].closed and not any(s.closed for s in small)
    assert {sessions.count(c) for c in ("big", "small", "third")} == {3, 2, 1}
    assert sessions.get(third.id, 7) is third


def test_without_replacing_its_own_a_caller_at_its_share_waits_for_expiry() -> None:
    sessions = table(2, replace_own_idle=False)
    open_for(sessions, "agent", 0)
    open_for(sessions, "agent", 1)
    with pytest.raises(SessionLimitError):
        open_for(sessions, "agent", 2)
    assert open_for(sessions, "other", 3) is not None  # another caller still gets its share


def test_the_caller_key_is_the_client_address() -> None:
    assert client_address({"client": ("127.0.0.3", 5123)}, {}) == "127.0.0.3"
    assert client_address({}, {}) == ""
