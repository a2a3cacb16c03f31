"""What the bridge serves beyond tools: prompts, resources, templates, completion, logging.

Owns the agent's requests for the other server features, routed to the one upstream they
belong to through the run's naming (:mod:`~mcp_operator.bridge.prompts` for prompt names,
:mod:`~mcp_operator.mcp.uris` for resource URIs) and filters (the prompt catalog holds only
the prompts that pass; :func:`~mcp_operator.api.bridge_filters.resource_allowed` judges each
URI):

- ``prompts/list`` from the prompt catalog (one page); ``prompts/get`` by exposed name;
- ``resources/list`` and ``resources/templates/list`` walked across the servers that offer
  resources in the configuration's order, whole upstream pages in a page of ours (the next
  server's while the page is short, none after a server's own cursor), under the bridge's
  own signed cursor
  (:mod:`~mcp_operator.bridge.cursor`; a bad one is -32602); URIs and URI templates rewritten
  to the exposed ones, everything else (``_meta`` of MCP Apps included) as sent;
- ``resources/read`` routed by URI, the contents' URIs rewritten back; ``resources/subscribe``
  and ``resources/unsubscribe`` (legacy) forwarded to the URI's server and remembered per
  agent session, so that a ``notifications/resources/updated`` of that server reaches the
  sessions that subscribed, under the exposed URI (:meth:`Aggregator.notice`);
- ``completion/complete`` routed by its ``ref``: a prompt by exposed name, a template by
  exposed URI template;
- ``logging/setLevel`` relayed to every server that logs; log notifications reach only the
  agent sessions that set a level, at or above it.

A filtered prompt or resource is invisible and answers as if it did not exist. A failing
upstream gives the agent its JSON-RPC error (code kept, words scrubbed of header values), or
-32603 naming the server when it could not be reached. Tool calls are the pipeline's.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND

from mcp_operator.api.bridge_filters import resource_allowed
from mcp_operator.bridge.catalog import server_key
from mcp_operator.bridge.cursor import CursorCodec, InvalidCursor, Position
from mcp_operator.bridge.prompts import PromptCatalog
from mcp_operator.bridge.relay import current as relay_of_call
from mcp_operator.bridge.upstreams import ServerState, UpstreamPool
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.naming import cut
from mcp_operator.mcp.scrub import Scrubber
from mcp_operator.mcp.uris import exposed_uri, original_uri
from mcp_operator.serve import era
from mcp_operator.serve.jsonrpc import RequestId, error_response

logger = logging.getLogger(__name__)

METHODS: Final = frozenset(
    {
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "completion/complete",
        "logging/setLevel",
    }
)
"""The methods this module answers."""
FEATURES: Final = {method: method.split("/")[0] for method in METHODS} | {
    "completion/complete": "completions"
}
"""The server capability each method needs (without it: -32601, as from a server without
the feature)."""
LOG_LEVELS: Final = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
LISTINGS: Final = {"resources/list": "resources", "resources/templates/list": "resourceTemplates"}
"""The listings walked across servers, and the key of their items."""
PAGE_ITEMS = 100
"""A page of ours takes the next server's first page while it holds fewer items than this
(so a run of servers that each list one page is one page); a server's own cursor ends it."""
REQUEST_SECONDS = 30.0
MAX_SUBSCRIPTIONS = 256
"""Resource subscriptions one agent session (or listen stream) may hold: each may cost an
upstream request, and the bridge remembers them."""
"""Deadline of one upstream request of these methods."""


def not_found(uri: str) -> tuple[int, str, Any]:
    """Invalid params naming the URI (cut: the agent chose it)."""
    shown = cut(uri, 256)
    return INVALID_PARAMS, f"Resource not found: {shown}", {"uri": shown}


class _Refused(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


@dataclass
class AgentInterest:
    """What one agent session asked for: its log level and its resource subscriptions."""

    log_level: str | None = None
    subscriptions: set[str] = field(default_factory=set)
    """Exposed URIs."""


def call_log(
    level: str | None, message: Mapping[str, Any], scrubber: Scrubber
) -> dict[str, Any] | None:
    """A log message a server sent on a call's own stream, as its agent gets it: only
    when ``level`` (the agent's: its session's, or its request's) reaches it."""
    params = message.get("params")
    if (
        message.get("method") != "notifications/message"
        or not isinstance(params, dict)
        or params.get("level") not in LOG_LEVELS
        or level not in LOG_LEVELS
        or LOG_LEVELS.index(str(params["level"])) < LOG_LEVELS.index(str(level))
    ):
        return None
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": scrubber.json(params)}


def capabilities(states: Mapping[str, ServerState], *, modern: bool) -> dict[str, Any]:
    """The bridge's server capabilities: tools always, the others when some upstream has
    them (list-changed and subscribe only where the era has a stream to carry them)."""
    del modern  # both eras alike: legacy sessions' GET streams, 2026-07-28 listen streams
    caps: dict[str, Any] = {"tools": {"listChanged": True}}
    offered = [s.upstream.capabilities for s in states.values() if s.problem is None]
    if any(c.prompts is not None for c in offered):
        caps["prompts"] = {"listChanged": True}
    if any(c.resources is not None for c in offered):
        subscribe = any(c.resources is not None and c.resources.subscribe for c in offered)
        caps["resources"] = {"listChanged": True, "subscribe": subscribe}
    if any(c.completions is not None for c in offered):
        caps["completions"] = {}
    if any(c.logging is not None for c in offered):
        caps["logging"] = {}
    return caps


class Aggregator:
    """The non-tool methods of one bridge, over its upstream pool."""

    def __init__(self, pool: UpstreamPool, codec: CursorCodec | None = None) -> None:
        self.pool = pool
        self.codec = codec or CursorCodec()
        self.page_items = PAGE_ITEMS
        self.interests: dict[str, AgentInterest] = {}
        """Agent session id → what it asked for."""

    @property
    def prompts(self) -> PromptCatalog:
        return self.pool.prompts

    # -- routing -----------------------------------------------------------------------------

    def _usable(self) -> list[ServerState]:
        return [self.pool.states[k] for k in self._keys() if self.pool.states[k].problem is None]

    def _keys(self) -> list[str]:
        return [server_key(s) for s in self.pool.servers if server_key(s) in self.pool.states]

    def route(self, uri: str) -> tuple[ServerState, str] | None:
        """The server an exposed URI (or URI template) belongs to and its own URI: a prefixed
        server whose namespace it carries first, in the configuration's order, then the
        first unprefixed server; ``None`` when none has it or the filters hide it."""
        states = self._usable()
        found: tuple[ServerState, str] | None = None
        for state in states:
            if state.server.prefix:
                original = original_uri(state.server.prefix, uri)
                if original is not None:
                    found = (state, original)
                    break
        if found is None:
            bare = [state for state in states if not state.server.prefix]
            found = (bare[0], uri) if bare else None
        if found is None or not resource_allowed(found[0].server.filters, found[1]):
            return None
        return found

    def _exposed(self, state: ServerState, uri: str) -> str | None:
        """The exposed URI of ``state``'s ``uri``, when it routes back to that server and
        passes the filters (else the item is not shown)."""
        if not resource_allowed(state.server.filters, uri):
            return None
        exposed = exposed_uri(state.server.prefix, uri)
        routed = self.route(exposed)
        return exposed if routed is not None and routed[0] is state else None

    # -- requests ----------------------------------------------------------------------------

    async def answer(
        self, request_id: RequestId, method: str, params: Any, session: str | None = None
    ) -> dict[str, Any]:
        """The JSON-RPC response to one of :data:`METHODS`."""
        feature = FEATURES[method]
        if feature not in capabilities(self.pool.states, modern=False):
            text = f"Method not found: {method} (no server of this run offers {feature})"
            return error_response(request_id, METHOD_NOT_FOUND, text)
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return error_response(request_id, INVALID_PARAMS, "Invalid params: not an object")
        try:
            result = await self._answer(method, params, session)
        except _Refused as refused:
            message = error_response(request_id, refused.code, refused.message)
            if refused.data is not None:
                message["error"]["data"] = refused.data
            return message
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    async def _answer(self, method: str, params: dict[str, Any], session: str | None) -> Any:
        if method == "prompts/list":
            if params.get("cursor") is not None:
                raise _Refused(INVALID_PARAMS, "Invalid params: unknown cursor")
            return {"prompts": self.pool.scrubber.json(self.prompts.listing())}
        if method == "prompts/get":
            entry = self.prompts.get(str(params.get("name")))
            if entry is None:
                raise _Refused(INVALID_PARAMS, f"Unknown prompt: {params.get('name')!r:.80}")
            state = self.pool.states.get(entry.server)
            if state is None or state.problem is not None:
                raise _Refused(INTERNAL_ERROR, f"The server of prompt {entry.exposed_name} is out")
            return await self._forward(state, method, {**params, "name": entry.original_name})
        if method in LISTINGS:
            return await self._listing(method, params)
        if method == "resources/read":
            return await self._read(params)
        if method in ("resources/subscribe", "resources/unsubscribe"):
            return await self._subscription(method, params, session)
        if method == "completion/complete":
            return await self._complete(params)
        if method == "logging/setLevel":
            return await self._set_level(params, session)
        raise _Refused(INVALID_PARAMS, f"Unsupported method {method}")

    async def _forward(self, state: ServerState, method: str, params: dict[str, Any]) -> Any:
        if not state.upstream.modern:  # a legacy server gets no 2026-07-28 envelope
            params = era.strip_envelope(params)
        relay = relay_of_call()
        try:
            if relay is not None and method in ("prompts/get", "resources/read"):
                # The server may ask the agent something meanwhile: the front's relay carries
                # it (a legacy agent's SSE, a 2026-07-28 agent's input_required rounds).
                relay.scrubber = self.pool.scrubber
                answer = await relay.request(state.upstream, method, params, REQUEST_SECONDS)
            else:
                answer = await state.upstream.request(method, params, REQUEST_SECONDS)
            # The bridge answers its agent itself: no era's stamp of the server's stays on it.
            return era.plain_result(answer)
        except McpFailure as failure:
            name = server_key(state.server)
            if failure.code is not None and failure.kind == "error":
                words = self.pool.scrubber(failure.detail or failure.message)
                data = failure.data
                if isinstance(data, dict) and isinstance(data.get("uri"), str):
                    data = {**data, "uri": exposed_uri(state.server.prefix, data["uri"])}
                raise _Refused(failure.code, words, data) from None
            told = self.pool.scrubber(failure.message)
            text = f"Server {name} could not answer {method}: {told}"
            raise _Refused(INTERNAL_ERROR, text) from None

    async def _listing(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        key = LISTINGS[method]
        states = [s for s in self._usable() if s.upstream.capabilities.resources is not None]
        try:
            position = (
                Position(server_key(states[0].server), None)
                if params.get("cursor") is None and states
                else self.codec.decode(method, params.get("cursor"))
            )
        except InvalidCursor as error:
            raise _Refused(INVALID_PARAMS, f"Invalid params: {error}") from None
        if not states:
            return {key: []}
        keys = [server_key(s.server) for s in states]
        if position.server not in keys:
            raise _Refused(INVALID_PARAMS, "Invalid params: the cursor's server is gone")
        at = keys.index(position.server)
        cursor = position.cursor
        items: list[dict[str, Any]] = []
        next_position: Position | None = None
        while True:
            state = states[at]
            page = await self._page(state, method, key, cursor)
            field_name = "uri" if key == "resources" else "uriTemplate"
            for item in page.get(key) or ():
                if not isinstance(item, dict) or not isinstance(item.get(field_name), str):
                    continue
                exposed = self._exposed(state, item[field_name])
                if exposed is not None:
                    items.append({**item, field_name: exposed})
            following = page.get("nextCursor")
            if isinstance(following, str):
                next_position = Position(keys[at], following)
            elif at + 1 < len(states):
                next_position = Position(keys[at + 1], None)
            else:
                next_position = None
            if (
                next_position is None
                or next_position.server == keys[at]
                or len(items) >= self.page_items
            ):
                break
            at, cursor = at + 1, None  # a server's last page: the next server's goes on it
        result: dict[str, Any] = {key: self.pool.scrubber.json(items)}
        if next_position is not None:
            result["nextCursor"] = self.codec.encode(method, next_position)
        return result

    async def _page(
        self, state: ServerState, method: str, key: str, cursor: str | None
    ) -> dict[str, Any]:
        params = {} if cursor is None else {"cursor": cursor}
        try:
            page = await state.upstream.request(method, params, REQUEST_SECONDS)
        except McpFailure as failure:
            told = self.pool.scrubber(failure.message)
            logger.warning("Left server %s out of %s: %s", server_key(state.server), method, told)
            return {}
        return page if isinstance(page.get(key, []), list) else {}

    async def _read(self, params: dict[str, Any]) -> Any:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise _Refused(INVALID_PARAMS, "Invalid params: uri must be a string")
        routed = self.route(uri)
        if routed is None:
            raise _Refused(*not_found(uri))
        state, original = routed
        result = await self._forward(state, "resources/read", {**params, "uri": original})
        contents = result.get("contents") if isinstance(result, dict) else None
        if isinstance(contents, list):
            result = {
                **result,
                "contents": [
                    {**c, "uri": exposed_uri(state.server.prefix, c["uri"])}
                    if isinstance(c, dict) and isinstance(c.get("uri"), str)
                    else c
                    for c in contents
                ],
            }
        return result

    async def _subscription(self, method: str, params: dict[str, Any], session: str | None) -> Any:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise _Refused(INVALID_PARAMS, "Invalid params: uri must be a string")
        routed = self.route(uri)
        if routed is None:
            raise _Refused(*not_found(uri))
        state, original = routed
        interest = self.interests.setdefault(session or "", AgentInterest())
        others = any(
            uri in other.subscriptions for key, other in self.interests.items() if key != session
        )
        if method == "resources/subscribe":
            if (
                uri not in interest.subscriptions
                and len(interest.subscriptions) >= MAX_SUBSCRIPTIONS
            ):
                raise _Refused(INVALID_PARAMS, f"At most {MAX_SUBSCRIPTIONS} subscriptions")
            interest.subscriptions.add(uri)
        else:
            interest.subscriptions.discard(uri)
        if state.upstream.modern:
            # 2026-07-28 has no resources/subscribe: the server's listen stream names them.
            self._listen_for(state)
        elif not others:
            await self._forward(state, method, {**params, "uri": original})
        return {}

    def _listen_for(self, state: ServerState) -> None:
        """Ask a 2026-07-28 server's listen stream for the URIs its agents subscribed to
        (the stream is opened again with the new filter)."""
        wanted = sorted(
            original
            for interest in self.interests.values()
            for uri in interest.subscriptions
            if (routed := self.route(uri)) is not None and routed[0] is state
            for original in (routed[1],)
        )
        if wanted != state.upstream.listen_filter.get("resourceSubscriptions", []):
            state.upstream.listen_filter["resourceSubscriptions"] = wanted
            self.pool.refollow(server_key(state.server))

    async def _complete(self, params: dict[str, Any]) -> Any:
        ref = params.get("ref")
        if not isinstance(ref, dict):
            raise _Refused(INVALID_PARAMS, "Invalid params: ref must be an object")
        if ref.get("type") == "ref/prompt":
            entry = self.prompts.get(str(ref.get("name")))
            state = self.pool.states.get(entry.server) if entry is not None else None
            if entry is None or state is None:
                raise _Refused(INVALID_PARAMS, f"Unknown prompt: {ref.get('name')!r:.80}")
            sent = {**params, "ref": {**ref, "name": entry.original_name}}
            return await self._forward(state, "completion/complete", sent)
        if ref.get("type") == "ref/resource" and isinstance(ref.get("uri"), str):
            routed = self.route(ref["uri"])
            if routed is None:
                raise _Refused(*not_found(ref["uri"]))
            state, original = routed
            sent = {**params, "ref": {**ref, "uri": original}}
            return await self._forward(state, "completion/complete", sent)
        raise _Refused(INVALID_PARAMS, "Invalid params: ref must be a ref/prompt or ref/resource")

    async def _set_level(self, params: dict[str, Any], session: str | None) -> Any:
        level = params.get("level")
        if level not in LOG_LEVELS:
            raise _Refused(INVALID_PARAMS, f"Invalid params: level must be one of {LOG_LEVELS}")
        self.interests.setdefault(session or "", AgentInterest()).log_level = str(level)
        # The upstream logs at the most verbose level any agent session asked for.
        wanted = min(
            (LOG_LEVELS.index(i.log_level) for i in self.interests.values() if i.log_level),
            default=LOG_LEVELS.index(str(level)),
        )
        for state in self._usable():
            # 2026-07-28 carries the level in each request's _meta, not in logging/setLevel.
            if state.upstream.capabilities.logging is not None and not state.upstream.modern:
                try:
                    await state.upstream.request(
                        "logging/setLevel", {"level": LOG_LEVELS[wanted]}, REQUEST_SECONDS
                    )
                except McpFailure as failure:
                    told = self.pool.scrubber(failure.message)
                    logger.info("Could not set the log level of %s: %s", state.upstream.name, told)
        return {}

    # -- notifications from upstreams --------------------------------------------------------

    async def listen(self, key: str, uris: Iterable[str]) -> None:
        """A 2026-07-28 listen stream of the agent (``key``) subscribed to ``uris``, each
        fanned out to its server as a legacy subscription would be (one it cannot route is
        left out: nothing would ever update it)."""
        self.interests[key] = AgentInterest()
        for uri in uris:
            try:
                await self._subscription("resources/subscribe", {"uri": uri}, key)
            except _Refused as refused:
                logger.debug("Left %s out of a listen stream: %s", uri, refused.message)

    async def forget(self, session: str) -> None:
        """An agent session (or listen stream) ended: nothing more is delivered to it, and
        the servers are told of the subscriptions nobody else holds."""
        interest = self.interests.get(session)
        for uri in sorted(interest.subscriptions if interest is not None else ()):
            try:
                await self._subscription("resources/unsubscribe", {"uri": uri}, session)
            except _Refused as refused:
                logger.debug("Could not unsubscribe from %s: %s", uri, refused.message)
        self.interests.pop(session, None)

    def session_level(self, session: str) -> str | None:
        """The log level a legacy agent session set (None: it asked for no logs)."""
        interest = self.interests.get(session)
        return interest.log_level if interest is not None else None

    def notice(self, server: str, message: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """Where an upstream's notification goes: ``(agent session, message)`` pairs, the
        URIs rewritten (a resource update only to its subscribers, a log message only to
        sessions that set a level it reaches)."""
        state = self.pool.states.get(server)
        if state is None:
            return []
        method = message.get("method")
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        assert isinstance(params, dict)
        out: list[tuple[str, dict[str, Any]]] = []
        if method == "notifications/resources/updated" and isinstance(params.get("uri"), str):
            exposed = self._exposed(state, params["uri"])
            if exposed is None:
                return []
            sent = {"jsonrpc": "2.0", "method": method, "params": {**params, "uri": exposed}}
            for session, interest in self.interests.items():
                if exposed in interest.subscriptions:
                    out.append((session, sent))
        elif method == "notifications/message" and params.get("level") in LOG_LEVELS:
            level = LOG_LEVELS.index(str(params["level"]))
            sent = {"jsonrpc": "2.0", "method": method, "params": self.pool.scrubber.json(params)}
            for session, interest in self.interests.items():
                if interest.log_level is not None and LOG_LEVELS.index(interest.log_level) <= level:
                    out.append((session, sent))
        return out
