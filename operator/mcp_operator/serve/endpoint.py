"""The MCP endpoint's routing: Host/Origin first, then the era, then the HTTP method.

Owns the one rule by which a request to an MCP endpoint reaches its handler, the same
for the adapter and the bridge (and the legacy GET stream of a session, which both serve
alike): a refused Host or Origin is answered here (421/403), then a caller the
endpoint's ``gate`` refuses (401/403, ``serve.auth``);
a request whose ``MCP-Protocol-Version`` names the stateless 2026-07-28 era goes to the
stateless handler whatever its method; the rest is the legacy session protocol, by
method (POST, GET, DELETE; anything else 405), a POST naming its caller (the key the
session table counts sessions by, ``serve.sessions.CallerKey``): :class:`McpEndpoint`, made
once per program with its handlers. Leaves what each handler
answers to the program that serves the endpoint.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from mcp_operator.serve.asgi import (
    ClientGoneError,
    Receive,
    Scope,
    Send,
    request_headers,
    respond_plain,
    send_more,
    watching_disconnect,
)
from mcp_operator.serve.auth.gate import AuthGate
from mcp_operator.serve.era import is_modern
from mcp_operator.serve.events import (
    BadEventId,
    EventStore,
    ReplayGone,
    ResumableStream,
    StreamLog,
    parse_event_id,
    replay_refusal,
)
from mcp_operator.serve.hosts import HostPolicy
from mcp_operator.serve.jsonrpc import read_json
from mcp_operator.serve.sessions import CallerKey, client_address
from mcp_operator.serve.sse import (
    KEEPALIVE_FRAME,
    KEEPALIVE_SECONDS,
    SSE_HEADERS,
    SseStream,
    pump,
)

Headers = dict[bytes, str]
StatelessHandler = Callable[[Scope, Headers, Receive, Send], Awaitable[None]]


class SessionHandlers(Protocol):
    """The legacy session protocol's three methods."""

    async def post(self, headers: Headers, receive: Receive, send: Send, caller: str) -> None:
        """A POST from ``caller`` (the key its sessions are counted by)."""
        ...

    async def get(self, headers: Headers, receive: Receive, send: Send) -> None: ...

    async def delete(self, headers: Headers, send: Send) -> None: ...


@dataclass(frozen=True, slots=True)
class McpEndpoint:
    """One MCP endpoint's routing, configured once by the program that serves it: who may
    ask (``policy``), who answers each era, and whom a legacy POST counts a session for."""

    policy: HostPolicy
    stateless: StatelessHandler
    sessions: SessionHandlers
    caller_key: CallerKey = client_address
    gate: AuthGate | None = None
    """Who may call (``serve.auth.gate``); None when authentication is off."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request to the MCP endpoint through the handler it is for."""
        headers = request_headers(scope)
        if await self.policy.refused(headers, send):
            return
        if self.gate is not None and await self.gate.admit(scope, headers, send) is None:
            return
        method = scope["method"]
        if is_modern(headers.get(b"mcp-protocol-version")):
            await self.stateless(scope, headers, receive, send)
        elif method == "POST":
            await self.sessions.post(headers, receive, send, self.caller_key(scope, headers))
        elif method == "GET":
            await self.sessions.get(headers, receive, send)
        elif method == "DELETE":
            await self.sessions.delete(headers, send)
        else:
            allow = [(b"allow", b"GET, POST, DELETE")]
            await respond_plain(send, 405, b"Method Not Allowed", allow)


async def stateless_body(
    scope: Scope, headers: Headers, receive: Receive, send: Send, limit: int
) -> tuple[bool, Any]:
    """The decoded body of a 2026-07-28 request, or (False, None) after answering 405 (not a
    POST), 406 (JSON not accepted) or what reading the body refused (413, 415, 400)."""
    if scope["method"] != "POST":
        await respond_plain(send, 405, b"Method Not Allowed", [(b"allow", b"POST")])
        return False, None
    accept = headers.get(b"accept", "*/*")
    if "application/json" not in accept and "*/*" not in accept:
        await respond_plain(send, 406, b"Accept must include application/json")
        return False, None
    return await read_json(headers, receive, send, limit)


class StreamingSession(Protocol):
    """A legacy session as its GET stream needs it."""

    stream: Any
    """The session's open GET stream, if any (one at a time)."""
    last_active: float


async def session_stream(
    headers: Headers,
    receive: Receive,
    send: Send,
    *,
    lookup: Callable[[str, float], StreamingSession | None],
    queue_limit: int,
    events: EventStore | None = None,
) -> None:
    """Serve a legacy session's GET stream until the client or the session ends it.

    406 without ``Accept: text/event-stream``, 400 without ``Mcp-Session-Id``, 404 for an
    unknown session, 409 when the session has a stream already. With ``events`` the
    stream is resumable (``serve.events``): its events carry ids, and a GET with
    ``Last-Event-ID`` resumes the stream that id names (``resumed_stream``).
    """
    if "text/event-stream" not in headers.get(b"accept", ""):
        await respond_plain(send, 406, b"Accept must include text/event-stream")
        return
    session_id = headers.get(b"mcp-session-id")
    if session_id is None:
        await respond_plain(send, 400, b"Missing Mcp-Session-Id header")
        return
    session = lookup(session_id, time.monotonic())
    if session is None:
        await respond_plain(send, 404, b"Session not found")
        return
    last_event_id = headers.get(b"last-event-id")
    if events is not None and last_event_id is not None:
        await resumed_stream(last_event_id, session, session_id, receive, send, events, queue_limit)
        return
    if session.stream is not None:
        await respond_plain(send, 409, b"Only one GET stream per session")
        return
    priming = b""
    if events is not None:
        log, priming = events.open(session_id, time.monotonic(), standalone=True)
        stream: SseStream = ResumableStream(queue_limit, events, log, time.monotonic)
    else:
        stream = SseStream(queue_limit)
    session.stream = stream
    try:
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        if priming:
            stream.push_raw(priming)
        await pump(stream, receive, send)
    finally:
        if session.stream is stream:
            session.stream = None
        session.last_active = time.monotonic()


async def resumed_stream(
    last_event_id: str,
    session: StreamingSession,
    session_id: str,
    receive: Receive,
    send: Send,
    events: EventStore,
    queue_limit: int,
) -> None:
    """A GET with ``Last-Event-ID``: the events the client missed on the stream that id
    names, then the rest of that stream: a call's until its answer; the session's GET
    stream as the session's stream again (an older connection of it is closed: the
    client's reconnect says it is dead). 400 for an id not of our form, 404 for one of
    a stream no longer kept or not this session's."""
    try:
        log, missed = events.resume(last_event_id, session_id, time.monotonic())
    except (BadEventId, ReplayGone) as error:
        status, text = replay_refusal(error)
        await respond_plain(send, status, text)
        return
    if log.standalone:
        if session.stream is not None:
            session.stream.close()
        stream = ResumableStream(queue_limit, events, log, time.monotonic)
        for _seq, data in missed:
            stream.push_raw(data)
        session.stream = stream
        try:
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            await pump(stream, receive, send)
        finally:
            if session.stream is stream:
                session.stream = None
            session.last_active = time.monotonic()
        return
    await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
    await tail(events, log, parse_event_id(last_event_id)[1], receive, send)
    session.last_active = time.monotonic()


async def tail(events: EventStore, log: StreamLog, seq: int, receive: Receive, send: Send) -> None:
    """Send ``log``'s events after ``seq``, then each new one, until it ends or the client
    goes."""
    gone = False

    def hang_up() -> None:
        nonlocal gone
        gone = True
        log.wake()

    pending = events.after(log, seq)
    with watching_disconnect(None, receive, hang_up):  # a stream: one task for its life
        try:
            while True:
                for number, data in pending:
                    await send_more(send, data)
                    seq = number
                if gone or (log.ended and not events.after(log, seq)):
                    break
                await log.sleep(KEEPALIVE_SECONDS)
                pending = events.after(log, seq)
                if not pending and not log.ended and not gone:
                    await send_more(send, KEEPALIVE_FRAME)
            await send({"type": "http.response.body", "body": b""})
        except (ClientGoneError, OSError):
            pass
