"""The adapter's session table: bounded, expiring, resettable."""

from __future__ import annotations

import pytest

from mcp_operator.adapter.records import Session
from mcp_operator.adapter.sessions import SessionLimitError, SessionTable


class Stream:
    closed = False

    def push(self, message: object) -> bool:
        return True

    def close(self) -> None:
        self.closed = True


def make(table: SessionTable, now: float = 0.0) -> Session:
    return table.create(protocol_version="2025-06-18", capabilities={}, client_info=None, now=now)


def test_a_session_idle_longer_than_the_limit_is_gone() -> None:
    table = SessionTable(max_sessions=10, idle_seconds=30)
    session = make(table)
    assert table.get(session.id, 29) is session
    assert table.get(session.id, 29 + 31) is None
    assert session.closed


def test_a_session_with_an_open_stream_does_not_idle_out() -> None:
    table = SessionTable(max_sessions=10, idle_seconds=30)
    session = make(table)
    session.stream = Stream()
    assert table.expire(1000) == []
    assert table.get(session.id, 1000) is session


def test_expire_returns_the_dropped_sessions_and_closes_their_streams() -> None:
    table = SessionTable(max_sessions=10, idle_seconds=30)
    old, fresh = make(table, 0), make(table, 100)
    stream = Stream()
    old.stream = stream
    old.stream = None  # stream ended; the session idles
    assert table.expire(120) == [old]
    assert table.get(fresh.id, 120) is fresh


def test_the_table_is_bounded() -> None:
    table = SessionTable(max_sessions=2, idle_seconds=30)
    make(table)
    make(table)
    with pytest.raises(SessionLimitError):
        make(table)


def test_a_full_table_makes_room_by_expiring_idle_sessions() -> None:
    table = SessionTable(max_sessions=1, idle_seconds=30)
    make(table, 0)
    assert make(table, 100) is not None


def test_clear_drops_everything_and_ids_are_unguessable() -> None:
    table = SessionTable(max_sessions=10, idle_seconds=30)
    sessions = [make(table) for _ in range(3)]
    assert len({s.id for s in sessions}) == 3 and all(len(s.id) == 32 for s in sessions)
    stream = Stream()
    sessions[0].stream = stream
    assert len(table.clear()) == 3
    assert stream.closed and len(table) == 0
    assert table.get(sessions[1].id, 0) is None
