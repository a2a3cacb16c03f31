"""The records that the router and the session table share, and the sinks they point at.

Owns the shapes only: a legacy HTTP ``Session``, a ``PendingCall`` (a request
forwarded to the child and not answered yet), and the two sink protocols
the HTTP side implements (where one call's answer goes; where a session's
stream goes). Leaves the bookkeeping of sessions to ``sessions`` and the
routing of calls to ``router``; both import from here, neither from the other
for these types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from mcp_operator.serve.jsonrpc import RequestId


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


class StreamSink(Protocol):
    """Where messages for a session go outside any one call: its GET (or legacy SSE) stream."""

    def push(self, message: dict[str, Any]) -> bool:
        """Queue ``message``; False when the stream is closed or full (the message is dropped)."""
        ...

    def close(self) -> None:
        """End the stream (the session ended or the child restarted)."""
        ...


@dataclass(eq=False, slots=True)
class Session:
    """One legacy HTTP session."""

    id: str
    protocol_version: str
    declared: frozenset[str]
    """The client capabilities routing needs to know of (``sessions.declared_capabilities``):
    names such as ``sampling`` or ``elicitation.url``; the client's own objects are not kept."""
    last_active: float
    stream: StreamSink | None = None
    calls: dict[RequestId, PendingCall] = field(default_factory=dict)
    """Calls in flight, by the id the client gave them."""
    subscriptions: set[str] = field(default_factory=set)
    """Resource URIs this session subscribed to (``resources/subscribe``)."""
    server_requests: dict[int, RequestId] = field(default_factory=dict)
    """Server→client requests routed here: the id this session saw → the child's id."""
    next_server_request_id: int = 0
    open_requests: int = 0
    """HTTP requests being served for this session right now (keeps it from idling out)."""
    closed: bool = False
    log_level: str | None = None
    """The level this session's client set with ``logging/setLevel`` (None: never set)."""

    def can(self, capability: str) -> bool:
        """Whether the client declared ``capability`` (sampling, elicitation, roots)."""
        return capability in self.declared


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
