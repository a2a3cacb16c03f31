"""Input-required rounds over HTTP: a legacy child's questions to a 2026-07-28 caller.

Owns the HTTP side of ``rounds``: turning the child's server requests that
the router attributed to a 2026-07-28 call into an ``input_required`` result
(``settle``), and serving the caller's retry (``resume``): the
``requestState`` is looked up (unknown, expired or issued for another request
→ ``-32602``, HTTP 400), each ``inputResponses`` entry goes back to the
child's pending request, entries for nothing asked are ignored, and what is
still unanswered is asked again at once. Answers sent along with a first
request (no ``requestState``) answer the child's questions of the same key
without a round trip. The wait for the call's answer after that is
``front_calls``' as for any call.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from mcp_types import SERVER_INFO_META_KEY
from mcp_types.jsonrpc import INVALID_PARAMS

from mcp_operator.adapter.core import AdapterCore
from mcp_operator.adapter.http_call import HttpCall
from mcp_operator.adapter.records import PendingCall
from mcp_operator.adapter.rounds import Ask, ParkedCall, ask_from_child, request_target
from mcp_operator.serve.asgi import Send, respond_json
from mcp_operator.serve.jsonrpc import RequestId, dumps, error_response
from mcp_operator.serve.rounds import input_responses

__all__ = ["InputRounds", "RoundOfCall", "input_responses"]

SETTLE_SECONDS = 0.01
"""How long to wait for more questions of the child before answering with the ones so far."""
SETTLE_ROUNDS = 10
"""At most this many such waits (a child that keeps asking is answered after 100 ms)."""


class RoundOfCall:
    """One interactive call's questions to its caller, across HTTP requests."""

    def __init__(
        self,
        core: AdapterCore,
        call: PendingCall,
        sink: HttpCall,
        answers: dict[str, Any],
        target: str | None,
    ) -> None:
        self.core = core
        self.call = call
        self.sink = sink
        self.answers = dict(answers)
        self.target = target
        """What the request was about; a retry must name the same (``rounds.request_target``)."""

    async def settle(self) -> bool:
        """The child asked something: answer what the caller already answered, park the rest.

        True when the sink now holds the ``input_required`` reply for this round.
        """
        sink, core = self.sink, self.core
        assert sink.asks is not None
        seen = -1
        for _ in range(SETTLE_ROUNDS):
            if len(sink.asks) == seen or sink.final is not None:
                break
            seen = len(sink.asks)
            await asyncio.sleep(SETTLE_SECONDS)
        asked: dict[str, Ask] = {}
        while sink.asks:
            ask = ask_from_child(sink.asks.popleft())
            if ask.key in self.answers:
                core.answer_asked(ask.child_id, self.answers.pop(ask.key))
                continue
            key = ask.key if ask.key not in asked else f"{ask.key}-{ask.child_id}"
            asked[key] = ask
        if not asked or sink.final is not None:
            return False
        self.park(asked)
        return True

    def park(self, asked: dict[str, Ask]) -> None:
        """Keep the call for the caller's retry; the sink's final becomes the reply."""
        call, core = self.call, self.core
        parked = ParkedCall(call, call.method, self.target, asked, 0.0, self)
        token, dropped = core.rounds.park(parked, time.monotonic())
        core.drop_parked(dropped, "Too many calls wait for their callers' input")
        result: dict[str, Any] = {
            "resultType": "input_required",
            "inputRequests": {key: ask.as_input_request() for key, ask in asked.items()},
            "requestState": token,
        }
        info = core.init_result.get("serverInfo") if core.init_result else None
        if isinstance(info, dict):
            result["_meta"] = {SERVER_INFO_META_KEY: info}
        self.sink.reply_input_required({"jsonrpc": "2.0", "id": call.client_id, "result": result})


class InputRounds:
    """Retries with ``requestState``: the parked call resumes on the new request."""

    def __init__(self, core: AdapterCore) -> None:
        self.core = core

    def for_call(
        self, call: PendingCall, sink: HttpCall, answers: dict[str, Any], target: str | None
    ) -> RoundOfCall:
        return RoundOfCall(self.core, call, sink, answers, target)

    async def resume(
        self,
        request_id: RequestId,
        method: str,
        params: dict[str, Any],
        answers: dict[str, Any],
        sse_ok: bool,
        send: Send,
    ) -> tuple[PendingCall, HttpCall, RoundOfCall] | None:
        """The parked call for this retry with its answers delivered, or None after answering
        400 (``-32602``) for a ``requestState`` that names nothing this request may resume."""
        state = params.pop("requestState")
        parked: ParkedCall | None = None
        if isinstance(state, str):
            parked, dropped = self.core.rounds.take(
                state, method, request_target(method, params), time.monotonic()
            )
            self.core.drop_parked(dropped, "The caller did not retry in time")
        if parked is None:
            text = "requestState is unknown, expired, altered or not for this request"
            body = dumps(error_response(request_id, INVALID_PARAMS, text))
            await respond_json(send, 400, body)
            return None
        rounds: RoundOfCall = parked.owner
        rounds.sink.reopen(can_stream=sse_ok)
        call = parked.call
        call.client_id = request_id
        rounds.answers = dict(answers)
        missing: dict[str, Ask] = {}
        for key, ask in parked.asked.items():
            if key in answers:
                self.core.answer_asked(ask.child_id, answers[key])
            else:
                missing[key] = ask
        if missing:
            rounds.park(missing)
        return call, rounds.sink, rounds
