"""Which call caused what the child says: the attribution rule for server→client messages.

Owns one decision, pure (no I/O, no clock): given a message the child sent
on its own (a sampling, elicitation or roots request; a log message) and the
calls in flight, which call it belongs to, or that it belongs to none. The
stdio wire does not say which request a server-initiated message is about,
so the rule uses only what is certain:

1. **The call's token.** Every request that may cause server requests
   (``CAUSING_METHODS``) reaches the child with a progress token that the
   adapter chose (the child's id of the call). A message whose
   ``params._meta.progressToken`` names a call in flight belongs to it. A
   token that names no call in flight (the call ended) belongs to none.
2. **The only call open.** A message without a token belongs to the one
   call in flight that may cause it, when there is exactly one.
3. **Otherwise nobody.** With two or more such calls open and no token, the
   message is not attributed: the router refuses the request to the child
   (or drops the notification) rather than guess. A guess is how one
   tenant's prompt reached another.

Leaves what happens to an attributed message (delivery in the caller's own
era, capability checks) to the router.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from mcp_operator.adapter.records import PendingCall

CAUSING_METHODS: Final = frozenset(
    {"tools/call", "prompts/get", "resources/read", "completion/complete"}
)
"""Client requests during which a server may ask the client something or log about it."""


def carried_token(message: Mapping[str, Any]) -> Any:
    """The ``params._meta.progressToken`` of a message from the child, or None."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta.get("progressToken") if isinstance(meta, dict) else None


def attribute(
    message: Mapping[str, Any],
    by_token: Mapping[int, PendingCall],
    in_flight: Iterable[PendingCall],
) -> PendingCall | None:
    """The call ``message`` belongs to, or None when the rule cannot tell.

    ``by_token`` maps the tokens the adapter gave the child to their calls;
    ``in_flight`` is every call the child has not answered yet.
    """
    token = carried_token(message)
    if token is not None:
        return by_token.get(token) if isinstance(token, int) else None
    candidate: PendingCall | None = None
    for call in in_flight:
        if call.method not in CAUSING_METHODS:
            continue
        if candidate is not None:
            return None
        candidate = call
    return candidate
