"""The pool of ``--child-per-session``: bounds, fairness and expiry on virtual time."""

from __future__ import annotations

import argparse

import pytest

from mcp_operator.adapter import config as adapter_config
from mcp_operator.adapter.front_pool import pool_caller
from mcp_operator.adapter.pool import CALLER_KEY, SESSION_KEY, ChildPool, PoolFullError


def ready(pool: ChildPool, caller: str, key: str, now: float = 0.0) -> None:
    slot, dropped = pool.reserve(caller, now)
    assert dropped == []
    pool.bind(slot, key, now)


def test_a_full_pool_of_busy_children_refuses_and_keeps_the_ones_it_has() -> None:
    pool = ChildPool(max_children=2, idle_seconds=60)
    first, _ = pool.reserve("a", 0)
    second, _ = pool.reserve("b", 0)  # both still spawning: busy
    with pytest.raises(PoolFullError):
        pool.reserve("c", 0)
    assert len(pool) == 2 and not first.closed and not second.closed
    assert not pool.can_admit()


def test_a_flooding_caller_makes_room_only_among_its_own_idle_children() -> None:
    pool = ChildPool(max_children=4, idle_seconds=600)
    ready(pool, "victim", SESSION_KEY + "v1", now=0)
    for index in range(3):
        ready(pool, "flood", SESSION_KEY + f"f{index}", now=1 + index)
    slot, dropped = pool.reserve("flood", 10)  # at its share: its own oldest idle child goes
    assert [old.key for old in dropped] == [SESSION_KEY + "f0"]
    assert pool.get(SESSION_KEY + "f0", 10) is None
    assert pool.get(SESSION_KEY + "v1", 10) is not None
    pool.bind(slot, SESSION_KEY + "f3", 10)


def test_a_caller_under_its_share_takes_an_idle_child_of_the_caller_over_it() -> None:
    pool = ChildPool(max_children=4, idle_seconds=600)
    for index in range(4):
        ready(pool, "flood", SESSION_KEY + f"f{index}", now=index)
    _slot, dropped = pool.reserve("newcomer", 10)
    assert [old.key for old in dropped] == [SESSION_KEY + "f0"]


def test_a_child_serving_a_request_is_never_evicted() -> None:
    pool = ChildPool(max_children=2, idle_seconds=600)
    ready(pool, "a", CALLER_KEY + "a1", now=0)
    ready(pool, "a", CALLER_KEY + "a2", now=1)
    for key in ("a1", "a2"):
        busy = pool.get(CALLER_KEY + key, 2)
        assert busy is not None
        busy.open_requests += 1
    with pytest.raises(PoolFullError):
        pool.reserve("b", 3)
    older = pool.get(CALLER_KEY + "a1", 4)
    assert older is not None
    older.open_requests -= 1  # its request ended: idle now, and the oldest of a's
    _slot, dropped = pool.reserve("b", 5)
    assert dropped == [older] and older.closed


def test_idle_children_expire_and_busy_ones_do_not() -> None:
    pool = ChildPool(max_children=4, idle_seconds=30)
    ready(pool, "a", SESSION_KEY + "idle", now=0)
    ready(pool, "b", SESSION_KEY + "busy", now=0)
    busy = pool.get(SESSION_KEY + "busy", 0)
    assert busy is not None
    busy.open_requests = 1  # e.g. its GET stream is open
    assert pool.expire(20) == []
    expired = pool.expire(31)
    assert [slot.key for slot in expired] == [SESSION_KEY + "idle"]
    assert pool.get(SESSION_KEY + "idle", 31) is None and len(pool) == 1


def test_a_released_slot_is_gone_and_its_key_routes_nowhere() -> None:
    pool = ChildPool(max_children=2, idle_seconds=30)
    ready(pool, "a", SESSION_KEY + "s")
    slot = pool.get(SESSION_KEY + "s", 1)
    assert slot is not None
    pool.release(slot)
    assert pool.get(SESSION_KEY + "s", 1) is None and len(pool) == 0
    assert pool.clear() == []


def parse(*argv: str, environ: dict[str, str] | None = None) -> adapter_config.AdapterConfig:
    parser = argparse.ArgumentParser()
    adapter_config.add_arguments(parser)
    return adapter_config.from_args(parser.parse_args([*argv, "--", "srv"]), environ or {})


def test_the_pool_flags_and_their_environment_variables() -> None:
    config = parse("--child-per-session", "--max-children", "5", "--spawn-timeout-seconds", "2")
    assert config.child_per_session and config.max_children == 5
    assert config.spawn_timeout_seconds == 2.0 and config.child_idle_seconds == 300.0
    assert parse(environ={"MCP_ADAPTER_CHILD_PER_SESSION": "1"}).child_per_session
    assert not parse().child_per_session
    with pytest.raises(ValueError, match="--max-children must be positive"):
        parse("--child-per-session", "--max-children", "0")
    with pytest.raises(ValueError, match="not --sse"):
        parse("--child-per-session", "--sse")


def test_a_2026_callers_key_is_the_caller_key_refined_by_the_caller_header() -> None:
    def address(scope: object, headers: object) -> str:
        return "10.0.0.7"

    plain = {"headers": [(b"host", b"x")]}
    named = {"headers": [(b"mcp-operator-caller", b"alice")]}
    long = {"headers": [(b"mcp-operator-caller", b"a" * 1000)]}
    assert pool_caller(address, plain, {}) == "10.0.0.7"
    assert pool_caller(address, named, {}) == "10.0.0.7|alice"
    assert pool_caller(address, long, {}) == "10.0.0.7|" + "a" * 128
    # the header refines the key, it never replaces it: another address is another caller
    assert pool_caller(lambda s, h: "10.0.0.8", named, {}) != pool_caller(address, named, {})
