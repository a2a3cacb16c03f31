"""The event store of resumable SSE streams: ids, replay and bounds, on virtual time."""

from __future__ import annotations

import pytest

from mcp_operator.serve.events import (
    BadEventId,
    EventStore,
    ReplayGone,
    parse_event_id,
    replay_refusal,
)


def ids(frames: list[tuple[int, bytes]]) -> list[int]:
    return [seq for seq, _data in frames]


def test_each_event_is_numbered_on_its_stream_and_a_resume_gets_what_came_after() -> None:
    store = EventStore()
    log, priming = store.open("session-a", 0)
    assert priming == f"id: {log.id}-1\ndata: \n\n".encode()
    for step in range(3):
        store.append(log, {"method": "notifications/progress", "params": {"progress": step}}, 1)
    store.append(log, {"id": 1, "result": {}}, 2, last=True)
    resumed, missed = store.resume(f"{log.id}-2", "session-a", 3)
    assert resumed is log and log.ended
    assert ids(missed) == [3, 4, 5]
    assert missed[-1][1].startswith(f"id: {log.id}-5\nevent: message\ndata: ".encode())
    assert store.resume(f"{log.id}-5", "session-a", 3)[1] == []


def test_two_streams_never_share_an_id_and_one_owner_cannot_resume_anothers() -> None:
    store = EventStore()
    first, _ = store.open("a", 0)
    second, _ = store.open("b", 0)
    assert first.id != second.id
    with pytest.raises(ReplayGone):
        store.resume(f"{first.id}-1", "b", 0)
    with pytest.raises(ReplayGone):
        store.resume(f"{first.id}-9", "a", 0)  # an event not yet written


@pytest.mark.parametrize(
    "raw", ["", "1", "abc-1", "0123456789abcdef-0", "0123456789ABCDEF-1", "x" * 100, "a-b-c"]
)
def test_an_id_not_of_our_form_is_a_bad_request(raw: str) -> None:
    with pytest.raises(BadEventId):
        parse_event_id(raw)
    assert replay_refusal(BadEventId("no"))[0] == 400
    assert replay_refusal(ReplayGone("gone"))[0] == 404


def test_a_stream_keeps_at_most_its_count_and_bytes_and_says_when_it_dropped() -> None:
    store = EventStore(max_events=3, max_bytes=10_000)
    log, _ = store.open("a", 0)
    for step in range(10):
        store.append(log, {"step": step}, 1)
    assert len(log.events) == 3 and ids(store.after(log, 0)) == [9, 10, 11]
    with pytest.raises(ReplayGone):
        store.resume(f"{log.id}-5", "a", 1)  # 6..8 were dropped: a gap is never hidden
    assert ids(store.resume(f"{log.id}-8", "a", 1)[1]) == [9, 10, 11]
    small = EventStore(max_events=1000, max_bytes=200)
    log, _ = small.open("a", 0)
    for step in range(50):
        small.append(log, {"step": step, "pad": "x" * 20}, 1)
    assert log.bytes <= 200 and small.total_bytes == log.bytes


def test_the_total_bound_forgets_the_least_recently_written_stream() -> None:
    store = EventStore(max_total_bytes=1000)
    old, _ = store.open("a", 0)
    store.append(old, {"pad": "x" * 300}, 1)
    new, _ = store.open("b", 2)
    for _ in range(3):
        store.append(new, {"pad": "y" * 200}, 3)
    assert store.total_bytes <= 1000
    with pytest.raises(ReplayGone):
        store.resume(f"{old.id}-1", "a", 4)
    assert old.ended and store.forgotten == 1
    assert store.resume(f"{new.id}-1", "b", 4)[0] is new


def test_streams_expire_after_their_last_event_and_a_session_end_forgets_its_own() -> None:
    store = EventStore(ttl_seconds=60)
    quiet, _ = store.open("a", 0)
    busy, _ = store.open("a", 0)
    other, _ = store.open("b", 0)
    store.append(busy, {"n": 1}, 50)
    store.append(other, {"n": 1}, 50)
    with pytest.raises(ReplayGone):
        store.resume(f"{quiet.id}-1", "a", 61)
    assert store.resume(f"{busy.id}-1", "a", 61)[0] is busy
    store.drop_owner("a")
    assert len(store) == 1 and store.total_bytes == other.bytes
    store.expire(200)
    assert len(store) == 0 and store.total_bytes == 0


def test_a_client_that_never_reconnects_leaves_at_most_the_bounds() -> None:
    store = EventStore(max_events=10, max_bytes=2000, max_total_bytes=20_000, ttl_seconds=30)
    now = 0.0
    for call in range(500):
        log, _ = store.open(f"s{call % 7}", now)
        for step in range(40):
            store.append(log, {"progress": step, "pad": "z" * 50}, now)
        store.append(log, {"id": call, "result": {}}, now, last=True)
        now += 0.5
        assert store.total_bytes <= 20_000
        assert all(len(each.events) <= 10 for each in store._streams.values())
    assert store.total_bytes == sum(each.bytes for each in store._streams.values())
    store.expire(now + 31)
    assert len(store) == 0 and store.total_bytes == 0
