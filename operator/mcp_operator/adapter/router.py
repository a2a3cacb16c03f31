"""The protocol core: one child, many clients, matched by id.

Owns everything that decides where a JSON-RPC message goes, and nothing that
moves bytes: no sockets, no subprocesses, no clock. The caller feeds it decoded
messages and writes the lines it returns to the child; messages for clients
are handed to sinks that the caller supplies.

- **Ids.** Every request forwarded to the child gets a fresh integer id; the
  pending-call table maps it back to the caller's id and sink. Progress tokens
  are remapped the same way (two sessions may both use token ``1``); a call
  that may cause server requests carries the adapter's token even when its
  caller asked for no progress, so that the child can name the call.
- **Notifications from the child.** Progress goes to the call whose request
  carried the token (and nowhere if its caller asked for none);
  ``resources/updated`` to the sessions that subscribed to the URI; log
  messages to the call they are attributed to (``attribution``), else nowhere
  (dropped and counted in ``unattributed``); list changes to every session's
  stream.
- **Cancellation.** A client's ``notifications/cancelled`` (or a disconnect,
  a timeout, a DELETE) becomes ``notifications/cancelled`` with the child's id.
- **Server→client requests** (sampling, elicitation, roots) go to the call
  they are attributed to (``attribution``), in that caller's era: a legacy
  session gets the request with a session-local id on the call's stream (else
  its GET stream) if its client declared the capability; a 2026-07-28 caller
  gets it through its sink's ``ask`` (an input-required round) if its
  envelope declared the capability (else ``-32021``). What cannot be
  attributed or delivered is refused to the child (and counted), never sent to
  a bystander.
  ``ping`` is answered here.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp_types.jsonrpc import INTERNAL_ERROR, METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY

from mcp_operator.adapter.attribution import CAUSING_METHODS, attribute
from mcp_operator.adapter.param_headers import ToolHeaderSchemas
from mcp_operator.adapter.records import CallSink, PendingCall, Session
from mcp_operator.adapter.sessions import AdapterSessions
from mcp_operator.net import jsoncodec
from mcp_operator.serve.capabilities import CAPABILITY_FOR_METHOD
from mcp_operator.serve.jsonrpc import RequestId, error_response
from mcp_operator.serve.listeners import Listener

logger = logging.getLogger(__name__)

REQUEST_CANCELLED = -32800
"""JSON-RPC code for a call that its client cancelled (LSP's RequestCancelled; MCP uses none)."""

INPUT_REQUIRED_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
"""The 2026-07-28 requests whose result may be ``input_required`` (no other may ask)."""

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


class RouterFullError(Exception):
    """Too many calls in flight: the caller answers 503."""


def encode(message: dict[str, Any]) -> bytes:
    """One JSON-RPC message as one stdio line."""
    return jsoncodec.dumps(message) + b"\n"


class Router:
    """Pending calls, id and token remapping, and routing of what the child says."""

    def __init__(self, sessions: AdapterSessions, *, max_inflight: int) -> None:
        self.sessions = sessions
        self.pending: dict[int, PendingCall] = {}
        self._max_inflight = max_inflight
        self._next_id = 1
        self._progress: dict[int, PendingCall] = {}
        """Calls by the token the child knows them by (their child id)."""
        # child's server-request id -> (session, the id that session saw)
        self._server_requests: dict[RequestId, tuple[Session, int]] = {}
        self._asked: dict[RequestId, PendingCall] = {}
        """Child server requests handed to a 2026-07-28 caller, by the child's id."""
        self.listeners: list[Listener] = []
        """Open 2026-07-28 ``subscriptions/listen`` streams."""
        self.tool_headers = ToolHeaderSchemas()
        """The child's ``x-mcp-header`` schemas, learnt from its ``tools/list`` results."""
        self.sole_caller = False
        """The child serves one caller alone (``--child-per-session``): ``attribution``'s
        third rule applies."""
        self.unattributed = {"log": 0, "request": 0}
        """Messages of the child that no call could be attributed to since start: log
        messages dropped, server→client requests refused to the child."""

    # ----------------------------------------------------------------- client -> child

    def forward_request(
        self,
        message: dict[str, Any],
        session: Session | None,
        sink: CallSink,
        *,
        capabilities: frozenset[str] | None = None,
        log_level: str | None = None,
    ) -> tuple[PendingCall, bytes]:
        """Remap a client's request for the child; returns the pending call and the line to write.

        ``message`` is the decoded request and is rewritten in place (id,
        progress token). ``capabilities`` and ``log_level`` are a 2026-07-28
        caller's envelope. Raises RouterFullError when ``max_inflight`` calls wait.
        """
        if len(self.pending) >= self._max_inflight:
            raise RouterFullError(f"{self._max_inflight} calls are in flight")
        child_id = self._next_id
        self._next_id += 1
        client_id: RequestId = message["id"]
        method: str = message["method"]
        token: RequestId | None = None
        params = message.get("params")
        causing = method in CAUSING_METHODS
        if causing and not isinstance(params, dict):
            params = message["params"] = {}
        if isinstance(params, dict):
            meta = params.get("_meta")
            if isinstance(meta, dict) and "progressToken" in meta:
                token = meta["progressToken"]
                params["_meta"] = {**meta, "progressToken": child_id}
            elif causing:
                params["_meta"] = (
                    {**meta, "progressToken": child_id}
                    if isinstance(meta, dict)
                    else {"progressToken": child_id}
                )
            if session is not None and method == "logging/setLevel":
                level = params.get("level")
                session.log_level = level if isinstance(level, str) else None
            if session is not None and method.startswith("resources/"):
                uri = params.get("uri")
                if isinstance(uri, str):
                    if method == "resources/subscribe":
                        session.subscriptions.add(uri)
                    elif method == "resources/unsubscribe":
                        session.subscriptions.discard(uri)
        message["id"] = child_id
        call = PendingCall(
            child_id, client_id, method, session, sink, token, capabilities, log_level
        )
        self.pending[child_id] = call
        if token is not None or causing:
            self._progress[child_id] = call
        if session is not None:
            session.calls[client_id] = call
        return call, encode(message)

    def internal_request(self, method: str, params: dict[str, Any], sink: CallSink) -> bytes:
        """A request the adapter itself originates (the handshake); returns the line to write."""
        message = {"jsonrpc": "2.0", "id": 0, "method": method, "params": params}
        _call, line = self.forward_request(message, None, sink)
        return line

    def forward_notification(
        self, message: dict[str, Any], session: Session | None
    ) -> bytes | None:
        """Remap a client's notification; returns the line to write, or None to drop it."""
        method = message.get("method")
        if method == "notifications/initialized":
            return None  # the adapter initialized the child once, for everyone
        if method == "notifications/cancelled":
            params = message.get("params")
            request_id = params.get("requestId") if isinstance(params, dict) else None
            call = (
                session.calls.get(request_id)
                if session is not None and request_id is not None
                else None
            )
            if call is None:
                return None  # already answered, or not this session's: never cancel another's call
            reason = params.get("reason") if isinstance(params, dict) else None
            return self.cancel(
                call, reason if isinstance(reason, str) else "Cancelled by the client"
            )
        return encode(message)

    def forward_response(self, message: dict[str, Any], session: Session) -> bytes | None:
        """A client's answer to a server→client request, mapped back to the child's id."""
        visible_id = message.get("id")
        if not isinstance(visible_id, int) or visible_id not in session.server_requests:
            logger.debug("Dropped a response to an unknown server request %r", visible_id)
            return None
        child_request_id = session.server_requests.pop(visible_id)
        self._server_requests.pop(child_request_id, None)
        message["id"] = child_request_id
        return encode(message)

    def cancel(self, call: PendingCall, reason: str) -> bytes | None:
        """Forget a call and tell the child; answers the caller's sink with a cancellation error."""
        if self.pending.pop(call.child_id, None) is None:
            return None
        self._forget(call)
        call.sink.respond(error_response(call.client_id, REQUEST_CANCELLED, reason))
        if call.method == "initialize":
            return None  # initialize must not be cancelled
        params = {"requestId": call.child_id, "reason": reason}
        return encode({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})

    def end_session(self, session: Session, reason: str) -> list[bytes]:
        """A session is gone: cancel its calls, refuse its server requests; lines for the child."""
        lines = [
            line for call in list(session.calls.values()) if (line := self.cancel(call, reason))
        ]
        for child_request_id in list(session.server_requests.values()):
            self._server_requests.pop(child_request_id, None)
            lines.append(
                encode(error_response(child_request_id, INTERNAL_ERROR, "Client session ended"))
            )
        session.server_requests.clear()
        return lines

    def fail_all(self, code: int, reason: str) -> int:
        """The child is gone: every call fails with ``code``; returns how many did."""
        calls = list(self.pending.values())
        self.pending.clear()
        self._progress.clear()
        self._server_requests.clear()
        self._asked.clear()
        self.tool_headers.forget()
        for call in calls:
            if call.session is not None:
                call.session.calls.pop(call.client_id, None)
            call.sink.respond(error_response(call.client_id, code, reason))
        return len(calls)

    # ----------------------------------------------------------------- child -> clients

    def from_child(self, message: dict[str, Any]) -> list[bytes]:
        """Route one message from the child; returns lines to write back to the child."""
        method = message.get("method")
        if method is None:
            self._response(message)
            return []
        if not isinstance(method, str):
            logger.warning("Dropped a child message with a non-string method")
            return []
        if "id" in message:
            line = self._server_request(method, message)
            return [line] if line is not None else []
        self._notification(method, message)
        return []

    def _response(self, message: dict[str, Any]) -> None:
        child_id = message.get("id")
        call = self.pending.pop(child_id, None) if isinstance(child_id, int) else None
        if call is None:
            logger.debug("Dropped a child response to unknown id %r", child_id)
            return
        self._forget(call)
        if call.method == "tools/list":
            self.tool_headers.learn(message.get("result"))
        message["id"] = call.client_id
        call.sink.respond(message)

    def _forget(self, call: PendingCall) -> None:
        self._progress.pop(call.child_id, None)
        if self._asked and call.session is None:
            for child_request_id in [k for k, asked in self._asked.items() if asked is call]:
                del self._asked[child_request_id]
        if call.session is not None:
            call.session.calls.pop(call.client_id, None)

    def _notification(self, method: str, message: dict[str, Any]) -> None:
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if method == "notifications/progress":
            token = params.get("progressToken")
            call = self._progress.get(token) if isinstance(token, int) else None
            if call is None or call.progress_token is None:
                logger.debug("Dropped progress for token %r: no caller asked for it", token)
                return
            message["params"] = {**params, "progressToken": call.progress_token}
            if not call.sink.related(message) and call.session is not None:
                self._push(call.session, message)
            return
        if method == "notifications/cancelled":
            child_request_id = params.get("requestId")
            if child_request_id is not None:
                self._asked.pop(child_request_id, None)
            target = (
                self._server_requests.pop(child_request_id, None)
                if child_request_id is not None
                else None
            )
            if target is not None:
                session, visible_id = target
                session.server_requests.pop(visible_id, None)
                self._push(session, {**message, "params": {**params, "requestId": visible_id}})
            return
        if method == "notifications/resources/updated":
            uri = params.get("uri")
            for session in self.sessions:
                if uri in session.subscriptions:
                    self._push(session, message)
            self._tell_listeners(method, params, message)
            return
        if method == "notifications/message":
            self._log(message, params)
            return
        if method == "notifications/tools/list_changed":
            self.tool_headers.forget()
        for session in self.sessions:
            self._push(session, message)
        self._tell_listeners(method, params, message)

    def _tell_listeners(self, method: str, params: dict[str, Any], message: dict[str, Any]) -> None:
        for listener in self.listeners:
            if listener.wants(method, params):
                listener.stream.push(listener.tagged(message))

    def _push(self, session: Session, message: dict[str, Any]) -> None:
        if session.stream is not None and not session.stream.push(message):
            logger.debug(
                "Dropped %s for session %s: stream full or closed",
                message.get("method"),
                session.id,
            )

    def _log(self, message: dict[str, Any], params: dict[str, Any]) -> None:
        """A log message: to the caller of the call it is attributed to, else nowhere."""
        call = attribute(
            message,
            self._progress,
            self.pending.values(),
            self.sessions,
            sole_caller=self.sole_caller,
        )
        if call is None:
            self.unattributed["log"] += 1
            logger.debug("Dropped a log message that could not be attributed to one call")
            return
        if call.session is not None:
            if not call.sink.related(message):
                self._push(call.session, message)
        elif call.log_level is not None and _at_least(params.get("level"), call.log_level):
            call.sink.related(message)

    def answer_asked(self, child_request_id: RequestId, result: dict[str, Any]) -> bytes | None:
        """A 2026-07-28 caller's result for a request its call asked; the line for the child
        (None when the child no longer waits for it)."""
        if self._asked.pop(child_request_id, None) is None:
            return None
        return encode({"jsonrpc": "2.0", "id": child_request_id, "result": result})

    def _server_request(self, method: str, message: dict[str, Any]) -> bytes | None:
        child_request_id: RequestId = message["id"]
        if method == "ping":
            return encode({"jsonrpc": "2.0", "id": child_request_id, "result": {}})
        call = attribute(
            message,
            self._progress,
            self.pending.values(),
            self.sessions,
            sole_caller=self.sole_caller,
        )
        if call is None:
            self.unattributed["request"] += 1
            text = f"{method} could not be attributed to one call in flight"
            return encode(error_response(child_request_id, INTERNAL_ERROR, text))
        if call.session is None:
            return self._ask_modern(method, message, call)
        session = call.session
        capability = CAPABILITY_FOR_METHOD.get(method)
        if capability is not None and not session.can(capability):
            return encode(
                error_response(
                    child_request_id, METHOD_NOT_FOUND, f"The client did not declare {capability}"
                )
            )
        session.next_server_request_id += 1
        visible_id = session.next_server_request_id
        outgoing = {**message, "id": visible_id}
        delivered = call.sink.related(outgoing)
        if not delivered and session.stream is not None:
            delivered = session.stream.push(outgoing)
        if not delivered:
            return encode(
                error_response(
                    child_request_id, INTERNAL_ERROR, f"No open stream to deliver {method} on"
                )
            )
        session.server_requests[visible_id] = child_request_id
        self._server_requests[child_request_id] = (session, visible_id)
        return None

    def _ask_modern(self, method: str, message: dict[str, Any], call: PendingCall) -> bytes | None:
        """A server request attributed to a 2026-07-28 call: an input-required round, if allowed."""
        child_request_id: RequestId = message["id"]
        if call.capabilities is None or call.method not in INPUT_REQUIRED_METHODS:
            text = f"{method} cannot be asked during {call.method}"
            return encode(error_response(child_request_id, METHOD_NOT_FOUND, text))
        capability = CAPABILITY_FOR_METHOD.get(method)
        if capability is not None and capability not in call.capabilities:
            error = error_response(
                child_request_id,
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                f"The client did not declare {capability}",
            )
            error["error"]["data"] = {"requiredCapabilities": {capability: {}}}
            return encode(error)
        if not call.sink.ask(message):
            text = f"No way to deliver {method} to the caller"
            return encode(error_response(child_request_id, INTERNAL_ERROR, text))
        self._asked[child_request_id] = call
        return None


def _at_least(level: Any, threshold: str | None) -> bool:
    """Whether a log message at ``level`` passes a ``threshold`` set by the client."""
    if threshold not in LOG_LEVELS:
        return True
    return level in LOG_LEVELS and LOG_LEVELS.index(level) >= LOG_LEVELS.index(threshold)
