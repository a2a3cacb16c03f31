"""The bounded pool of children of ``--child-per-session``: which child serves which key.

Pure bookkeeping (no processes, no sockets, no clock: callers pass ``now``). A *slot* is
one child's place in the pool, held from the moment its spawn is reserved until the child
is reaped. A slot is reached by a key:

- ``session:<Mcp-Session-Id>``: a legacy session, bound once its ``initialize`` was
  answered by the slot's child;
- ``caller:<key>``: a 2026-07-28 caller (``front_pool`` says what the key is).

The bounds, the fairness among callers and the idle expiry are the one session table's
(``serve.sessions.SessionTable``): a slot is a ``LegacySession`` whose caller is the key
the table counts by, busy while it spawns or serves a request (then it is never evicted),
idle otherwise. A full pool makes room by the table's fair rule — a caller at its share
replaces its own least recently used idle child, a caller under it the least recently used
idle child of the caller most over its share — or refuses (``PoolFullError``: 503). Every
slot the pool drops is returned to the caller, who stops its child.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mcp_operator.serve.sessions import LegacySession, SessionLimitError, SessionTable

SESSION_KEY = "session:"
CALLER_KEY = "caller:"


class PoolFullError(SessionLimitError):
    """Every child's place is busy (or not this caller's to take): answer 503."""


@dataclass(eq=False, slots=True, kw_only=True)
class ChildSlot(LegacySession):
    """One child's place in the pool."""

    key: str = ""
    """The key that routes to this slot (empty until bound)."""
    child: Any = None
    """What runs there (``front_pool``'s child: its core and front), once spawned."""
    spawning: bool = True
    """The child is starting: the slot is busy and bound to no key yet."""

    def in_call(self) -> bool:
        return self.spawning or self.open_requests > 0


class ChildPool:
    """Slots by id (in the session table) and by the key that routes to them."""

    def __init__(self, *, max_children: int, idle_seconds: float) -> None:
        self._table: SessionTable[ChildSlot] = SessionTable(
            max_sessions=max_children, idle_seconds=idle_seconds
        )
        self._by_key: dict[str, ChildSlot] = {}

    @property
    def max_children(self) -> int:
        return self._table.max_sessions

    @property
    def evicted(self) -> int:
        """Idle children dropped to make room for new ones since start."""
        return self._table.evicted

    def __len__(self) -> int:
        return len(self._table)

    def __iter__(self) -> Iterator[ChildSlot]:
        return iter(self._table)

    def can_admit(self) -> bool:
        """Whether a new child could be spawned now without refusing."""
        return self._table.can_admit()

    def reserve(self, caller: str, now: float) -> tuple[ChildSlot, list[ChildSlot]]:
        """A new slot for ``caller`` (spawning), and the slots dropped to make room (stop their
        children). Raises PoolFullError when the fair rule finds no room."""

        def build(slot_id: str) -> ChildSlot:
            return ChildSlot(id=slot_id, protocol_version="", last_active=now)

        try:
            slot, dropped = self._table.create(build, caller=caller, now=now)
        except SessionLimitError as error:
            raise PoolFullError(str(error)) from None
        for old in dropped:
            self._unbind(old)
        return slot, dropped

    def bind(self, slot: ChildSlot, key: str, now: float) -> None:
        """The slot's child is running and serves ``key`` from now on."""
        slot.key = key
        slot.spawning = False
        slot.last_active = now
        self._by_key[key] = slot

    def get(self, key: str, now: float) -> ChildSlot | None:
        """The slot that serves ``key``, touched; None if there is none.

        Never drops a slot itself (its child must be stopped): idle ones go through
        :meth:`expire`.
        """
        slot = self._by_key.get(key)
        if slot is None or slot.closed:
            return None
        slot.last_active = now
        return slot

    def release(self, slot: ChildSlot) -> None:
        """Drop one slot (its session ended, its spawn failed, its child died)."""
        self._table.remove(slot.id)
        self._unbind(slot)

    def expire(self, now: float) -> list[ChildSlot]:
        """Drop the slots idle for longer than the idle limit; returns them."""
        expired = self._table.expire(now)
        for slot in expired:
            self._unbind(slot)
        return expired

    def clear(self) -> list[ChildSlot]:
        """Drop every slot (shutdown); returns them."""
        slots = self._table.clear()
        self._by_key.clear()
        return slots

    def _unbind(self, slot: ChildSlot) -> None:
        slot.closed = True
        if slot.key and self._by_key.get(slot.key) is slot:
            del self._by_key[slot.key]
