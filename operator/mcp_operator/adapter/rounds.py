"""Input-required rounds of the 2026-07-28 era: the state a legacy child's call keeps between them.

When a legacy child asks a 2026-07-28 caller something mid-call (sampling,
elicitation, roots), the call cannot wait on an open stream: the caller gets a
result with ``resultType: "input_required"``, the ``inputRequests`` and an
opaque ``requestState``, and retries the request with ``inputResponses``. The
child's call stays open meanwhile, waiting for its answers. This module owns
that waiting state, pure (no I/O; callers pass ``now``):

- **what was asked** (``Ask``): the key the caller sees, the child's request
  id, the method and the params shown to the caller;
- **the parked calls** (``RoundStore``), by ``requestState``: a random,
  unguessable token that names state held here (the token carries no data,
  so there is nothing to tamper with: an altered or invented token names
  nothing and is refused). A token is bound to the request it was issued for
  (method and target); it is used once; each round issues a new one.
- **the bounds**: at most ``max_parked`` calls wait (the oldest is evicted
  first), each for at most ``ttl`` seconds; the caller of ``park``/``take``/
  ``expire`` cancels what falls out at the child.

Leaves the HTTP answers and the writing of the answers to the child to
``front_rounds``; the state lives in this process only (see docs/adapter.md
for several replicas).
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Final

from mcp_operator.adapter.records import PendingCall
from mcp_operator.serve.jsonrpc import RequestId

INPUT_KEY_META: Final = "mcp-operator.dev/inputKey"
"""Where a child may name the key of its request in ``inputRequests`` (``params._meta``)."""
_CHILD_ONLY_META: Final = frozenset({INPUT_KEY_META, "progressToken"})


@dataclass(frozen=True, slots=True)
class Ask:
    """One server→client request of the child, as a 2026-07-28 caller sees it."""

    key: str
    child_id: RequestId
    method: str
    params: dict[str, Any]

    def as_input_request(self) -> dict[str, Any]:
        return {"method": self.method, "params": self.params}


def ask_from_child(message: dict[str, Any]) -> Ask:
    """The ``Ask`` for a child's request: its key from ``_meta`` (else from its id), the
    params without the keys meant for the adapter."""
    child_id: RequestId = message["id"]
    raw = message.get("params")
    params: dict[str, Any] = dict(raw) if isinstance(raw, dict) else {}
    meta = params.get("_meta")
    key = f"request-{child_id}"
    if isinstance(meta, dict):
        named = meta.get(INPUT_KEY_META)
        if isinstance(named, str) and 0 < len(named) <= 128:
            key = named
        kept = {k: v for k, v in meta.items() if k not in _CHILD_ONLY_META}
        if kept:
            params["_meta"] = kept
        else:
            del params["_meta"]
    return Ask(key, child_id, str(message.get("method")), params)


@dataclass(eq=False, slots=True)
class ParkedCall:
    """A child's call waiting for its caller's next retry."""

    call: PendingCall
    method: str
    target: str | None
    """What the request was about (tool or prompt name, resource URI): a retry must match."""
    asked: dict[str, Ask]
    """What the caller has been asked and has not answered yet, by key."""
    expires: float
    owner: Any = field(default=None)
    """The HTTP side's handle of the call, kept across rounds (``front_rounds.RoundOfCall``)."""


def request_target(method: str, params: Any) -> str | None:
    """The part of a request that a retry must repeat: the tool or prompt name, or the URI."""
    if not isinstance(params, dict):
        return None
    value = params.get("uri" if method == "resources/read" else "name")
    return value if isinstance(value, str) else None


class RoundStore:
    """Parked calls by ``requestState``, bounded in count and time."""

    def __init__(self, *, max_parked: int, ttl: float) -> None:
        self._parked: OrderedDict[str, ParkedCall] = OrderedDict()
        self._max = max_parked
        self._ttl = ttl

    def __len__(self) -> int:
        return len(self._parked)

    def park(self, parked: ParkedCall, now: float) -> tuple[str, list[ParkedCall]]:
        """Keep ``parked`` until ``now + ttl``; its token, and what was evicted to make room."""
        dropped = self.expire(now)
        while len(self._parked) >= self._max:
            _token, oldest = self._parked.popitem(last=False)
            dropped.append(oldest)
        token = secrets.token_urlsafe(24)
        parked.expires = now + self._ttl
        self._parked[token] = parked
        return token, dropped

    def take(
        self, token: str, method: str, target: str | None, now: float
    ) -> tuple[ParkedCall | None, list[ParkedCall]]:
        """The call parked under ``token`` for this request, removed; None when the token is
        unknown, expired, or was issued for another request. Also returns what expired."""
        dropped = self.expire(now)
        parked = self._parked.get(token)
        if parked is None or parked.method != method or parked.target != target:
            return None, dropped
        del self._parked[token]
        return parked, dropped

    def expire(self, now: float) -> list[ParkedCall]:
        """Drop every parked call whose time is up; returns them."""
        expired = [token for token, parked in self._parked.items() if parked.expires <= now]
        return [self._parked.pop(token) for token in expired]

    def clear(self) -> list[ParkedCall]:
        """Drop everything (the child restarted, or shutdown)."""
        parked = list(self._parked.values())
        self._parked.clear()
        return parked
