"""The one session table as the adapter uses it: bounded (evicting the least recently used
idle session), expiring, resettable, and keeping only the capability names that routing needs."""

from __future__ import annotations

import pytest

from mcp_operator.adapter.records import Session
from mcp_operator.adapter.sessions import declared_capabilities, open_session
from mcp_operator.serve.sessions import SessionLimitError, SessionTable


class Stream:
    closed = False

    def push(self, message: object) -> bool:
        return True

    def close(self) -> None:
        self.closed = True


def make(table: SessionTable[Session], now: float = 0.0) -> Session:
    session, _evicted = open_session(
        table, caller="a", protocol_version="2025-06-18", declared=frozenset(), now=now
    )
    return session


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


def test_a_full_table_evicts_the_least_recently_used_idle_session() -> None:
    table = SessionTable(max_sessions=3, idle_seconds=1800)
    first, second, third = make(table, 0), make(table, 1), make(table, 2)
    assert table.get(first.id, 3) is first  # first is now the most recently used
    fourth, evicted = open_session(
        table, caller="a", protocol_version="2025-06-18", declared=frozenset(), now=4
    )
    assert evicted == [second] and second.closed
    assert table.get(second.id, 5) is None
    assert {s.id for s in table} == {first.id, third.id, fourth.id}
    assert table.evicted == 1


def test_a_flood_of_initializes_never_locks_out_a_new_client() -> None:
    table = SessionTable(max_sessions=1000, idle_seconds=1800)
    for now in range(10_000):
        make(table, now)
    assert len(table) == 1000 and table.can_admit()
    assert make(table, 10_001) is not None


def test_busy_sessions_are_never_evicted_and_a_table_of_busy_ones_refuses() -> None:
    table = SessionTable(max_sessions=2, idle_seconds=1800)
    streaming, calling = make(table, 0), make(table, 1)
    streaming.stream = Stream()
    calling.open_requests = 1
    assert not table.can_admit()
    with pytest.raises(SessionLimitError):
        make(table, 2)
    calling.open_requests = 0
    assert table.can_admit()
    _new, evicted = open_session(
        table, caller="a", protocol_version="2025-06-18", declared=frozenset(), now=3
    )
    assert evicted == [calling] and not streaming.closed


def test_a_full_table_makes_room_by_expiring_idle_sessions() -> None:
    table = SessionTable(max_sessions=1, idle_seconds=30)
    make(table, 0)
    assert make(table, 100) is not None


def test_only_the_capability_names_routing_needs_are_kept() -> None:
    capabilities = {
        "sampling": {"tools": {}, "context": False},
        "elicitation": {"form": {}, "url": True},
        "roots": {"listChanged": True},
        "experimental": {f"k{i}": {} for i in range(10_000)},
        "tasks": "not an object",
    }
    assert declared_capabilities(capabilities) == {
        "sampling",
        "sampling.tools",
        "elicitation",
        "elicitation.form",
        "elicitation.url",
        "roots",
        "roots.listChanged",
    }
    assert declared_capabilities(["sampling"]) == frozenset()
    session, _ = open_session(
        SessionTable(max_sessions=1, idle_seconds=1),
        caller="a",
        protocol_version="2025-11-25",
        declared=declared_capabilities(capabilities),
        now=0,
    )
    assert session.can("sampling") and not session.can("tasks")


def test_clear_drops_everything_and_ids_are_unguessable() -> None:
    table = SessionTable(max_sessions=10, idle_seconds=30)
    sessions = [make(table) for _ in range(3)]
    assert len({s.id for s in sessions}) == 3 and all(len(s.id) == 32 for s in sessions)
    stream = Stream()
    sessions[0].stream = stream
    assert len(table.clear()) == 3
    assert stream.closed and len(table) == 0
    assert table.get(sessions[1].id, 0) is None
