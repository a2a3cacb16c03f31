"""The sink of one POSTed call: its final answer, what streams before it, and its questions.

Owns what the router hands an HTTP call (``records.CallSink``): the final answer (or,
for a 2026-07-28 call that asked its caller something, this round's ``input_required``
reply, ``reply_input_required``), related messages while the client accepts a stream,
the child's questions for an interactive call, and the wake-ups of whoever waits on
them. Leaves the wait and the HTTP answer to ``front_calls`` and the rounds to
``front_rounds``; both import it, neither the other.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from mcp_operator.serve.sse import Waitable


class HttpCall(Waitable):
    """The sink of one POSTed request: its final answer, and related messages if it may stream.

    A 2026-07-28 call that may ask its caller something (``interactive``) also
    collects the child's server requests (``asks``); such a sink outlives one
    HTTP request and serves every input-required round of its call.
    """

    __slots__ = ("asks", "events", "final", "gone", "limit", "provisional")

    def __init__(self, *, can_stream: bool, limit: int, interactive: bool = False) -> None:
        super().__init__()
        self.gone = False
        self.final: dict[str, Any] | None = None
        self.events: deque[dict[str, Any]] | None = deque() if can_stream else None
        self.asks: deque[dict[str, Any]] | None = deque() if interactive else None
        self.limit = limit
        self.provisional = False
        """``final`` is this round's ``input_required`` reply, not the child's answer."""

    def respond(self, message: dict[str, Any]) -> None:
        if self.final is None or self.provisional:
            self.final = message
            self.provisional = False
            self.wake()

    def related(self, message: dict[str, Any]) -> bool:
        if self.events is None or self.final is not None or len(self.events) >= self.limit:
            return False
        self.events.append(message)
        self.wake()
        return True

    def ask(self, message: dict[str, Any]) -> bool:
        if self.asks is None or len(self.asks) >= self.limit:
            return False
        self.asks.append(message)
        self.wake()
        return True

    def reply_input_required(self, message: dict[str, Any]) -> None:
        """This round's ``input_required`` reply: sent as the answer, replaced by the child's
        answer or by the next round's reply."""
        self.final = message
        self.provisional = True

    def reopen(self, *, can_stream: bool) -> None:
        """The caller retried: serve the next round on a new HTTP request."""
        self.gone = False
        self.events = deque() if can_stream else None
        if self.provisional:
            self.final = None
            self.provisional = False

    def hang_up(self) -> None:
        """The client went away: stop waiting for the answer."""
        self.gone = True
        self.wake()
