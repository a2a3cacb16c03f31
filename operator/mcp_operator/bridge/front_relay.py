"""An agent's ``tools/call`` (``prompts/get``, ``resources/read``: :data:`RELAYED`) over HTTP
while its upstream speaks of it: both eras of the agent.

Owns the agent's side of :mod:`~mcp_operator.bridge.relay`: the channel of one call in each
era, and the HTTP answer that carries it. Log messages the server sends on the call's stream
go where its progress goes, at or above the level the agent asked for.

- **A legacy agent** (:func:`serve_legacy_call`): the call runs in its request's task, and
  what streams before its answer is written by a task started by the first event; its
  answer is ``application/json`` unless something about the call reaches the agent first
  (progress, a server request), which upgrades the POST's answer to ``text/event-stream``
  (when the agent accepts it; else those go on the session's GET stream, if it has one: a
  server request with no stream to go on is refused to the server). The agent's answers
  come back as POSTed responses and its ``notifications/cancelled`` cancel the call
  (:func:`~mcp_operator.bridge.relay.agent_message`); a call cancelled so gets no answer
  on its stream. Each server request the agent sees has an id of its session's own. The SSE
  answer is resumable (``serve.events``, the core's store): an agent that disconnects does
  not cancel its call (a disconnection is not a cancellation), and resumes it with ``GET``
  and ``Last-Event-ID``.
- **A 2026-07-28 agent** (:class:`ModernCalls`): what the upstream asks becomes an
  ``input_required`` result (``inputRequests`` by key, an opaque ``requestState``: the one
  store of parked calls, ``serve.rounds``); the call waits, parked, for the agent's retry
  with ``inputResponses``, which may come on any later request (a ``requestState`` that is
  unknown, expired, altered or for another tool gets ``-32602``, HTTP 400). Progress goes on
  the request's own SSE answer when the agent accepts one. An agent that closes its request
  while the call runs cancels it; one that does not retry within :data:`PARKED_SECONDS`
  has its call cancelled. A call that needed a client capability the agent did not declare
  answers ``-32021`` with ``requiredCapabilities``.

Leaves the checks before a call (session, envelope) to the fronts, and the call itself to
the core's pipeline.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    LOG_LEVEL_META_KEY,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    SERVER_INFO_META_KEY,
)
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS

from mcp_operator.bridge.aggregate import LOG_LEVELS, call_log
from mcp_operator.bridge.core import SERVER_INFO, BridgeCore
from mcp_operator.bridge.relay import (
    CURRENT,
    AgentRefusal,
    BridgeSession,
    CallRelay,
    progress_token,
)
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
from mcp_operator.serve.capabilities import declared_capabilities
from mcp_operator.serve.events import EventStore, StreamLog
from mcp_operator.serve.jsonrpc import RequestId, dumps, error_response
from mcp_operator.serve.rounds import RoundStore, input_responses, request_target
from mcp_operator.serve.sse import (
    KEEPALIVE_FRAME,
    KEEPALIVE_SECONDS,
    SSE_HEADERS,
    Waitable,
    sse_event,
)

RELAYED: Final = frozenset({"tools/call", "prompts/get", "resources/read"})
"""The agent requests during which a server may ask the agent something: served here."""
EVENT_LIMIT: Final = 64
"""Messages one call's stream may hold for its agent before more are dropped."""
MAX_PARKED: Final = 64
"""2026-07-28 calls waiting for their agents' next retry."""
PARKED_SECONDS: Final = 300.0
"""How long such a call waits for the retry (its own deadline usually ends it sooner)."""
SETTLE_SECONDS: Final = 0.01
"""How long to wait for more questions before answering a round with the ones so far."""

_running: set[asyncio.Task[Any]] = set()
"""Calls whose agent went away, finishing (and writing their audit line) on their own."""


async def _run(
    core: BridgeCore,
    request_id: RequestId,
    method: str,
    params: Any,
    relay: CallRelay,
    session: str | None = None,
) -> Any:
    """The call through the core, with its relay for the upstream pool (or the aggregator)
    to find (``session``: the legacy agent's session id, for the core); in the request's
    task or one of the call's own, whose context no other call sees."""
    token = CURRENT.set(relay)
    try:
        return await core.answer(request_id, method, params, session)
    finally:
        CURRENT.reset(token)


def _start(
    core: BridgeCore,
    request_id: RequestId,
    method: str,
    params: Any,
    relay: CallRelay,
    wake: Waitable,
) -> asyncio.Task[dict[str, Any]]:
    """The call's own task (a 2026-07-28 call outlives the request that started it)."""
    work = _run(core, request_id, method, params, relay)
    task = asyncio.get_running_loop().create_task(work)
    _running.add(task)
    task.add_done_callback(_running.discard)
    task.add_done_callback(lambda _task: wake.wake())
    return task


class _Reply:
    """One HTTP answer: JSON, or SSE once an event went first.

    With an event store and its owner (a legacy session), the SSE answer is resumable
    (``serve.events``): it opens with a priming event, every event carries an id and is
    kept, and an agent that disconnects does not stop it (:attr:`gone`): what follows is
    kept for its ``GET`` with ``Last-Event-ID``, the answer last."""

    def __init__(
        self, send: Send, store: EventStore | None = None, owner: str | None = None
    ) -> None:
        self.send = send
        self.streaming = False
        self.store = store
        self.owner = owner
        self.log: StreamLog | None = None
        self.gone = False
        """The agent disconnected from a resumable answer: it goes on in the store only."""

    async def _out(self, data: bytes) -> None:
        if self.gone:
            return
        try:
            await send_more(self.send, data)
        except ClientGoneError:
            if self.log is None:
                raise
            self.gone = True

    async def event(self, message: dict[str, Any]) -> None:
        if not self.streaming:
            await self.send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            self.streaming = True
            if self.store is not None and self.owner is not None:
                self.log, priming = self.store.open(self.owner, time.monotonic())
                await self._out(priming)
        if self.log is not None and self.store is not None:
            await self._out(self.store.append(self.log, message, time.monotonic()))
        else:
            await self._out(sse_event(message))

    async def keepalive(self) -> None:
        if self.streaming:
            await self._out(KEEPALIVE_FRAME)

    async def final(self, status: int, body: bytes | None, message: Any = None) -> None:
        """The answer (None: none, for a call its agent cancelled); ``message``: the same
        answer unencoded, for a resumable stream's store."""
        if not self.streaming:
            await respond_json(self.send, status, body if body is not None else b"{}")
            return
        if self.log is not None and self.store is not None:
            last = b""
            if body is not None:
                last = self.store.append(self.log, message, time.monotonic(), last=True)
            self.close()
        else:
            last = b"event: message\ndata: " + body + b"\n\n" if body is not None else b""
        if self.gone:
            return
        try:
            await self.send({"type": "http.response.body", "body": last})
        except OSError:
            if self.log is None:
                raise
            self.gone = True  # the answer is kept for the agent's resume

    def close(self) -> None:
        """No more events: a resume of this answer ends after what it has."""
        if self.log is not None and self.store is not None and not self.log.ended:
            self.store.end(self.log)


# ------------------------------------------------------------------------------ legacy agents


class LegacyChannel(Waitable):
    """A legacy agent's call: its POST's stream (if it takes one), else its session's."""

    def __init__(self, session: BridgeSession, *, can_stream: bool) -> None:
        super().__init__()
        self.session = session
        self.events: deque[dict[str, Any]] | None = deque() if can_stream else None
        self.done = False
        """The POST's answer is on its way: what comes now goes on the GET stream."""
        self.on_event: Callable[[], None] | None = None
        """Called when an event is queued for the POST's stream (it starts the stream)."""

    def _deliver(self, message: dict[str, Any]) -> bool:
        if self.events is not None and not self.done:
            if len(self.events) >= EVENT_LIMIT:
                return False
            self.events.append(message)
            self.wake()
            if self.on_event is not None:
                self.on_event()
            return True
        stream = self.session.stream
        return stream is not None and stream.push(message)

    def progress(self, message: dict[str, Any]) -> None:
        self._deliver(message)

    async def ask(
        self, requests: Mapping[str, dict[str, Any]], *, fresh: bool = False
    ) -> dict[str, dict[str, Any]]:
        # Always fresh: an answer is taken only for an id this session was sent (agent_message).
        session = self.session
        loop = asyncio.get_running_loop()
        waiting: dict[str, tuple[int, asyncio.Future[dict[str, Any]]]] = {}
        try:
            for key, request in requests.items():
                session.next_request_id += 1
                visible = session.next_request_id
                waiter: asyncio.Future[dict[str, Any]] = loop.create_future()
                session.asked[visible] = waiter
                waiting[key] = (visible, waiter)
                message = {
                    "jsonrpc": "2.0",
                    "id": visible,
                    "method": request["method"],
                    "params": request.get("params") or {},
                }
                if not self._deliver(message):
                    text = f"No open stream to deliver {request['method']} to the client on"
                    raise AgentRefusal(INTERNAL_ERROR, text)
            answers: dict[str, dict[str, Any]] = {}
            for key, (_visible, waiter) in waiting.items():
                answer = await waiter
                error = answer.get("error")
                if isinstance(error, dict):
                    code = error.get("code")
                    raise AgentRefusal(
                        code if type(code) is int else INTERNAL_ERROR,
                        str(error.get("message", "")),
                    )
                result = answer.get("result")
                if not isinstance(result, dict):
                    raise AgentRefusal(INTERNAL_ERROR, "The client answered without a result")
                answers[key] = result
            return answers
        finally:
            for visible, _waiter in waiting.values():
                session.asked.pop(visible, None)


def _deliver_logs(relay: CallRelay, channel: LegacyChannel | ModernChannel) -> None:
    """Log messages on the call's own stream go to its agent, where its progress goes, when
    the level it asked for (:attr:`CallRelay.log_level`) reaches them."""

    def deliver(message: dict[str, Any]) -> None:
        shown = call_log(relay.log_level, message, relay.scrubber)
        if shown is not None:
            channel.progress(shown)

    relay.on_notification = deliver


async def serve_legacy_call(
    core: BridgeCore,
    session: BridgeSession,
    request_id: RequestId,
    params: Any,
    *,
    json_ok: bool,
    sse_ok: bool,
    send: Send,
    method: str = "tools/call",
) -> None:
    """Answer a legacy agent's ``tools/call`` (or another of :data:`RELAYED`): JSON, or SSE
    once the upstream spoke first."""
    channel = LegacyChannel(session, can_stream=sse_ok)
    relay = CallRelay(
        channel,
        progress_token=progress_token(params),
        capabilities=session.declared,
        observe=core.metrics.observe_server_request,
    )
    relay.log_level = core.aggregator.session_level(session.id)  # its logging/setLevel
    _deliver_logs(relay, channel)
    session.calls[request_id] = relay
    reply = _Reply(send, core.events, session.id)
    stream = _LegacyStream(channel, reply, relay)
    channel.on_event = stream.start
    try:
        try:
            answer = await _run(core, request_id, method, params, relay, session.id)
        finally:
            channel.on_event = None
        if stream.task is None and not channel.events and (json_ok or channel.events is None):
            channel.done = True
            await reply.final(200, dumps(answer))
            return
        if not await stream.finish():
            return  # the agent went away from a stream that is not resumable
        channel.done = True
        shown = None if relay.cancelled else answer
        await reply.final(200, None if shown is None else dumps(shown), shown)
    except ClientGoneError:  # a stream that is not resumable (a resumable one goes on)
        relay.cancel("The client went away")
    finally:
        stream.stop()
        reply.close()
        channel.done = True
        session.calls.pop(request_id, None)


class _LegacyStream:
    """The events of a legacy agent's call on its POST's SSE answer, written by a task of
    their own while the call runs in the request's task; started by the first event, so a
    call that streams nothing (almost every one) costs no task."""

    def __init__(self, channel: LegacyChannel, reply: _Reply, relay: CallRelay) -> None:
        self.channel = channel
        self.reply = reply
        self.relay = relay
        self.task: asyncio.Task[None] | None = None
        self.finished = False
        """The call has its answer: write what is queued, then stop."""
        self.gone = False
        """The agent went away from a stream that is not resumable: the call was cancelled."""

    def start(self) -> None:
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._pump())

    async def _pump(self) -> None:
        channel, reply = self.channel, self.reply
        events = channel.events
        assert events is not None  # started by an event queued for the POST's stream
        try:
            while True:
                while events:
                    await reply.event(events.popleft())
                if self.finished:
                    return
                await channel.sleep(KEEPALIVE_SECONDS)
                if not self.finished and not events:
                    await reply.keepalive()
        except ClientGoneError:
            self.gone = True
            self.relay.cancel("The client went away")

    async def finish(self) -> bool:
        """Write what is still queued (the call has its answer); False: the agent is gone."""
        self.finished = True
        if self.task is None:
            return True
        self.channel.wake()
        await self.task
        return not self.gone

    def stop(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()


# ------------------------------------------------------------------------------ 2026-07-28 agents


class ModernChannel(Waitable):
    """A 2026-07-28 agent's call: questions become rounds, progress its request's SSE."""

    def __init__(self) -> None:
        super().__init__()
        self.events: deque[dict[str, Any]] | None = None
        """The current request's stream, when its agent takes SSE."""
        self.pending: dict[str, dict[str, Any]] = {}
        """Questions not answered yet, by key."""
        self.early: dict[str, dict[str, Any]] = {}
        """Answers the agent sent along with the call itself, before anything was asked: a
        server's question of the same key takes its answer from here (the adapter's rule);
        the bridge's own (an approval, ``fresh``) never does."""
        self._waiters: dict[str, asyncio.Future[dict[str, Any]]] = {}

    def progress(self, message: dict[str, Any]) -> None:
        if self.events is not None and len(self.events) < EVENT_LIMIT:
            self.events.append(message)
            self.wake()

    async def ask(
        self, requests: Mapping[str, dict[str, Any]], *, fresh: bool = False
    ) -> dict[str, dict[str, Any]]:
        loop = asyncio.get_running_loop()
        keys: dict[str, str] = {}
        for key, request in requests.items():
            shown = key
            while shown in self.pending:  # two of the server's requests under one key
                shown = f"{shown}-"
            keys[key] = shown
            self._waiters[shown] = loop.create_future()
            early = None if fresh else self.early.pop(shown, None)
            if early is not None:
                self._waiters[shown].set_result(early)
                continue
            self.pending[shown] = {"method": request["method"], "params": request.get("params")}
        self.wake()
        try:
            return {key: await self._waiters[shown] for key, shown in keys.items()}
        finally:
            for shown in keys.values():
                self.pending.pop(shown, None)
                self._waiters.pop(shown, None)

    def answer(self, responses: Mapping[str, Any]) -> None:
        """The agent's ``inputResponses``: each answers the question of its key (others are
        ignored)."""
        for key, value in responses.items():
            waiter = self._waiters.get(key)
            if waiter is not None and not waiter.done() and isinstance(value, dict):
                self.pending.pop(key, None)
                waiter.set_result(value)


@dataclass(eq=False, slots=True)
class ParkedCall:
    """A 2026-07-28 agent's call waiting for its retry (``serve.rounds.Parked``)."""

    method: str
    target: str | None
    expires: float
    channel: ModernChannel
    relay: CallRelay
    task: asyncio.Task[dict[str, Any]]


class ModernCalls:
    """The 2026-07-28 agents' calls of one bridge, and the rounds they wait in."""

    def __init__(self, core: BridgeCore) -> None:
        self.core = core
        self.rounds: RoundStore[ParkedCall] = RoundStore(max_parked=MAX_PARKED, ttl=PARKED_SECONDS)

    def _dropped(self, dropped: list[ParkedCall]) -> None:
        for parked in dropped:
            parked.relay.cancel("The agent did not retry the call in time")

    async def serve(
        self,
        request_id: RequestId,
        version: str,
        params: dict[str, Any],
        *,
        sse_ok: bool,
        receive: Receive,
        send: Send,
        method: str = "tools/call",
        scope: Scope | None = None,
    ) -> None:
        """Answer one 2026-07-28 ``tools/call`` (or another of :data:`RELAYED`) request: a new
        call, or a retry of a round."""
        params = dict(params)
        valid, answers = input_responses(params)
        if not valid:
            text = "inputResponses must be an object whose values are results"
            await respond_json(send, 400, dumps(error_response(request_id, INVALID_PARAMS, text)))
            return
        target = request_target(method, params)
        if "requestState" in params:
            state = params.pop("requestState")
            parked: ParkedCall | None = None
            if isinstance(state, str):
                parked, dropped = self.rounds.take(state, method, target, time.monotonic())
                self._dropped(dropped)
            if parked is None:
                text = "requestState is unknown, expired, altered or not for this request"
                body = dumps(error_response(request_id, INVALID_PARAMS, text))
                await respond_json(send, 400, body)
                return
            channel, relay, task = parked.channel, parked.relay, parked.task
            channel.answer(answers)
        else:
            meta = params.get("_meta")
            meta = meta if isinstance(meta, dict) else {}
            channel = ModernChannel()
            relay = CallRelay(
                channel,
                progress_token=progress_token(params),
                capabilities=declared_capabilities(meta.get(CLIENT_CAPABILITIES_META_KEY)),
                observe=self.core.metrics.observe_server_request,
            )
            level = meta.get(LOG_LEVEL_META_KEY)
            relay.log_level = level if level in LOG_LEVELS else None
            _deliver_logs(relay, channel)
            params = era.strip_envelope(params)
            task = _start(self.core, request_id, method, params, relay, channel)
            channel.early = answers  # sent along before anything was asked
        channel.events = deque() if sse_ok else None
        await self._answer(
            request_id, version, method, target, channel, relay, task, receive, send, scope
        )

    async def _answer(
        self,
        request_id: RequestId,
        version: str,
        method: str,
        target: str | None,
        channel: ModernChannel,
        relay: CallRelay,
        task: asyncio.Task[dict[str, Any]],
        receive: Receive,
        send: Send,
        scope: Scope | None,
    ) -> None:
        reply = _Reply(send)
        gone = False

        def hang_up() -> None:
            nonlocal gone
            gone = True
            channel.wake()

        try:
            with watching_disconnect(scope, receive, hang_up):
                while not task.done():
                    if channel.pending:
                        await asyncio.sleep(SETTLE_SECONDS)  # the rest of the round's questions
                    if channel.pending and not task.done():
                        await self._round(request_id, method, target, channel, relay, task, reply)
                        return
                    if gone:
                        relay.cancel("The agent closed its request")
                        return
                    events = channel.events
                    while events:
                        await reply.event(events.popleft())
                    if task.done() or channel.pending:
                        continue
                    await channel.sleep(KEEPALIVE_SECONDS)
                    if not task.done() and not channel.pending and not channel.events:
                        await reply.keepalive()
                events = channel.events
                while events:
                    await reply.event(events.popleft())
                channel.events = None
                answer = _refused(relay, task.result())
                status, body = _modern_body(answer, request_id, version, method)
                await reply.final(status, body)
        except ClientGoneError:
            relay.cancel("The agent closed its request")

    async def _round(
        self,
        request_id: RequestId,
        method: str,
        target: str | None,
        channel: ModernChannel,
        relay: CallRelay,
        task: asyncio.Task[dict[str, Any]],
        reply: _Reply,
    ) -> None:
        """Park the call and answer this request with the round's questions."""
        channel.events = None
        parked = ParkedCall(method, target, 0.0, channel, relay, task)
        token, dropped = self.rounds.park(parked, time.monotonic())
        self._dropped(dropped)
        result = {
            "resultType": "input_required",
            "inputRequests": dict(channel.pending),
            "requestState": token,
            "_meta": {SERVER_INFO_META_KEY: SERVER_INFO},
        }
        await reply.final(200, dumps({"jsonrpc": "2.0", "id": request_id, "result": result}))


def _refused(relay: CallRelay, message: dict[str, Any]) -> dict[str, Any]:
    """A call that needed a client capability its 2026-07-28 agent did not declare ends in
    that error (``-32021``, HTTP 400, with ``requiredCapabilities``), not a tool result."""
    required = relay.required_capabilities
    if required is None:
        return message
    names = ", ".join(sorted(required)) or "a capability"
    error = error_response(
        message.get("id"), MISSING_REQUIRED_CLIENT_CAPABILITY, f"The client did not declare {names}"
    )
    error["error"]["data"] = {"requiredCapabilities": required}
    return error


def _modern_body(
    message: dict[str, Any], request_id: RequestId, version: str, method: str
) -> tuple[int, bytes]:
    """The core's answer for a 2026-07-28 agent: its status, the result shaped for the era,
    under the id of the request it answers now (a round's retry has its own)."""
    message = {**message, "id": request_id}
    error = message.get("error")
    if isinstance(error, dict):
        return ERROR_CODE_HTTP_STATUS.get(error.get("code"), 200), dumps(message)  # type: ignore[arg-type]
    plain = message.get("result")
    message["result"] = era.modern_result(method, version, plain, SERVER_INFO)
    return 200, dumps(message)
