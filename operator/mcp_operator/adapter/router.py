"""The protocol core: one child, many clients, matched by id.

Owns everything that decides where a JSON-RPC message goes, and nothing that
moves bytes: no sockets, no subprocesses, no clock. The caller feeds it decoded
messages and writes the lines it returns to the child; messages for clients
are handed to sinks that the caller supplies.

- **Ids.** Every request forwarded to the child gets a fresh integer id; the
  pending-call table maps it back to the caller's id and sink. Progress tokens
  are remapped the same way (two sessions may both use token ``1``).
- **Notifications from the child.** Progress goes to the call whose request
  carried the token; ``resources/updated`` to the sessions that subscribed to
  the URI; list changes, log messages and everything else to every session's
  stream.
- **Cancellation.** A client's ``notifications/cancelled`` (or a disconnect,
  a timeout, a DELETE) becomes ``notifications/cancelled`` with the child's id.
- **Server→client requests** (sampling, elicitation, roots) go to the session
  whose call is most recent in flight, else the most recently active session,
  if its client declared the capability; the answer is mapped back to the
  child's id. ``ping`` is answered here. Anything unroutable is answered to
  the child with an error so it never waits forever.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from mcp_types.jsonrpc import INTERNAL_ERROR, METHOD_NOT_FOUND

from mcp_operator.adapter.records import CallSink, PendingCall, Session
from mcp_operator.adapter.sessions import SessionTable
from mcp_operator.serve.jsonrpc import RequestId, error_response

logger = logging.getLogger(__name__)

REQUEST_CANCELLED = -32800
"""JSON-RPC code for a call that its client cancelled (LSP's RequestCancelled; MCP uses none)."""

CAPABILITY_FOR_METHOD: dict[str, str] = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}
"""Server→client request → the client capability it needs."""


class RouterFullError(Exception):
    """Too many calls in flight: the caller answers 503."""


def encode(message: dict[str, Any]) -> bytes:
    """One JSON-RPC message as one stdio line."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


class Router:
    """Pending calls, id and token remapping, and routing of what the child says."""

    def __init__(self, sessions: SessionTable, *, max_inflight: int) -> None:
        self.sessions = sessions
        self.pending: dict[int, PendingCall] = {}
        self._max_inflight = max_inflight
        self._next_id = 1
        self._progress: dict[int, PendingCall] = {}
        # child's server-request id -> (session, the id that session saw)
        self._server_requests: dict[RequestId, tuple[Session, int]] = {}
        self._recent: Session | None = None

    # ----------------------------------------------------------------- client -> child

    def forward_request(
        self, message: dict[str, Any], session: Session | None, sink: CallSink
    ) -> tuple[PendingCall, bytes]:
        """Remap a client's request for the child; returns the pending call and the line to write.

        ``message`` is the decoded request and is rewritten in place (id,
        progress token). Raises RouterFullError when ``max_inflight`` calls wait.
        """
        if len(self.pending) >= self._max_inflight:
            raise RouterFullError(f"{self._max_inflight} calls are in flight")
        child_id = self._next_id
        self._next_id += 1
        client_id: RequestId = message["id"]
        method: str = message["method"]
        token: RequestId | None = None
        params = message.get("params")
        if isinstance(params, dict):
            meta = params.get("_meta")
            if isinstance(meta, dict) and "progressToken" in meta:
                token = meta["progressToken"]
                params["_meta"] = {**meta, "progressToken": child_id}
            if session is not None and method.startswith("resources/"):
                uri = params.get("uri")
                if isinstance(uri, str):
                    if method == "resources/subscribe":
                        session.subscriptions.add(uri)
                    elif method == "resources/unsubscribe":
                        session.subscriptions.discard(uri)
        message["id"] = child_id
        call = PendingCall(child_id, client_id, method, session, sink, token)
        self.pending[child_id] = call
        if token is not None:
            self._progress[child_id] = call
        if session is not None:
            session.calls[client_id] = call
            self._recent = session
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
        if self._recent is session:
            self._recent = None
        return lines

    def fail_all(self, code: int, reason: str) -> int:
        """The child is gone: every call fails with ``code``; returns how many did."""
        calls = list(self.pending.values())
        self.pending.clear()
        self._progress.clear()
        self._server_requests.clear()
        self._recent = None
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
        message["id"] = call.client_id
        call.sink.respond(message)

    def _forget(self, call: PendingCall) -> None:
        if call.progress_token is not None:
            self._progress.pop(call.child_id, None)
        if call.session is not None:
            call.session.calls.pop(call.client_id, None)

    def _notification(self, method: str, message: dict[str, Any]) -> None:
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if method == "notifications/progress":
            token = params.get("progressToken")
            call = self._progress.get(token) if isinstance(token, int) else None
            if call is None:
                logger.debug("Dropped progress for unknown token %r", token)
                return
            assert call.progress_token is not None
            message["params"] = {**params, "progressToken": call.progress_token}
            if not call.sink.related(message) and call.session is not None:
                self._push(call.session, message)
            return
        if method == "notifications/cancelled":
            child_request_id = params.get("requestId")
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
            subscribed = [s for s in self.sessions if uri in s.subscriptions]
            for session in subscribed or list(self.sessions):
                self._push(session, message)
            return
        for session in self.sessions:
            self._push(session, message)

    def _push(self, session: Session, message: dict[str, Any]) -> None:
        if session.stream is not None and not session.stream.push(message):
            logger.debug(
                "Dropped %s for session %s: stream full or closed",
                message.get("method"),
                session.id,
            )

    def _server_request(self, method: str, message: dict[str, Any]) -> bytes | None:
        child_request_id: RequestId = message["id"]
        if method == "ping":
            return encode({"jsonrpc": "2.0", "id": child_request_id, "result": {}})
        call, session = self._target()
        if session is None:
            return encode(
                error_response(
                    child_request_id, METHOD_NOT_FOUND, f"No client session can answer {method}"
                )
            )
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
        delivered = call is not None and call.sink.related(outgoing)
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

    def _target(self) -> tuple[PendingCall | None, Session | None]:
        """The most recent call in flight from a session, else the most recently active session."""
        for call in reversed(self.pending.values()):
            if call.session is not None and not call.session.closed:
                return call, call.session
        recent = self._recent
        if recent is not None and not recent.closed:
            return None, recent
        sessions = list(self.sessions)
        if not sessions:
            return None, None
        return None, max(sessions, key=lambda s: s.last_active)
