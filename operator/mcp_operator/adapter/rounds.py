"""Input-required rounds of the 2026-07-28 era: the state a legacy child's call keeps between them.

When a legacy child asks a 2026-07-28 caller something mid-call (sampling,
elicitation, roots), the call cannot wait on an open stream: the caller gets a
result with ``resultType: "input_required"``, the ``inputRequests`` and an
opaque ``requestState``, and retries the request with ``inputResponses``. The
child's call stays open meanwhile, waiting for its answers. This module owns
that waiting state, pure (no I/O; callers pass ``now``):

- **what was asked** (``Ask``): the key the caller sees, the child's request
  id, the method and the params shown to the caller;
- **the parked call** (``ParkedCall``), kept in the one store of parked calls
  (``serve.rounds.RoundStore``, shared with the bridge: tokens, bounds); the
  caller of ``park``/``take``/``expire`` cancels what falls out at the child.

Leaves the HTTP answers and the writing of the answers to the child to
``front_rounds``; the state lives in this process only (see docs/adapter.md
for several replicas).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from mcp_operator.adapter.records import PendingCall
from mcp_operator.serve.jsonrpc import RequestId
from mcp_operator.serve.rounds import RoundStore, request_target

__all__ = ["Ask", "ParkedCall", "RoundStore", "ask_from_child", "request_target"]

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
