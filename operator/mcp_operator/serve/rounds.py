"""Input-required rounds of the 2026-07-28 era, as our servers keep them: parked calls by token.

When a call of a 2026-07-28 caller needs the caller's answer mid-call (sampling,
elicitation, roots: a legacy server behind the adapter or the bridge asked, or a
2026-07-28 server behind the bridge answered ``input_required``), the call cannot wait
on an open stream: the caller gets a result with ``resultType: "input_required"``, the
``inputRequests`` and an opaque ``requestState``, and retries the request with
``inputResponses``. The call stays open meanwhile. Shared by the adapter and the bridge,
this module owns the part of that which is the same for both, pure (no I/O; callers pass
``now``):

- **the parked calls** (``RoundStore``), by ``requestState``: a random, unguessable token
  that names state held here (the token carries no data, so there is nothing to tamper
  with: an altered or invented token names nothing and is refused). A token is bound to
  the request it was issued for (method and target, ``request_target``); it is used once;
  each round issues a new one;
- **the bounds**: at most ``max_parked`` calls wait (the oldest is evicted first), each for
  at most ``ttl`` seconds; the caller of ``park``/``take``/``expire`` ends what falls out;
- **the retry's answers** (``input_responses``): taken out of the params and checked in
  shape.

Leaves what a parked call is (the adapter's child call, the bridge's upstream call), the
HTTP answers and the delivery of the answers to the servers that use it.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from typing import Any, Generic, Protocol, TypeVar


class Parked(Protocol):
    """What the store needs of a parked call."""

    method: str
    target: str | None
    """What the request was about (tool or prompt name, resource URI): a retry must match."""
    expires: float


P = TypeVar("P", bound=Parked)


def request_target(method: str, params: Any) -> str | None:
    """The part of a request that a retry must repeat: the tool or prompt name, or the URI."""
    if not isinstance(params, dict):
        return None
    value = params.get("uri" if method == "resources/read" else "name")
    return value if isinstance(value, str) else None


def input_responses(params: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Take ``inputResponses`` out of ``params``: (valid, responses). Valid when absent, or an
    object whose values are objects (each a result for one question)."""
    if "inputResponses" not in params:
        return True, {}
    responses = params.pop("inputResponses")
    if not isinstance(responses, dict) or not all(isinstance(v, dict) for v in responses.values()):
        return False, {}
    return True, responses


class RoundStore(Generic[P]):
    """Parked calls by ``requestState``, bounded in count and time."""

    def __init__(self, *, max_parked: int, ttl: float) -> None:
        self._parked: OrderedDict[str, P] = OrderedDict()
        self._max = max_parked
        self._ttl = ttl

    def __len__(self) -> int:
        return len(self._parked)

    def park(self, parked: P, now: float) -> tuple[str, list[P]]:
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
    ) -> tuple[P | None, list[P]]:
        """The call parked under ``token`` for this request, removed; None when the token is
        unknown, expired, or was issued for another request. Also returns what expired."""
        dropped = self.expire(now)
        parked = self._parked.get(token)
        if parked is None or parked.method != method or parked.target != target:
            return None, dropped
        del self._parked[token]
        return parked, dropped

    def expire(self, now: float) -> list[P]:
        """Drop every parked call whose time is up; returns them."""
        expired = [token for token, parked in self._parked.items() if parked.expires <= now]
        return [self._parked.pop(token) for token in expired]

    def clear(self) -> list[P]:
        """Drop everything (the child restarted, or shutdown)."""
        parked = list(self._parked.values())
        self._parked.clear()
        return parked
