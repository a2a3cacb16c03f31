"""Leader election: the pure decision of one round, and the elector against a fake API.

The fake keeps one Lease with a ``resourceVersion`` and refuses a stale write with 409,
as the API server does, so two electors on one fake really compete.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest

from mcp_operator.controller.leader import ElectionError, Elector, lead
from mcp_operator.controller.lease import LeaseRecord, decide, must_step_down, released
from mcp_operator.controller.settings import LeaderElectionSettings
from mcp_operator.kube import KubeError, Resource
from tests.support.waiting import eventually_async
from tests.unit.fakes import FakeKube

NOW = datetime.datetime(2026, 12, 1, 9, 0, 0, tzinfo=datetime.UTC)
SETTINGS = LeaderElectionSettings(
    lease_duration_seconds=15, renew_deadline_seconds=10, retry_period_seconds=0.01
)


def held_by(holder: str | None, *, version: str = "7", transitions: int = 3) -> LeaseRecord:
    return LeaseRecord(holder, 15, "a", "r", transitions, version)


# -- the decision ------------------------------------------------------------------------


def test_an_absent_lease_is_created_with_us_as_holder() -> None:
    chosen = decide(None, identity="me", unchanged_for=0, now=NOW, settings=SETTINGS)
    assert chosen.action == "create" and chosen.record is not None
    assert chosen.record.holder == "me" and chosen.record.transitions == 0
    assert chosen.record.renew_time == "2026-12-01T09:00:00.000000Z"


def test_our_own_lease_is_renewed_without_a_transition() -> None:
    chosen = decide(held_by("me"), identity="me", unchanged_for=99, now=NOW, settings=SETTINGS)
    assert chosen.action == "renew" and chosen.record is not None
    assert chosen.record.transitions == 3 and chosen.record.acquire_time == "a"
    assert chosen.record.resource_version == "7"


def test_someone_elses_fresh_lease_is_waited_for() -> None:
    chosen = decide(held_by("other"), identity="me", unchanged_for=14.9, now=NOW, settings=SETTINGS)
    assert chosen.action == "wait" and chosen.record is None


def test_someone_elses_lease_unchanged_for_its_duration_is_taken_over() -> None:
    chosen = decide(held_by("other"), identity="me", unchanged_for=15, now=NOW, settings=SETTINGS)
    assert chosen.action == "take" and chosen.record is not None
    assert chosen.record.holder == "me" and chosen.record.transitions == 4
    assert chosen.record.resource_version == "7", "the take-over is guarded by the version seen"


def test_a_released_lease_is_taken_at_once() -> None:
    chosen = decide(held_by(None), identity="me", unchanged_for=0, now=NOW, settings=SETTINGS)
    assert chosen.action == "take"


def test_a_released_record_has_no_holder_and_expires_in_a_second() -> None:
    record = released(held_by("me"), NOW)
    spec = record.manifest("l", "ns")["spec"]
    assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1
    assert LeaseRecord.of(record.manifest("l", "ns")).holder is None


def test_a_leader_steps_down_at_the_renew_deadline_and_not_before() -> None:
    assert not must_step_down(100.0, 109.9, SETTINGS)
    assert must_step_down(100.0, 110.0, SETTINGS)


def test_a_record_is_the_same_only_when_holder_renewal_and_version_are() -> None:
    assert held_by("x").same_as(held_by("x"))
    assert not held_by("x").same_as(held_by("x", version="8"))
    assert not held_by("x").same_as(None)


# -- the elector ---------------------------------------------------------------------------


class LeaseStore(FakeKube):
    """One Lease with optimistic concurrency, the way the API server keeps it."""

    def __init__(self) -> None:
        super().__init__()
        self.body: dict[str, Any] | None = None
        self.version = 0
        self.down = False
        self.namespace_exists = True
        self.reads = 0  # how many times a candidate looked at the Lease

    def _check(self) -> None:
        if self.down:
            raise KubeError(503, "unavailable")

    async def get(self, resource: Resource, namespace: str | None, name: str) -> Any:
        self.reads += 1
        self._check()
        return copy.deepcopy(self.body)

    def _store(self, manifest: Any) -> Any:
        self.version += 1
        self.body = copy.deepcopy(dict(manifest))
        self.body["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.body)

    async def create(self, resource: Resource, manifest: Mapping[str, Any]) -> Any:
        self._check()
        if not self.namespace_exists:
            raise KubeError(404, "namespaces not found")
        if self.body is not None:
            raise KubeError(409, "already exists")
        return self._store(manifest)

    async def replace(self, resource: Resource, manifest: Mapping[str, Any]) -> Any:
        self._check()
        assert self.body is not None
        if manifest["metadata"].get("resourceVersion") != self.body["metadata"]["resourceVersion"]:
            raise KubeError(409, "the object has been modified")
        return self._store(manifest)

    @property
    def holder(self) -> str | None:
        return LeaseRecord.of(self.body).holder if self.body else None


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _holder_is(store: LeaseStore, holder: str | None) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return store.holder == holder

    return check


def elector(store: LeaseStore, identity: str, clock: Clock, seen: list[bool]) -> Elector:
    return Elector(
        store,
        SETTINGS,
        identity,
        on_change=seen.append,
        wall=lambda: NOW,
        monotonic=clock,
    )


async def test_two_candidates_elect_exactly_one_and_the_other_takes_over_after_expiry() -> None:
    store, clock = LeaseStore(), Clock()
    a_seen: list[bool] = []
    b_seen: list[bool] = []
    a, b = elector(store, "a", clock, a_seen), elector(store, "b", clock, b_seen)
    assert await a._round() is True
    assert await b._round() is False and store.holder == "a"
    clock.t += 14
    assert await b._round() is False, "b first saw the record 14 s ago: not yet expired"
    clock.t += 1
    assert await b._round() is True and store.holder == "b"
    assert LeaseRecord.of(store.body or {}).transitions == 1
    # a comes back: its write is stale, it sees b's record and is no longer the leader.
    assert await a._round() is False and a.leading is False
    assert a_seen == [True, False] and b_seen == [True]


async def test_a_renewal_resets_the_followers_expiry_clock() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = elector(store, "a", clock, []), elector(store, "b", clock, [])
    await a._round()
    await b._round()
    clock.t += 10
    await a._round()  # renewed: a new record
    clock.t += 10
    assert await b._round() is False, "only 10 s since the renewal b saw"


async def test_a_leader_that_cannot_renew_steps_down_at_the_deadline() -> None:
    store, clock = LeaseStore(), Clock()
    seen: list[bool] = []
    a = elector(store, "a", clock, seen)
    assert await a._round()
    store.down = True

    async def advance() -> None:
        while True:
            await asyncio.sleep(0.005)
            clock.t += 1

    ticking = asyncio.create_task(advance())
    try:
        await asyncio.wait_for(a.hold(), timeout=5)
    finally:
        ticking.cancel()
    assert clock.t - 1000.0 >= SETTINGS.renew_deadline_seconds
    assert seen == [True, False]


async def test_a_missing_lease_namespace_is_an_error_that_says_how_to_fix_it() -> None:
    store = LeaseStore()
    store.namespace_exists = False
    with pytest.raises(ElectionError, match="kubectl create namespace mcp-operator-system"):
        await elector(store, "a", Clock(), [])._round()


async def test_lead_runs_the_operator_only_once_elected_and_releases_on_stop() -> None:
    store, clock = LeaseStore(), Clock()
    other = elector(store, "other", clock, [])
    await other._round()
    me = elector(store, "me", clock, [])
    started = asyncio.Event()

    async def operate(operator_stop: asyncio.Event, _quiesced: asyncio.Event) -> None:
        started.set()
        await operator_stop.wait()

    stop = asyncio.Event()
    looked = store.reads
    leading = asyncio.create_task(lead(me, operate, stop))

    # Three looks at the other's Lease: a follower that took it wrongly would have started
    # the operator by its second, and one that is slow to look at all (no round within 2 s)
    # fails this wait, where a fixed sleep would have let the negative pass unseen.
    async def followed() -> bool:
        return store.reads >= looked + 3

    await eventually_async("the follower's third look at the Lease", followed, 2, interval=0.01)
    assert not started.is_set(), "a follower must not run the operator"
    await other.release()
    await asyncio.wait_for(started.wait(), timeout=2)
    assert store.holder == "me"
    stop.set()
    assert await asyncio.wait_for(leading, timeout=2) is True
    assert store.holder is None, "a clean stop releases the Lease"


async def test_lead_stops_the_operator_and_reports_a_lost_leadership() -> None:
    store, clock = LeaseStore(), Clock()
    me = elector(store, "me", clock, [])
    stopped = asyncio.Event()

    async def operate(operator_stop: asyncio.Event, _quiesced: asyncio.Event) -> None:
        await operator_stop.wait()
        stopped.set()

    leading = asyncio.create_task(lead(me, operate, asyncio.Event()))
    await eventually_async("me elected", _holder_is(store, "me"), 2, interval=0.01)
    # Somebody else writes the Lease (as after a long pause of ours).
    store._store(LeaseRecord("thief", 15, "a", "r", 1).manifest("mcp-operator", "ns"))
    assert await asyncio.wait_for(leading, timeout=2) is False
    assert stopped.is_set() and store.holder == "thief", "a lost Lease is not released"


async def test_lead_releases_the_lease_once_the_operator_quiesced_not_when_it_returns() -> None:
    store, clock = LeaseStore(), Clock()
    me = elector(store, "me", clock, [])
    winding_down = asyncio.Event()
    finish = asyncio.Event()

    got_stop = asyncio.Event()

    async def operate(operator_stop: asyncio.Event, quiesced: asyncio.Event) -> None:
        await operator_stop.wait()
        got_stop.set()
        await winding_down.wait()  # reconciles still stopping: the Lease must stay ours
        quiesced.set()
        await finish.wait()  # a slow end of the process after that (kopf's stray tasks)

    stop = asyncio.Event()
    leading = asyncio.create_task(lead(me, operate, stop))
    await eventually_async("me elected", _holder_is(store, "me"), 2, interval=0.01)
    stop.set()
    await asyncio.wait_for(got_stop.wait(), timeout=2)
    written = store.version

    # Two renewals while the operator winds down (or a write that gave the Lease away): a
    # release on ``stop`` would have come before the first, and an elector that stopped
    # renewing fails this wait instead of passing the negative below unseen.
    async def renewed_twice_or_released() -> bool:
        return store.version >= written + 2 or store.holder != "me"

    await eventually_async("two renewals", renewed_twice_or_released, 2, interval=0.01)
    assert store.holder == "me", "released while the operator may still write"
    winding_down.set()
    await eventually_async("the release", _holder_is(store, None), 2, interval=0.01)
    assert store.holder is None, "not released once the operator quiesced"
    assert not leading.done(), "lead waits for the operator to return"
    finish.set()
    assert await asyncio.wait_for(leading, timeout=2) is True


async def test_lead_releases_when_the_operator_quiesces_on_a_signal_of_its_own() -> None:
    store, clock = LeaseStore(), Clock()
    me = elector(store, "me", clock, [])
    finish = asyncio.Event()

    async def operate(_operator_stop: asyncio.Event, quiesced: asyncio.Event) -> None:
        await asyncio.sleep(0.05)  # kopf got SIGTERM itself: ``stop`` is never set
        quiesced.set()
        await finish.wait()

    leading = asyncio.create_task(lead(me, operate, asyncio.Event()))

    async def released_after_leading() -> bool:
        return store.body is not None and store.holder is None

    await eventually_async("the release", released_after_leading, 2, interval=0.01)
    assert store.body is not None and store.holder is None
    finish.set()
    assert await asyncio.wait_for(leading, timeout=2) is True
