"""Which call caused what the child says: the attribution rule for server→client messages.

Owns one decision, pure (no I/O, no clock): given a message the child sent
on its own (a sampling, elicitation or roots request; a log message), the
calls in flight and the legacy sessions, which call it belongs to, or that it
belongs to none. The stdio wire does not say which request a server-initiated
message is about, so the rule uses only what is certain:

1. **The call's token.** Every request that may cause server requests
   (``CAUSING_METHODS``) reaches the child with a progress token that the
   adapter chose (the child's id of the call). A message whose
   ``params._meta.progressToken`` names a call in flight belongs to it. A
   token that names no call in flight (the call ended) belongs to none.
2. **The only session there is.** A message without a token of ours belongs
   to a call only when exactly one legacy session exists, that session has a
   call open that may cause it, and no other caller (a 2026-07-28 request)
   has any call in flight: then nobody else can have caused it. It goes to
   that session's oldest such call.
3. **The sole caller.** A child that serves one caller alone (``--child-per-session``)
   has nobody else's calls: a message without a token belongs to its oldest call open
   that may cause it, whatever the session (legacy) or none (2026-07-28).
4. **Otherwise nobody.** The message is not attributed: the router refuses the
   request to the child (or drops and counts the log message) rather than
   guess. "The only call open" was a guess: with one call of session B open,
   session A's late log and A's sampling prompt reached B.

Leaves what happens to an attributed message (delivery in the caller's own
era, capability checks) to the router.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final, Protocol

from mcp_operator.adapter.records import PendingCall, Session

CAUSING_METHODS: Final = frozenset(
    {"tools/call", "prompts/get", "resources/read", "completion/complete"}
)
"""Client requests during which a server may ask the client something or log about it."""


class Sessions(Protocol):
    """Every legacy session there is: counted, and read when there is one."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Session]: ...


def carried_token(message: Mapping[str, Any]) -> Any:
    """The ``params._meta.progressToken`` of a message from the child, or None."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta.get("progressToken") if isinstance(meta, dict) else None


def attribute(
    message: Mapping[str, Any],
    by_token: Mapping[int, PendingCall],
    in_flight: Iterable[PendingCall],
    sessions: Sessions,
    *,
    sole_caller: bool = False,
) -> PendingCall | None:
    """The call ``message`` belongs to, or None when the rule cannot tell.

    ``by_token`` maps the tokens the adapter gave the child to their calls;
    ``in_flight`` is every call the child has not answered yet, oldest first;
    ``sessions`` every legacy session there is; ``sole_caller``: the child serves one
    caller alone.
    """
    token = carried_token(message)
    if token is not None:
        return by_token.get(token) if isinstance(token, int) else None
    if sole_caller:
        return next((call for call in in_flight if call.method in CAUSING_METHODS), None)
    if len(sessions) != 1:
        return None
    only = next(iter(sessions))
    candidate: PendingCall | None = None
    for call in in_flight:
        if call.session is not only:
            return None  # someone else has a call open: it may be theirs
        if candidate is None and call.method in CAUSING_METHODS:
            candidate = call
    return candidate
