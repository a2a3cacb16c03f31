"""Answering one forwarded request over HTTP: JSON, or SSE once something streams first.

Owns a POSTed call's life after it has been accepted by an endpoint (legacy
session or 2026-07-28): the wait for the
answer within the request timeout, the choice between ``application/json``
and an upgrade to ``text/event-stream`` when the child says something about
the call before answering it, and cancellation on a timeout or a disconnect.
For a 2026-07-28 call that may ask its caller something, the wait also ends
when the child asks: ``front_rounds`` then turns the questions into this
round's ``input_required`` reply. Both endpoints reach it through their
one base, :class:`ForwardingEndpoint`. Leaves the checks that come before
(session, headers, body) to the endpoints, and the sink the router answers
into to ``http_call``.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS
from mcp_types.jsonrpc import INTERNAL_ERROR, REQUEST_TIMEOUT

from mcp_operator import tracing
from mcp_operator.adapter.child import ChildUnavailableError
from mcp_operator.adapter.core import AdapterCore
from mcp_operator.adapter.front_rounds import InputRounds, RoundOfCall
from mcp_operator.adapter.http_call import HttpCall
from mcp_operator.adapter.records import Envelope, PendingCall, Session
from mcp_operator.adapter.router import INPUT_REQUIRED_METHODS, RouterFullError
from mcp_operator.serve import era
from mcp_operator.serve.asgi import (
    ClientGoneError,
    Receive,
    Scope,
    Send,
    respond_json,
    send_more,
    watching_disconnect,
)
from mcp_operator.serve.jsonrpc import dumps, error_response
from mcp_operator.serve.sse import KEEPALIVE_FRAME, KEEPALIVE_SECONDS, SSE_HEADERS, sse_event


async def unavailable(
    send: Send, request_id: Any, text: str = "The MCP server is not ready"
) -> None:
    body = dumps(error_response(request_id, INTERNAL_ERROR, text))
    await respond_json(send, 503, body, [(b"retry-after", b"1")])


class CallForwarder:
    """Forwards accepted requests to the child and answers them over HTTP."""

    def __init__(self, core: AdapterCore) -> None:
        self.core = core
        self.config = core.config
        self.rounds = InputRounds(core)

    async def forward(
        self,
        message: dict[str, Any],
        session: Session | None,
        json_ok: bool,
        sse_ok: bool,
        receive: Receive,
        send: Send,
        *,
        modern: str | None,
        envelope: Envelope | None = None,
        scope: Scope | None = None,
    ) -> None:
        """Send a request to the child and answer: JSON, or SSE once something streams first.

        ``envelope`` (2026-07-28): the caller's capabilities, log level and the input
        responses it sent along; with it, the child's questions become input-required rounds.
        """
        forward = functools.partial(
            self._forward, message, session, json_ok, sse_ok, receive, send, modern, envelope, scope
        )
        if tracing.ENABLED:
            await self._traced(message, session, forward)
            return
        await forward()

    async def _traced(
        self,
        message: dict[str, Any],
        session: Session | None,
        forward: Callable[[], Awaitable[HttpCall | None]],
    ) -> None:
        """``forward`` in a server span (its parent the caller's ``_meta`` context) and a
        client span for the child's request, whose context the child sees in ``_meta``."""
        method, params = message["method"], message.get("params")
        session_id = session.id if session is not None else None

        async def work() -> dict[str, Any]:
            with tracing.client(method, params if isinstance(params, dict) else {}) as (
                span,
                carried,
            ):
                message["params"] = carried  # what forward() sends the child
                sink = await forward()
                answer = sink.final if sink is not None else None
                tracing.outcome(span, answer)
                return answer if isinstance(answer, dict) else {}

        await tracing.serve(method, params, work(), request_id=message["id"], session_id=session_id)

    async def _forward(
        self,
        message: dict[str, Any],
        session: Session | None,
        json_ok: bool,
        sse_ok: bool,
        receive: Receive,
        send: Send,
        modern: str | None,
        envelope: Envelope | None,
        scope: Scope | None,
    ) -> HttpCall | None:
        core = self.core
        request_id = message["id"]
        method = message["method"]
        interactive = envelope is not None and method in INPUT_REQUIRED_METHODS
        sink = HttpCall(can_stream=sse_ok, limit=self.config.stream_queue, interactive=interactive)
        try:
            call = await core.submit(message, session, sink, envelope)
        except RouterFullError:
            await unavailable(send, request_id, "Too many calls in flight")
            return None
        except ChildUnavailableError:
            await unavailable(send, request_id)
            return None
        rounds = (
            self.rounds.for_call(call, sink, envelope.answers, envelope.target)
            if envelope is not None and interactive
            else None
        )
        await self.answer(sink, call, receive, send, json_ok, method, modern, rounds, scope)
        return sink

    async def answer(
        self,
        sink: HttpCall,
        call: PendingCall,
        receive: Receive,
        send: Send,
        json_ok: bool,
        method: str,
        modern: str | None,
        rounds: RoundOfCall | None,
        scope: Scope | None = None,
    ) -> None:
        """Wait for the call's answer (or its next question) and send it; a 2026-07-28 call
        is cancelled as soon as its caller disconnects (``scope``: its request's, where the
        server tells of a lost connection)."""
        watching = watching_disconnect(scope, receive, sink.hang_up) if modern is not None else None
        with watching or contextlib.nullcontext():
            core = self.core
            deadline = time.monotonic() + self.config.request_timeout_seconds
            while sink.final is None and not sink.events:
                if rounds is not None and sink.asks and await rounds.settle():
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0 or sink.gone:
                    break
                await sink.sleep(remaining)
            if sink.final is None and not sink.events:
                gone = sink.gone
                core.cancel(call, "Client disconnected" if gone else "Request timed out")
                if gone:
                    return
                sink.final = error_response(
                    call.client_id, REQUEST_TIMEOUT, "The MCP server did not answer in time"
                )
            if sink.final is not None and (json_ok or sink.events is None):
                status, body = self._final_body(sink.final, method, modern)
                await respond_json(send, status, body)
                return
            # Something streamed before the answer (or the client takes only SSE): commit to SSE.
            await self._stream(sink, call, send, method, modern, rounds, deadline)

    async def _stream(
        self,
        sink: HttpCall,
        call: PendingCall,
        send: Send,
        method: str,
        modern: str | None,
        rounds: RoundOfCall | None,
        deadline: float,
    ) -> None:
        """Answer on SSE: what streams, then the answer. A legacy session's stream is
        resumable (``serve.events``): each event carries an id and is kept, and a client
        that disconnects does not cancel the call (the spec: a disconnection is not a
        cancellation); its events and answer are kept for a GET with ``Last-Event-ID``."""
        core = self.core
        store = core.events
        log = None
        if modern is None and call.session is not None:
            log, priming = store.open(call.session.id, time.monotonic())
        connected = True

        async def out(data: bytes) -> None:
            nonlocal connected
            if not connected:
                return
            try:
                await send_more(send, data)
            except ClientGoneError:
                if log is None:
                    raise
                connected = False  # the call goes on; its events wait for a resume

        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        try:
            if log is not None:
                await out(priming)
            while True:
                events = sink.events
                while events:
                    message = events.popleft()
                    if log is None:
                        await out(sse_event(message))
                    else:
                        await out(store.append(log, message, time.monotonic()))
                if sink.final is not None:
                    break
                if rounds is not None and sink.asks and await rounds.settle():
                    continue
                if sink.gone:
                    core.cancel(call, "Client disconnected")
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    core.cancel(call, "Request timed out")
                    text = "The MCP server did not answer in time"
                    sink.final = error_response(call.client_id, REQUEST_TIMEOUT, text)
                    break
                await sink.sleep(min(remaining, KEEPALIVE_SECONDS))
                if connected and sink.final is None and not sink.events:
                    await out(KEEPALIVE_FRAME)
            _status, body = self._final_body(sink.final, method, modern)
            if log is None:
                data = b"event: message\ndata: " + body + b"\n\n"
            else:
                data = store.append(log, sink.final, time.monotonic(), last=True)
            if connected:
                await send({"type": "http.response.body", "body": data})
        except ClientGoneError:
            core.cancel(call, "Client disconnected")
        finally:
            if log is not None and not log.ended:
                store.end(log)

    def _final_body(
        self, final: dict[str, Any], method: str, modern: str | None
    ) -> tuple[int, bytes]:
        if modern is None:
            return 200, dumps(final)
        error = final.get("error")
        if isinstance(error, dict):
            return ERROR_CODE_HTTP_STATUS.get(error.get("code"), 200), dumps(final)  # type: ignore[arg-type]
        result = final.get("result")
        if isinstance(result, dict) and result.get("resultType") == "input_required":
            return 200, dumps(final)  # the adapter's own reply, shaped already
        server_info = self.core.init_result.get("serverInfo") if self.core.init_result else None
        final["result"] = era.modern_result(method, modern, final.get("result"), server_info)
        return 200, dumps(final)


class ForwardingEndpoint:
    """An MCP endpoint whose calls go to the child through the front's one
    :class:`CallForwarder`: the legacy session endpoint and the 2026-07-28 stateless one."""

    def __init__(self, core: AdapterCore, forwarder: CallForwarder) -> None:
        self.core = core
        self.config = core.config
        self._forwarder = forwarder
