"""The agent-facing ASGI app: one MCP endpoint, both protocol eras, a sibling of the adapter's.

Owns the dispatch of a request to the MCP path: the Host/Origin checks (DNS rebinding
protection, ``serve.hosts``), then the 2026-07-28 stateless entry when
``MCP-Protocol-Version`` names no handshake-era version (admitted by ``serve.era``'s ladder:
the ``_meta`` envelope and the routing headers), else the legacy session endpoint
(:mod:`~mcp_operator.bridge.front_legacy`); and what each method gets, in either era:

- ``tools/list``: the catalog's listing (one page, deterministic order, schemas and
  annotations as the servers sent them);
- ``tools/call``: through the call pipeline only (:meth:`BridgeCore.answer`); the answer is
  always a ``CallToolResult``, a structured tool error when the pipeline refused or failed;
  what its upstream asks or reports meanwhile reaches the agent in its era
  (:mod:`~mcp_operator.bridge.front_relay`: SSE, or ``input_required`` rounds);
  ``prompts/get`` and ``resources/read`` go the same way (their server may ask too);
- ``ping``: an empty result; ``server/discover`` (2026-07-28) the bridge's own;
- anything else: JSON-RPC -32601.

The hot path parses the JSON-RPC envelope with ``json`` and never builds SDK models. Health,
readiness and metrics are served on another port (:mod:`~mcp_operator.bridge.health`).

A request refused before any call step saw it (bad JSON, a wrong content type, a body too
large, a missing session header: a 4xx other than 404/409) still gets an audit line
(``invalid_request``); one the bridge fails on is answered with a JSON-RPC error, never a
500, and audited the same way.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS, validate_mcp_param_headers
from mcp_types import methods as _methods
from mcp_types.jsonrpc import INVALID_REQUEST, METHOD_NOT_FOUND

from mcp_operator import tracing
from mcp_operator.bridge.core import SERVER_INFO, BridgeCore
from mcp_operator.bridge.front_legacy import SessionEndpoint
from mcp_operator.bridge.front_relay import RELAYED, ModernCalls
from mcp_operator.serve import era, listeners
from mcp_operator.serve.asgi import (
    Message,
    Receive,
    Scope,
    Send,
    respond_json,
    respond_plain,
    serve_lifespan,
)
from mcp_operator.serve.endpoint import McpEndpoint, stateless_body
from mcp_operator.serve.hosts import HostPolicy
from mcp_operator.serve.jsonrpc import RequestId, dumps, error_response
from mcp_operator.serve.sessions import CallerKey, client_address
from mcp_operator.serve.sse import SSE_HEADERS, SseStream, pump

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 4 * 1024 * 1024
"""The largest request body the bridge reads (a tool call's arguments included)."""

MAX_LISTENERS = 256
"""Most concurrent 2026-07-28 listen streams of the agent."""
LISTEN_QUEUE = 64
"""Messages a listen stream may fall behind before it is closed."""

NOT_REFUSALS = (404, 409)
"""4xx answers that are ordinary life, not a malformed request (a lost session, a second
GET stream): not audited."""


class BridgeFront:
    """The ASGI application of the agent-facing endpoint."""

    def __init__(
        self,
        core: BridgeCore,
        allowed_hosts: tuple[str, ...] = (),
        caller_key: CallerKey = client_address,
    ) -> None:
        """``caller_key`` names who asks, the key the agent's sessions are counted by in the
        one session table (``serve.sessions``: each caller keeps its fair share)."""
        self.core = core
        listen = core.config.listen
        self._path = listen.path
        self._paths = (listen.path, listen.path.rstrip("/") + "/")
        self.policy = HostPolicy((listen.host, *allowed_hosts), ())
        self._calls = ModernCalls(core)
        """2026-07-28 calls, and the input-required rounds they wait in."""
        self._annotated: dict[str, bool] = {}
        """Schema digest → whether the schema has ``x-mcp-header`` properties (checked once)."""
        self._endpoint = McpEndpoint(
            self.policy, self._modern, SessionEndpoint(core, MAX_BODY_BYTES), caller_key
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            if scope["path"] in self._paths:
                await self._mcp(scope, receive, send)
            else:
                await respond_plain(send, 404, b"Not Found")
        elif kind == "lifespan":
            # The core is started and stopped by the process, not by uvicorn's lifespan.
            await serve_lifespan(receive, send)

    async def _mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        status = 0
        audited = self.core.audited

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        if tracing.ENABLED:  # the request's header context: a link of its span
            tracing.HEADERS.set(scope["headers"])
        try:
            await self._endpoint(scope, receive, watched)
        except Exception as error:
            # Whatever broke, the agent gets a JSON-RPC error and the audit its line.
            logger.error("Could not answer a request: %s", type(error).__name__)
            if status:
                raise
            status = 400
            refusal = error_response(None, INVALID_REQUEST, "Invalid Request")
            await respond_json(send, status, dumps(refusal))
        if 400 <= status < 500 and status not in NOT_REFUSALS and self.core.audited == audited:
            self.core.record_refused(status)

    async def _modern(
        self, scope: Scope, headers: dict[bytes, str], receive: Receive, send: Send
    ) -> None:
        """One self-contained 2026-07-28 request: no session, the envelope checked."""
        ok, decoded = await stateless_body(scope, headers, receive, send, MAX_BODY_BYTES)
        if not ok:
            return
        outcome = era.classify_modern(
            decoded, headers.get(b"mcp-protocol-version", ""), scope["headers"]
        )
        if isinstance(outcome, era.Refusal):
            await respond_json(send, outcome.status, dumps(outcome.message))
            return
        if isinstance(outcome, era.ModernNotification):
            await respond_plain(send, 202, b"")
            return
        request_id, method = outcome.request_id, outcome.method
        if method == "server/discover":
            result = era.discover_result(self.core.discovered(), outcome.protocol_version)
            message = {"jsonrpc": "2.0", "id": request_id, "result": result}
        elif (method, outcome.protocol_version) not in _methods.CLIENT_REQUESTS:
            # Not a method of this revision (initialize, ping, logging/setLevel, the
            # subscribe pair, a notification's name, or no method at all): 404 and -32601.
            message = error_response(request_id, METHOD_NOT_FOUND, f"Method not found: {method}")
        elif method == "subscriptions/listen":
            await self._listen(request_id, decoded, receive, send)
            return
        elif method == "tools/call" and (mismatch := self._param_headers(decoded, scope)):
            refused = era.refusal(mismatch, request_id)
            await respond_json(send, refused.status, dumps(refused.message))
            return
        elif method in RELAYED and isinstance(decoded.get("params"), dict):
            sse_ok = "text/event-stream" in headers.get(b"accept", "")
            await self._calls.serve(
                request_id,
                outcome.protocol_version,
                decoded["params"],
                sse_ok=sse_ok,
                receive=receive,
                send=send,
                method=method,
                scope=scope,
            )
            return
        else:
            message = await self.core.answer(request_id, method, decoded.get("params"))
        error = message.get("error")
        if isinstance(error, dict):
            status = ERROR_CODE_HTTP_STATUS.get(error["code"], 200)
            await respond_json(send, status, dumps(message))
            return
        plain = message["result"]
        assert isinstance(plain, dict)
        message["result"] = era.modern_result(method, outcome.protocol_version, plain, SERVER_INFO)
        await respond_json(send, 200, dumps(message))

    async def _listen(
        self, request_id: RequestId, decoded: dict[str, Any], receive: Receive, send: Send
    ) -> None:
        """A ``subscriptions/listen`` stream: acknowledged first, then the list changes and
        resource updates it agreed to hear (what the bridge's capabilities honor)."""
        params = decoded.get("params")
        requested = params.get("notifications") if isinstance(params, dict) else None
        capabilities = self.core.discovered()["capabilities"]
        agreed = listeners.honored(requested if isinstance(requested, dict) else {}, capabilities)
        if not agreed:
            refusal = error_response(request_id, METHOD_NOT_FOUND, "Nothing to listen to")
            await respond_json(send, 404, dumps(refusal))
            return
        if len(self.core.listeners) >= MAX_LISTENERS:
            refusal = error_response(request_id, INVALID_REQUEST, "Too many listen streams")
            await respond_json(send, 503, dumps(refusal), [(b"retry-after", b"1")])
            return
        stream = SseStream(LISTEN_QUEUE)
        listener = listeners.Listener.for_filter(request_id, stream, agreed)
        stream.push(listener.acknowledgement(agreed))
        key = await self.core.open_listener(listener)
        try:
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            await pump(stream, receive, send)
        finally:
            await self.core.close_listener(key)

    def _param_headers(self, decoded: dict[str, Any], scope: Scope) -> Any:
        """A 2026-07-28 ``tools/call``'s ``Mcp-Param-*`` headers checked against the exposed
        tool's schema by the SDK's rule (the refusal, or None)."""
        params = decoded.get("params") or {}
        entry = self.core.pipeline.catalog.get(str(params.get("name")))
        if entry is None:
            return None
        annotated = self._annotated.get(entry.schema_key)
        if annotated is None:
            if len(self._annotated) >= 4096:
                self._annotated.clear()
            annotated = "x-mcp-header" in json.dumps(entry.input_schema, default=repr)
            self._annotated[entry.schema_key] = annotated
        if not annotated:
            return None
        arguments = params.get("arguments")
        headers = {
            key.decode("latin-1"): value.decode("latin-1").strip(" \t")
            for key, value in scope["headers"]
            if key.lower().startswith(b"mcp-param-")
        }
        return validate_mcp_param_headers(
            entry.input_schema, arguments if isinstance(arguments, dict) else {}, headers
        )
