"""What an upstream says about one agent's call while it runs, relayed to that agent alone.

Owns the upstream side of a ``tools/call`` in flight (:class:`CallRelay`), and the agent's
legacy session as the relay needs it (:class:`BridgeSession`):

- **Attribution by construction.** The relay hears only what the server sends on the
  call's own response stream (``McpSession.request(..., related=relay)``: a server sends its
  requests about a call there, as the Streamable HTTP transport says for related
  requests), or the ``inputRequests`` of the call's own 2026-07-28 result. Nothing the relay
  hears can be another agent's: one relay per call, and the agent's channel reaches that
  agent only. A server request outside any call (a legacy GET stream's) belongs to no call
  and is refused by the session.
- **Server→client requests** (``sampling/createMessage``, ``elicitation/create``,
  ``roots/list``) go to the agent through its :class:`AgentChannel`, in the agent's era
  (a legacy agent: a request on its call's SSE stream, else its GET stream; a 2026-07-28
  agent: an ``input_required`` round); the answer goes back to the server in the server's
  era (a legacy server: a JSON-RPC response on its session; a 2026-07-28 server: the call
  sent again with ``inputResponses`` and its ``requestState``). ``ping`` is answered here.
- **Refused, never sent to the agent**: a request for a capability the agent did not
  declare (to a legacy server ``-32601``, as a client without that method; a 2026-07-28
  server's round fails the call with ``-32021``, the missing capability named), any
  other method (``-32601``), and past the bounds: :data:`MAX_ASKS_PER_CALL` requests per
  call, :data:`MAX_OPEN_ASKS` waiting at once, :data:`MAX_ROUNDS` rounds of
  :data:`MAX_INPUT_REQUESTS`. A flood past :data:`MAX_REFUSALS` refusals is dropped
  unanswered: a server that floods cannot make the bridge send without end.
- **Masked**: every header value in use is masked in what reaches the agent (the
  pipeline's scrubber, given by the upstream pool): a server can echo a credential.
- **Progress**: the agent's ``progressToken`` is sent upstream as a token of the bridge's
  own, one per call (two agents' tokens cannot collide), and the server's
  ``notifications/progress`` for it go back to the agent with the agent's token.
- **Cancellation** (:meth:`CallRelay.cancel`: the agent's ``notifications/cancelled``, a
  2026-07-28 agent closing its request, its session ending): the upstream request is
  cancelled (the session tells the server: ``notifications/cancelled``, or the stream
  closed), nobody waits for its answer, and the pipeline gets
  :class:`~mcp_operator.bridge.errors.CallCancelled` (the audit's ``cancelled``).

The pipeline knows nothing of this: the front puts the call's relay in :data:`CURRENT`
(a context variable, so the pipeline's signature stays what it is) and the upstream pool's
call uses it. The HTTP side of each era is :mod:`~mcp_operator.bridge.front_relay`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypeVar

from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    LOG_LEVEL_META_KEY,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
)
from mcp_types.jsonrpc import INTERNAL_ERROR, METHOD_NOT_FOUND

from mcp_operator.bridge.errors import CallCancelled
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.scrub import NOTHING
from mcp_operator.mcp.session import McpSession
from mcp_operator.serve.capabilities import (
    CAPABILITY_FOR_METHOD,
    capabilities_object,
    required_capability,
)
from mcp_operator.serve.jsonrpc import RequestId
from mcp_operator.serve.sessions import LegacySession

logger = logging.getLogger(__name__)

UPSTREAM_CAPABILITIES: Final[dict[str, Any]] = {
    "sampling": {},
    "elicitation": {"form": {}, "url": {}},
    "roots": {},
}
"""What the bridge declares to a legacy server, whose one session serves every agent: all it
can relay (a server offers some tools only to clients that declared sampling). Each request
is then checked against what its own agent declared. A 2026-07-28 server is told, per call,
what the calling agent declared."""

MAX_ASKS_PER_CALL = 32
"""Server requests relayed to the agent during one call (a sampling loop, a form per step)."""
MAX_OPEN_ASKS = 4
"""Server requests of one call waiting for the agent at once."""
MAX_REFUSALS = 64
"""Refusals one call sends its server; past that, its requests are dropped unanswered."""
MAX_ROUNDS = 16
"""``input_required`` rounds of a 2026-07-28 server in one call."""
MAX_INPUT_REQUESTS = 16
"""Requests in one such round."""
MAX_KEY_CHARS = 128
"""The longest ``inputRequests`` key passed to the agent."""

_tokens = itertools.count(1)

T = TypeVar("T")


class AgentRefusal(Exception):
    """The agent could not be asked, or answered with an error: what the server is told."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class AgentChannel(Protocol):
    """How one call reaches its agent, in the agent's era (the front's)."""

    def progress(self, message: dict[str, Any]) -> None:
        """A notification for the agent, about its call (dropped when it cannot be carried)."""
        ...

    async def ask(
        self, requests: Mapping[str, dict[str, Any]], *, fresh: bool = False
    ) -> dict[str, dict[str, Any]]:
        """Ask the agent ``{key: {"method", "params"}}``; its results by key. ``fresh``: only
        an answer given after the question reached the agent counts (never one it sent along
        before it was asked, as a 2026-07-28 agent may for a server's question).

        Raises:
            AgentRefusal: no way to ask, or the agent answered with an error.
        """
        ...


@dataclass(eq=False, slots=True, kw_only=True)
class BridgeSession(LegacySession):
    """One legacy session of the agent, with what the relay needs of it."""

    declared: frozenset[str] = frozenset()
    """The capability names its client declared (``serve.capabilities``)."""
    calls: dict[RequestId, CallRelay] = field(default_factory=dict)
    """Its calls in flight, by the id its client gave them (what it may cancel)."""
    asked: dict[int, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    """Server requests delivered to it and not answered yet, by the id it saw."""
    next_request_id: int = 0

    def in_call(self) -> bool:
        return self.open_requests > 0 or bool(self.calls)


def agent_message(session: BridgeSession, message: Mapping[str, Any]) -> None:
    """A legacy agent's answer to a server request, or its ``notifications/cancelled``: to
    the call it is for, in this session only (an id of another session names nothing)."""
    method = message.get("method")
    if method is None:
        request_id = message.get("id")
        waiter = session.asked.pop(request_id, None) if type(request_id) is int else None
        if waiter is not None and not waiter.done():
            waiter.set_result(dict(message))
        return
    if method == "notifications/cancelled":
        params = message.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        relay = session.calls.get(request_id) if isinstance(request_id, str | int) else None
        if relay is not None:
            relay.cancel("The agent cancelled the call")


def end_session(session: BridgeSession, reason: str) -> None:
    """The session ended (DELETE, eviction): its calls are cancelled, its asks refused."""
    for relay in list(session.calls.values()):
        relay.cancel(reason)
    for waiter in session.asked.values():
        if not waiter.done():
            waiter.set_exception(AgentRefusal(INTERNAL_ERROR, reason))
    session.asked.clear()


def progress_token(params: Any) -> RequestId | None:
    """The agent's ``params._meta.progressToken``, when it is one (a string or an integer)."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if isinstance(token, str | int) and not isinstance(token, bool):
        return token
    return None


CURRENT: ContextVar[CallRelay | None] = ContextVar("mcp_bridge_call_relay", default=None)
"""The relay of the agent call being served in this task (set by the front)."""


class CallRelay:
    """One agent call in flight: what its upstream says, to its agent; its cancellation."""

    def __init__(
        self,
        channel: AgentChannel,
        *,
        progress_token: RequestId | None,
        capabilities: frozenset[str],
        observe: Callable[[str, str], None] | None = None,
    ) -> None:
        self.channel = channel
        self.observe = observe
        """Told ``(method, outcome)`` of each server request (the bridge's metrics)."""
        self.scrubber = NOTHING
        """Masks the header values in use in what the server says to the agent (a server can
        echo the credential it was sent into a prompt); set by the upstream pool."""
        self.on_notification: Callable[[dict[str, Any]], None] | None = None
        """Told every other notification the server sends about the call (a log message):
        who delivers it, and to whom, decides (nothing is delivered without it)."""
        self.log_level: str | None = None
        """The level of log messages its agent asked for (its session's, or its request's):
        sent along to a 2026-07-28 server, which takes it per request (None: no logs)."""
        self.agent_token = progress_token
        """The agent's own progress token (None: it asked for no progress)."""
        self.token = f"mcp-bridge-{next(_tokens)}"
        """The token the upstream sees for this call."""
        self.capabilities = capabilities
        self.cancelled: str | None = None
        """Why the call was cancelled, once it was."""
        self.required_capabilities: dict[str, Any] | None = None
        """The client capabilities the call needed and its agent did not declare (``-32021``
        of its server, or of the relay's own check), once that ended it: a 2026-07-28 agent
        gets that error, not a failed tool result."""
        self._waiting: asyncio.Task[Any] | None = None
        """The task awaiting the server (or the agent) for this call, while it does."""
        self._cancelling = False
        """The relay cancelled :attr:`_waiting` and has not taken it back yet."""
        self._session: McpSession | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._open: dict[RequestId, asyncio.Task[None]] = {}
        """Server requests being asked of the agent, by the server's id."""
        self.asked = 0
        self.refused = 0
        self.ended = False

    # -- the call ----------------------------------------------------------------------------

    def cancel(self, reason: str) -> None:
        """Stop the call: the upstream request is cancelled and nobody waits for it."""
        if self.cancelled is not None or self.ended:
            return
        self.cancelled = reason
        if self._waiting is not None and not self._cancelling:
            self._cancelling = True
            self._waiting.cancel()

    async def call(
        self, session: McpSession, tool: str, arguments: Mapping[str, Any]
    ) -> dict[str, Any]:
        """``tools/call`` on ``session`` with this call's relay: the server's final result.

        Raises:
            McpFailure: as the session does; CallCancelled when the agent cancelled.
        """
        return await self.request(session, "tools/call", {"name": tool, "arguments": arguments})

    async def request(
        self,
        session: McpSession,
        method: str,
        params: Mapping[str, Any],
        seconds: float | None = None,
    ) -> dict[str, Any]:
        """A request that may ask the agent something (``tools/call``, ``prompts/get``,
        ``resources/read``) on ``session`` with this relay: the server's final result.
        ``seconds`` bounds each of its rounds with the server (without it, the caller's own
        deadline does)."""
        self._session = session
        self.ended = False  # the pipeline may try the call again after a failure
        self.required_capabilities = None
        try:
            if not session.connected:
                await session.connect()
            base: dict[str, Any] = dict(params)
            meta: dict[str, Any] = {}
            if self.agent_token is not None:
                meta["progressToken"] = self.token
            if session.modern:
                meta[CLIENT_CAPABILITIES_META_KEY] = capabilities_object(self.capabilities)
                if self.log_level is not None:
                    meta[LOG_LEVEL_META_KEY] = self.log_level
            if meta:
                base["_meta"] = meta
            params = base
            for _round in range(MAX_ROUNDS + 1):
                result = await self._race(session.request(method, params, seconds, related=self))
                if result.get("resultType") != "input_required":
                    return result
                answers = await self._race(self._inputs(session, result))
                params = {**base, "inputResponses": answers}
                state = result.get("requestState")
                if isinstance(state, str):
                    params["requestState"] = state
            raise McpFailure(
                "limit", f"{session.name} asked for the agent's input more than {MAX_ROUNDS} times"
            )
        except McpFailure as failure:
            if failure.code == MISSING_REQUIRED_CLIENT_CAPABILITY:
                data = failure.data if isinstance(failure.data, dict) else {}
                required = data.get("requiredCapabilities")
                self.required_capabilities = required if isinstance(required, dict) else {}
            raise
        finally:
            self.end()

    async def ask_agent(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """The bridge's own question to this call's agent (an approval), in the agent's era:
        its result, or None when the agent did not declare what ``method`` needs. Only an
        answer to the question as the agent was sent it counts (``fresh``).

        Raises:
            AgentRefusal: the agent could not be asked or answered with an error.
            CallCancelled: the agent cancelled the call meanwhile.
        """
        if required_capability(method, params, self.capabilities) is not None:
            return None
        asked = {"approval": {"method": method, "params": params}}
        answers = await self._race(self.channel.ask(asked, fresh=True))
        return answers.get("approval", {})

    def end(self) -> None:
        """The call is over: whatever is still asked of the agent is moot."""
        self.ended = True
        for task in list(self._tasks):
            task.cancel()

    async def _race(self, work: Awaitable[T]) -> T:
        """``work`` in this task, unless the call is cancelled first: then this task is
        cancelled (the session tells the server), and CallCancelled raised instead of the
        task's cancellation, which is taken back (no task per call: this is every call's
        path). A cancellation that is not the relay's (the call's deadline) stays one."""
        if self.cancelled is not None:
            if asyncio.iscoroutine(work):
                work.close()
            raise CallCancelled(self.cancelled)
        self._waiting = asyncio.current_task()
        try:
            return await work
        except asyncio.CancelledError:
            if self._cancelling and self._waiting is not None:
                self._cancelling = False
                if self._waiting.uncancel() == 0:
                    raise CallCancelled(self.cancelled or "The call was cancelled") from None
            raise
        finally:
            self._waiting = None

    async def _inputs(self, session: McpSession, result: Mapping[str, Any]) -> dict[str, Any]:
        """The agent's answers to a 2026-07-28 server's ``inputRequests``."""
        requests = result.get("inputRequests")
        if (
            not isinstance(requests, dict)
            or not 0 < len(requests) <= MAX_INPUT_REQUESTS
            or not all(
                isinstance(key, str)
                and 0 < len(key) <= MAX_KEY_CHARS
                and isinstance(request, dict)
                and isinstance(request.get("method"), str)
                for key, request in requests.items()
            )
        ):
            raise McpFailure(
                "mcp",
                f"{session.name} asked for input with inputRequests that are not "
                f"1 to {MAX_INPUT_REQUESTS} requests under keys of at most {MAX_KEY_CHARS} "
                "characters",
            )
        asked: dict[str, dict[str, Any]] = {}
        for key, request in requests.items():
            method = request["method"]
            params = request.get("params")
            params = params if isinstance(params, dict) else {}
            if method not in CAPABILITY_FOR_METHOD:
                self._told(method, "unsupported")
                raise McpFailure(
                    "rpc",
                    f"{session.name} asked the agent for {method}, which the bridge does not relay",
                    code=METHOD_NOT_FOUND,
                )
            missing = required_capability(method, params, self.capabilities)
            if missing is not None:
                self._told(method, "undeclared")
                raise McpFailure(
                    "rpc",
                    f"{session.name} asked the agent for {method}, but the agent did not "
                    f"declare {missing}",
                    code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                    data={"requiredCapabilities": required_object(missing)},
                )
            asked[key] = {"method": method, "params": self.scrubber.json(params)}
        self.asked += len(asked)
        if self.asked > MAX_ASKS_PER_CALL:
            for request in asked.values():
                self._told(request["method"], "bounded")
            raise McpFailure(
                "limit",
                f"{session.name} asked the agent more than {MAX_ASKS_PER_CALL} times in one call",
            )
        try:
            answers = await self.channel.ask(asked)
        except AgentRefusal as refusal:
            for request in asked.values():
                self._told(request["method"], "agent_error")
            raise McpFailure(
                "rpc",
                f"the agent could not answer {session.name}'s request: {refusal.message}",
                code=refusal.code,
            ) from None
        for request in asked.values():
            self._told(request["method"], "relayed")
        return answers

    # -- what the server says on the call's stream --------------------------------------------

    def heard(self, message: dict[str, Any]) -> None:
        """A request or notification of the server on this call's stream (``Related``)."""
        method = message["method"]
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if "id" not in message:
            if method == "notifications/progress":
                self._progress(params)
            elif method == "notifications/cancelled":
                gone = params.get("requestId")
                asked = self._open.pop(gone, None) if isinstance(gone, str | int) else None
                if asked is not None:
                    asked.cancel()
            elif self.on_notification is not None:
                self.on_notification(message)
            return
        request_id = message["id"]
        if not isinstance(request_id, str | int) or isinstance(request_id, bool):
            return
        if method == "ping":
            self._told(method, "relayed")
            self._reply(request_id, {"result": {}})
            return
        if method not in CAPABILITY_FOR_METHOD:
            self._refuse(request_id, method, "unsupported", METHOD_NOT_FOUND, "Method not found")
            return
        missing = required_capability(method, params, self.capabilities)
        if missing is not None:
            text = f"The client did not declare {missing}"
            self._refuse(request_id, method, "undeclared", METHOD_NOT_FOUND, text)
            return
        if self.ended or self.cancelled is not None:
            text = "The call this request is about has ended"
            self._refuse(request_id, method, "ended", INTERNAL_ERROR, text)
            return
        if self.asked >= MAX_ASKS_PER_CALL or len(self._open) >= MAX_OPEN_ASKS:
            text = "Too many requests to the client in one call"
            self._refuse(request_id, method, "bounded", INTERNAL_ERROR, text)
            return
        self.asked += 1
        self._open[request_id] = self._spawn(self._ask(request_id, method, params))

    def _progress(self, params: dict[str, Any]) -> None:
        if self.agent_token is None or params.get("progressToken") != self.token:
            return  # not this call's token: nobody of this call asked for it
        shown = self.scrubber.json(params) if self.scrubber else params
        self.channel.progress(
            {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {**shown, "progressToken": self.agent_token},
            }
        )

    async def _ask(self, request_id: RequestId, method: str, params: dict[str, Any]) -> None:
        key = f"request-{request_id}"
        shown = self.scrubber.json(params) if self.scrubber else params
        try:
            answers = await self.channel.ask({key: {"method": method, "params": shown}})
            answer: dict[str, Any] = {"result": answers.get(key, {})}
            self._told(method, "relayed")
        except AgentRefusal as refusal:
            answer = {"error": {"code": refusal.code, "message": refusal.message}}
            self._told(method, "agent_error")
        finally:
            self._open.pop(request_id, None)
        await self._send({"jsonrpc": "2.0", "id": request_id, **answer})

    def _told(self, method: str, outcome: str) -> None:
        if self.observe is not None:
            self.observe(method, outcome)

    def _refuse(
        self, request_id: RequestId, method: str, outcome: str, code: int, text: str
    ) -> None:
        self.refused += 1
        if self.refused > MAX_REFUSALS:
            self._told(method, "dropped")
            if self.refused == MAX_REFUSALS + 1:
                logger.warning("Stopped answering a server that flooded one call with requests")
            return
        self._told(method, outcome)
        self._reply(request_id, {"error": {"code": code, "message": text}})

    def _reply(self, request_id: RequestId, answer: dict[str, Any]) -> None:
        self._spawn(self._send({"jsonrpc": "2.0", "id": request_id, **answer}))

    async def _send(self, message: dict[str, Any]) -> None:
        session = self._session
        if session is None:
            return
        try:
            await session.respond(message)
        except McpFailure as failure:
            logger.debug("Could not answer a request of %s: %s", session.name, failure)

    def _spawn(self, work: Awaitable[None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


def required_object(missing: str) -> dict[str, Any]:
    """A missing capability's name as ``requiredCapabilities`` shows it (a
    ``ClientCapabilities`` object): ``"sampling"`` -> ``{"sampling": {}}``,
    ``"elicitation.url"`` -> ``{"elicitation": {"url": {}}}``."""
    name, _, sub = missing.partition(".")
    return {name: {sub: {}} if sub else {}}


def current() -> CallRelay | None:
    """The relay of the agent call being served, if the front gave it one."""
    return CURRENT.get()
