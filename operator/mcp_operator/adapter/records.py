"""The records that the router and the session table share, and the sinks they point at.

Owns the shapes only: the adapter's legacy HTTP ``Session`` (the one session table's
``serve.sessions.LegacySession`` with what routing needs), a ``PendingCall`` (a request
forwarded to the child and not answered yet), a 2026-07-28 request's ``Envelope`` (what its
caller said of itself, which the fronts read and the call carries), and the sink protocol
the HTTP side implements for one call's answer (a session's stream is
``serve.sessions.StreamSink``).
Leaves the bookkeeping of sessions to ``serve.sessions`` and the routing of calls to
``router``; both import from here, neither from the other for these types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from mcp_operator.serve.jsonrpc import RequestId
from mcp_operator.serve.sessions import LegacySession, StreamSink

__all__ = ["CallSink", "PendingCall", "Session", "StreamSink"]


class CallSink(Protocol):
    """Where one call's answer (and what the child says about it meanwhile) goes."""

    def respond(self, message: dict[str, Any]) -> None:
        """The final response (or error), already carrying the caller's id."""
        ...

    def related(self, message: dict[str, Any]) -> bool:
        """Progress or a server request tied to the call; False if it cannot be carried."""
        ...

    def ask(self, message: dict[str, Any]) -> bool:
        """A server→client request for a 2026-07-28 caller, answered through input-required
        rounds; False if this sink has no such caller."""
        ...


@dataclass(eq=False, slots=True, kw_only=True)
class Session(LegacySession):
    """One legacy HTTP session of the adapter."""

    declared: frozenset[str]
    """The client capabilities routing needs to know of (``sessions.declared_capabilities``):
    names such as ``sampling`` or ``elicitation.url``; the client's own objects are not kept."""
    calls: dict[RequestId, PendingCall] = field(default_factory=dict)
    """Calls in flight, by the id the client gave them."""
    subscriptions: set[str] = field(default_factory=set)
    """Resource URIs this session subscribed to (``resources/subscribe``)."""
    server_requests: dict[int, RequestId] = field(default_factory=dict)
    """Server→client requests routed here: the id this session saw → the child's id."""
    next_server_request_id: int = 0
    log_level: str | None = None
    """The level this session's client set with ``logging/setLevel`` (None: never set)."""

    def in_call(self) -> bool:
        """A request being served or a call in flight: never evicted, never idle."""
        return self.open_requests > 0 or bool(self.calls)

    def can(self, capability: str) -> bool:
        """Whether the client declared ``capability`` (sampling, elicitation, roots)."""
        return capability in self.declared


@dataclass(frozen=True, slots=True)
class Envelope:
    """What a 2026-07-28 request says about its caller beyond the call itself."""

    capabilities: frozenset[str]
    """The routed capability names the caller declared (``sessions.declared_capabilities``)."""
    log_level: str | None = None
    answers: dict[str, Any] = field(default_factory=dict)
    """``inputResponses`` sent with the request, by key."""
    target: str | None = None
    """What the request is about (``rounds.request_target``); a retry must name the same."""


@dataclass(eq=False, slots=True)
class PendingCall:
    """A request forwarded to the child and not answered yet."""

    child_id: int
    client_id: RequestId
    method: str
    session: Session | None
    sink: CallSink
    progress_token: RequestId | None
    """The caller's own progress token (None: the caller asked for no progress)."""
    capabilities: frozenset[str] | None = None
    """A 2026-07-28 caller's declared client capability names (None: a legacy or internal
    call); see ``sessions.declared_capabilities``."""
    log_level: str | None = None
    """A 2026-07-28 caller's per-request log level opt-in (None: no log messages)."""
