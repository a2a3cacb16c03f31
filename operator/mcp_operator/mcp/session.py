"""One MCP client session over Streamable HTTP, in either era: the probe's and the bridge's.

The probe (:mod:`~mcp_operator.mcp.streamable`, for :mod:`~mcp_operator.mcp.discovery`) and
the bridge (:mod:`~mcp_operator.bridge.upstreams`) speak to MCP servers through this one
:class:`McpSession`, over the keep-alive pool; so they agree on every rule of the wire:

- **Era**: ``server/discover`` first at the newest modern version (or straight to the
  handshake when the server's status said it speaks a legacy one); ``-32022`` naming a
  mutual modern version is retried once at that version, naming only modern versions we do
  not share fails; any other rejection, no answer within ``discover_seconds``, or a result
  without a mutual modern version falls back to ``initialize`` (the SDK's ``mode="auto"``).
- **Answers** are JSON or an SSE stream (one reader, :mod:`~mcp_operator.mcp.sse`). Every
  answer's id is checked against its request, strictly by type and value (``true`` and
  ``"1"`` are not ``1``), for JSON and SSE alike: a response to another request means the
  connection is out of step, so it is dropped and the call fails; it is never a result.
- **A lost legacy session** (404, or a 400 that names the session, as many deployed servers
  answer) is established again once per request.
- **Pages** follow one rule (:class:`~mcp_operator.mcp.bounds.Paginator`): only an absent
  ``nextCursor`` ends a listing, ``""`` is a cursor in every era; a loop, too many pages or
  too many items is an error, never a silently shortened list.
- **A cut answer stream** of a legacy session's request, whose events had ids, is resumed
  with ``GET`` + ``Last-Event-ID`` (2025-11-25 "Resumability and Redelivery"), never by
  sending the request again; bounded in reopenings and by the caller's deadline.
- **Change streams** (:meth:`McpSession.changes`): the legacy session's GET stream, or the
  answer to 2026-07-28's ``subscriptions/listen``; :func:`follow` keeps one open.
- **Related messages**: a caller that passes ``related`` to :meth:`McpSession.request`
  hears every request and notification the server sends on that request's own response
  stream (sampling, elicitation, roots, progress: how a server speaks of the call in
  flight), answers requests with :meth:`McpSession.respond`, and, when the request is
  cancelled, the server is told (legacy: ``notifications/cancelled``; 2026-07-28: the
  request's stream is closed). Without ``related`` such messages are skipped. A server's
  request on a legacy session's GET stream belongs to no call and is refused.
- **Credentials** (:mod:`~mcp_operator.mcp.credentials`): their headers are asked for
  before every request (``POST``, ``GET`` stream, ``DELETE``) and merged after the static
  ones; a ``401``/``403`` (the auth layer refused, the server did not act) is reported to
  them, and the one request is sent once more only when they say new headers are worth it.
- **Failures** are one type, :class:`~mcp_operator.mcp.failures.McpFailure`: a ``fault``
  (what broke), the ``kind`` a caller acts on (``unavailable``, ``timeout``, ``error``), and
  the JSON-RPC ``code`` and ``data`` when the server answered with a JSON-RPC error. The
  probe turns it into a reason (:mod:`~mcp_operator.mcp.translation`), the bridge into the
  agent's tool error.

How an answer's body is read is the caller's (``read_body``): the probe counts and cuts its
pages on arrival under its byte budget, the bridge caps each answer's bytes
(:func:`~mcp_operator.mcp.bounds.capped`). The small rules of the messages themselves are
:mod:`~mcp_operator.mcp.messages`'.

The SDK stays where it earns its place: its constants and its models validate what the
session reads (``DiscoverResult``, ``InitializeResult``), and its own client serves the
legacy HTTP+SSE transport for the probe (:func:`~mcp_operator.mcp.client.connect`); the
bridge's session of that transport is :mod:`~mcp_operator.mcp.legacy_sse`, this session's
conversation on that transport's wire.

Header values (credentials) never appear in messages or reprs.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any, Protocol

import mcp_types as types
from mcp.shared.inbound import NAME_BEARING_METHODS, encode_header_value, mcp_param_headers
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    LATEST_MODERN_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)
from pydantic import ValidationError

from mcp_operator import tracing
from mcp_operator.mcp import messages, sse
from mcp_operator.mcp.bounds import BodyReader, Capped, Paginator, capped
from mcp_operator.mcp.credentials import Credentials, CredentialsError
from mcp_operator.mcp.failures import Fault, McpFailure
from mcp_operator.mcp.resume import MAX_EVENT_ID_CHARS, MAX_RESUMES, RESUME_ATTEMPTS, StreamCursor
from mcp_operator.net import jsoncodec
from mcp_operator.net.egress import EgressPolicy
from mcp_operator.net.http1 import Http1Error, Http1Response
from mcp_operator.net.pool import Http1Pool

logger = logging.getLogger(__name__)


DISCOVER_SECONDS = 10.0
"""``server/discover`` unanswered this long: a legacy server (the SDK's own bound)."""
CLOSE_SECONDS = 2.0
"""A session's ``DELETE`` waits at most this long: its own deadline, never the caller's."""
ERROR_BODY_BYTES = 64 * 1024
"""Of an HTTP error's body, this much is read (a JSON-RPC error, a session complaint)."""
MAX_EVENT_BYTES = 1024 * 1024
"""One event of a change stream larger than this ends the stream."""
OPEN_STREAM_SECONDS = 10.0
"""A change stream's head is awaited this long; after it, a quiet stream is not bounded
(changes are rare)."""
REOPEN_SECONDS = 2.0
"""A change stream that ended or could not be opened is opened again after this pause."""
LIST_CHANGED = "notifications/tools/list_changed"
LISTEN_ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
PROTOCOL_HEADERS = frozenset(
    {
        "content-type",
        "accept",
        "accept-encoding",
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
        "mcp-session-id",
    }
)
"""Headers the session sets itself: a server's configured headers cannot replace them."""


class Related(Protocol):
    """Who hears what a server says on one request's response stream before answering it."""

    def heard(self, message: dict[str, Any]) -> None:
        """A request or notification of the server, about the request in flight; called in
        order as the stream is read (it must not block: answer later, with ``respond``)."""
        ...


class _SessionLost(Exception):
    """A legacy server said the session ``session_id`` is gone: handshake again."""

    def __init__(self, session_id: str | None) -> None:
        super().__init__("session lost")
        self.session_id = session_id


Pool = Http1Pool
"""The keep-alive connections sessions share (:mod:`~mcp_operator.net.pool`)."""


def session_pool(egress: EgressPolicy) -> Http1Pool:
    """A pool of keep-alive connections for sessions, under ``egress`` (the bridge's)."""
    return Http1Pool(egress=egress)


class McpSession:
    """One server's session: its URL and headers, the negotiated era, the legacy session id.

    ``name`` is how messages call the server (never a header value); ``client_info`` how
    the session introduces itself. Requests may run concurrently; connecting happens once
    at a time.
    """

    def __init__(
        self,
        url: str,
        pool: Http1Pool,
        *,
        name: str = "the server",
        headers: Mapping[str, str] | None = None,
        client_info: Mapping[str, str],
        protocol_hint: str | None = None,
        read_body: BodyReader | None = None,
        discover_seconds: float = DISCOVER_SECONDS,
        capabilities: Mapping[str, Any] | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        self.url = url
        self.credentials = credentials
        """Asked for headers before every request (:mod:`~mcp_operator.mcp.credentials`)."""
        self.name = name
        self._pool = pool
        self._headers = dict(headers or {})
        self._client_info = dict(client_info)
        self.protocol_hint = protocol_hint
        """The protocol version the server's status reported (a legacy one skips discovery)."""
        self._read_body = read_body or capped(8 * 1024 * 1024, name)
        self.discover_seconds = discover_seconds
        self._ids = itertools.count(1)
        self._connecting = asyncio.Lock()
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.capabilities = types.ServerCapabilities()
        self.server_info: types.Implementation | None = None
        self.client_capabilities = dict(capabilities or {})
        """What ``initialize`` declares (a 2026-07-28 request declares its own, in its
        ``_meta``; none: ``{}``)."""
        self._errands: set[asyncio.Task[None]] = set()
        """Notifications sent in the background (a cancelled request's)."""
        self.active = 0
        """Requests of ours in flight (:meth:`retire` waits for none)."""
        self._idle: asyncio.Event | None = None
        """Set when the last request in flight ends, while :meth:`retire` waits for it."""
        self.stream_cursor: tuple[str, str] | None = None
        """(session id, last event id) of the legacy change stream, when the server gave its
        events ids: a reopened stream asks to resume there (``Last-Event-ID``)."""
        self.stream_resumed = False
        """The change stream now open resumed the previous one: nothing was missed."""
        self.on_notice: Callable[[dict[str, Any]], None] | None = None
        """Called with every notification of the change stream other than the tools' list
        change (the bridge fans resource updates and log messages out to its agents)."""
        self.param_headers: dict[str, dict[tuple[str, ...], str]] = {}
        """Tool name → its ``x-mcp-header`` map (SDK ``x_mcp_header_map``), for the tools whose
        schema has one: a 2026-07-28 ``tools/call`` of such a tool carries its
        ``Mcp-Param-*`` headers (the lister fills it from the tools it listed)."""
        self.listen_filter: dict[str, Any] = {}
        """What a 2026-07-28 ``subscriptions/listen`` asks for besides the tools' list
        changes (``promptsListChanged``, ``resourceSubscriptions`` …)."""

    def __repr__(self) -> str:
        return f"McpSession(name={self.name!r}, url={messages.display_url(self.url)!r})"

    @property
    def modern(self) -> bool:
        return self.protocol_version in MODERN_PROTOCOL_VERSIONS

    @property
    def connected(self) -> bool:
        return self.protocol_version is not None

    @property
    def announces_changes(self) -> bool:
        """Whether the server said it announces tool list changes."""
        tools = self.capabilities.tools
        return self.connected and tools is not None and tools.list_changed is True

    @property
    def announces_notices(self) -> bool:
        """Whether a change stream is worth following: the server announces tool list
        changes, or (for a session with :attr:`on_notice`) it has prompts, resources or
        logging, whose notifications the stream carries."""
        if self.announces_changes:
            return True
        caps = self.capabilities
        others = (caps.prompts, caps.resources, caps.logging)
        return self.connected and self.on_notice is not None and any(c is not None for c in others)

    def reset(self) -> None:
        """Forget the negotiated era and session (the next request connects anew)."""
        self.protocol_version = None
        self.session_id = None

    # -- connecting ------------------------------------------------------------------------

    async def connect(self) -> None:
        """Negotiate the era, once at a time (a no-op when connected)."""
        async with self._connecting:
            if self.connected:
                return
            legacy_hint = self.protocol_hint is not None and (
                self.protocol_hint not in MODERN_PROTOCOL_VERSIONS
            )
            if legacy_hint:
                await self._initialize()
            else:
                await self._negotiate()

    async def _negotiate(self) -> None:
        """``server/discover`` as the SDK's ``mode="auto"`` does; else the handshake."""
        version = LATEST_MODERN_VERSION
        for attempt in range(2):
            raw: dict[str, Any] | None = None
            try:
                # As the SDK: a server that never answers an unknown method is a legacy one.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.discover_seconds):
                        raw = await self._exchange("server/discover", {}, modern=version)
            except McpFailure as failure:
                if failure.fault in ("connect", "timeout", "limit") or failure.__cause__:
                    raise  # no answer at all (or too much of one): not a legacy server's sign
                if failure.status in (401, 403):
                    raise  # the auth layer refused: no sign of the era either
                if failure.code == UNSUPPORTED_PROTOCOL_VERSION:
                    supported = messages.supported(failure.data)
                    mutual = [v for v in MODERN_PROTOCOL_VERSIONS if v in (supported or ())]
                    if mutual and attempt == 0:
                        version = mutual[-1]
                        continue
                    legacy = set(supported or ()) & {*HANDSHAKE_PROTOCOL_VERSIONS}
                    if supported is not None and not legacy:
                        raise  # a modern-only server that shares no version with us
                await self._initialize()  # any other rejection: a legacy server
                return
            if raw is None:  # no answer in time
                await self._initialize()
                return
            try:
                result = types.DiscoverResult.model_validate(messages.clamped(raw))
            except ValidationError:
                await self._initialize()
                return
            mutual = [v for v in MODERN_PROTOCOL_VERSIONS if v in result.supported_versions]
            if not mutual:  # a discover-answering server that advertises only legacy versions
                await self._initialize()
                return
            self.session_id = None
            self.protocol_version = mutual[-1]
            self.capabilities = result.capabilities
            self.server_info = messages.implementation(
                (result.meta or {}).get(SERVER_INFO_META_KEY)
            )
            return

    async def _initialize(self) -> None:
        self.session_id = None
        params = {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": self.client_capabilities,
            "clientInfo": self._client_info,
        }
        raw = await self._exchange("initialize", params)
        try:
            result = types.InitializeResult.model_validate(raw)
        except ValidationError as error:
            raise McpFailure(
                "mcp", f"{self.name} answered initialize with a result that is not MCP"
            ) from error
        if result.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            raise McpFailure(
                "mcp",
                f"the server chose protocol version {result.protocol_version}, "
                "which this client does not speak",
            )
        self.protocol_version = result.protocol_version
        self.capabilities = result.capabilities
        self.server_info = result.server_info
        await self._notify("notifications/initialized")

    # -- requests --------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: Mapping[str, Any],
        seconds: float | None = None,
        *,
        related: Related | None = None,
    ) -> dict[str, Any]:
        """One request in the negotiated era (connecting first if need be); a lost legacy
        session is established again once. ``seconds`` bounds it all (a ``timeout``
        failure); without it the caller's own deadline does. ``related`` hears what the
        server says on the request's stream, and cancelling the request tells the server.
        A client span when tracing is on, its context in the request's ``_meta``."""
        self.active += 1
        try:
            if tracing.ENABLED:
                with tracing.client(
                    method, params, server=self.name, session_id=self.session_id
                ) as (span, carried):
                    result = await self._timed(method, carried, seconds, related)
                    tracing.outcome(span, result)
                    return result
            return await self._timed(method, params, seconds, related)
        finally:
            self.active -= 1
            if not self.active and self._idle is not None:
                self._idle.set()

    async def _timed(
        self,
        method: str,
        params: Mapping[str, Any],
        seconds: float | None,
        related: Related | None,
    ) -> dict[str, Any]:
        if seconds is None:
            return await self._request(method, params, related)
        try:
            async with asyncio.timeout(seconds):
                return await self._request(method, params, related)
        except TimeoutError:
            raise McpFailure(
                "timeout", f"{self.name} did not answer {method} within {seconds:g}s"
            ) from None

    async def _request(
        self, method: str, params: Mapping[str, Any], related: Related | None = None
    ) -> dict[str, Any]:
        if not self.connected:
            await self.connect()
        try:
            return await self._exchange(method, params, related=related)
        except _SessionLost as lost:
            if self.session_id == lost.session_id:  # not yet replaced by a concurrent request
                self.reset()
            await self.connect()
            try:
                return await self._exchange(method, params, related=related)
            except _SessionLost:
                raise McpFailure(
                    "connection", f"{self.name} lost the session again at once"
                ) from None

    async def pages(
        self, method: str, key: str, seconds: float | None = None
    ) -> AsyncGenerator[list[Any], None]:
        """The items (under ``key``) of every page of a listing, page by page, walked by the
        :class:`Paginator`; ``seconds`` bounds each page."""
        walk = Paginator()
        cursor: str | None = None
        while True:
            params = {} if cursor is None else {"cursor": cursor}
            result = await self.request(method, params, seconds)
            items = result.get(key)
            if not isinstance(items, list):
                raise McpFailure("mcp", f"{self.name} answered {method} without a list of {key}")
            next_cursor = result.get("nextCursor")
            if next_cursor is not None and not isinstance(next_cursor, str):
                raise McpFailure("mcp", f"{self.name} answered {method} with a cursor not text")
            del result
            cursor = walk.advance(next_cursor, len(items))
            yield items
            if cursor is None:
                return

    async def retire(self, drain_seconds: float, seconds: float = CLOSE_SECONDS) -> None:
        """End the session (:meth:`close`) once no request of ours is in flight on it, or
        ``drain_seconds`` from now if some still are: a session replaced or removed by a
        reload lets its calls finish, then tells the server it is done."""
        if self.active:
            self._idle = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(drain_seconds):
                    while self.active:
                        await self._idle.wait()
                        self._idle.clear()
            self._idle = None
        await self.close(seconds)

    async def close(self, seconds: float = CLOSE_SECONDS) -> None:
        """End a legacy session (``DELETE``) within ``seconds`` of its own; a server that
        ignores it, stalls it or fails it is no failure (its session ends on its clock)."""
        if self.session_id is None or self.modern:
            return
        headers = self._request_headers("", None)
        try:
            async with asyncio.timeout(seconds):
                answer = await self._send("DELETE", headers, b"")
                await answer.aclose()
        except (TimeoutError, McpFailure, OSError):
            pass
        self.session_id = None

    async def respond(self, message: Mapping[str, Any]) -> None:
        """Send the server our answer to one of its requests (a JSON-RPC result or error with
        its id), on the legacy session it was asked in. The server's HTTP status is no
        failure (it may have given up on the request); no connection is."""
        body = jsoncodec.dumps(message)
        answer = await self._send("POST", self._request_headers("", None), body)
        await answer.aclose()

    def _tell_cancelled(self, request_id: int, session_id: str | None) -> None:
        """Tell a legacy server, in the background, that request ``request_id`` of session
        ``session_id`` is cancelled (the caller stopped waiting: nothing waits for this)."""
        if session_id is None or session_id != self.session_id:
            return  # the session is gone, and the request with it
        params = {"requestId": request_id, "reason": "The caller cancelled the request"}

        async def tell() -> None:
            with contextlib.suppress(McpFailure, OSError):
                async with asyncio.timeout(CLOSE_SECONDS):
                    await self._notify("notifications/cancelled", params)

        task = asyncio.get_running_loop().create_task(tell())
        self._errands.add(task)
        task.add_done_callback(self._errands.discard)

    async def _refuse_unrelated(self, message: Mapping[str, Any]) -> None:
        """Refuse a server request that came outside any call (a GET stream's): nothing ties
        it to a caller, so it is never sent to one."""
        request_id = message.get("id")
        if not isinstance(request_id, str | int) or isinstance(request_id, bool):
            return
        error = {"code": -32601, "message": f"{message.get('method')} belongs to no call"}
        with contextlib.suppress(McpFailure, OSError):
            async with asyncio.timeout(CLOSE_SECONDS):
                await self.respond({"jsonrpc": "2.0", "id": request_id, "error": error})

    # -- change streams --------------------------------------------------------------------

    async def changes(self) -> AsyncGenerator[bool, None]:
        """Open the stream the server announces tool list changes on (the legacy session's
        GET stream, or the answer to 2026-07-28's ``subscriptions/listen``): yield ``False``
        once it is open (a listen stream at its acknowledgement), then ``True`` per
        ``notifications/tools/list_changed``; ends when the stream does.

        Raises:
            McpFailure: the stream could not be opened (not connected, a refusal).
        """
        if not self.connected:
            await self.connect()
        try:
            async with asyncio.timeout(OPEN_STREAM_SECONDS):
                answer = await self._open_changes()
        except TimeoutError:
            raise McpFailure(
                "timeout",
                f"{self.name} did not open a change stream within {OPEN_STREAM_SECONDS:g}s",
            ) from None
        try:
            media = messages.media(answer)
            if answer.status_code != 200 or media != "text/event-stream":
                self.stream_cursor = None  # a refused resume: the next open starts afresh
                raise McpFailure(
                    "http",
                    f"{self.name} did not open a change stream (HTTP {answer.status_code})",
                    status=answer.status_code,
                )
            # A 2026-07-28 server subscribes before it acknowledges: only then is it open.
            acknowledged = not self.modern
            if acknowledged:
                yield False
            async for data in sse.messages(
                answer.aiter_bytes(), MAX_EVENT_BYTES, on_id=self._saw_event_id
            ):
                message = messages.loads(data)
                method = message.get("method") if isinstance(message, dict) else None
                if method == LISTEN_ACKNOWLEDGED and not acknowledged:
                    acknowledged = True
                    yield False
                elif method == LIST_CHANGED:
                    yield True
                elif isinstance(message, dict) and "id" in message and "method" in message:
                    await self._refuse_unrelated(message)
                elif messages.is_notice(message) and self.on_notice is not None:
                    self.on_notice(message)
        except (Http1Error, OSError, sse.EventTooLarge):
            return  # the stream ended: the follower opens it again
        finally:
            answer.discard()

    async def _open_changes(self) -> Http1Response:
        """The request whose answer carries the change notifications, in the era."""
        if self.modern:
            request_id = next(self._ids)
            wanted = {"toolsListChanged": True, **self.listen_filter}
            params = self._stamped({"notifications": wanted}, None)
            body = messages.body(request_id, "subscriptions/listen", params)
            headers = self._request_headers("subscriptions/listen", None)
            return await self._send("POST", headers, body)
        headers = self._request_headers("", None)
        headers["accept"] = "text/event-stream"
        del headers["content-type"]
        cursor = self.stream_cursor
        self.stream_resumed = cursor is not None and cursor[0] == self.session_id
        if cursor is not None and self.stream_resumed:
            headers["last-event-id"] = cursor[1]
        return await self._send("GET", headers, b"")

    def _saw_event_id(self, event_id: str) -> None:
        if self.session_id is not None and len(event_id) <= MAX_EVENT_ID_CHARS:
            self.stream_cursor = (self.session_id, event_id)

    # -- the wire --------------------------------------------------------------------------

    def _request_headers(
        self, method: str, modern: str | None, params: Mapping[str, Any] | None = None
    ) -> dict[str, str]:
        configured = {name.lower() for name in self._headers}
        headers = {} if "authorization" in configured else messages.userinfo_auth(self.url)
        headers.update(
            (name, value)
            for name, value in self._headers.items()
            if name.lower() not in PROTOCOL_HEADERS  # the protocol's own win, once
        )
        headers["content-type"] = "application/json"
        headers["accept"] = "application/json, text/event-stream"
        # Identity: a compressed body could inflate past its bound after it was counted.
        headers["accept-encoding"] = "identity"
        version = modern or self.protocol_version
        if version is not None:
            headers["mcp-protocol-version"] = version
        if version in MODERN_PROTOCOL_VERSIONS:
            headers["mcp-method"] = method
            key = NAME_BEARING_METHODS.get(method)
            name = (params or {}).get(key) if key is not None else None
            if isinstance(name, str):
                headers["mcp-name"] = encode_header_value(name)
            calls = method == "tools/call" and isinstance(name, str)
            header_map = self.param_headers.get(name) if calls and isinstance(name, str) else None
            arguments = (params or {}).get("arguments")
            if header_map and isinstance(arguments, Mapping):
                headers.update(mcp_param_headers(header_map, arguments))
        elif self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        return headers

    def _stamped(self, params: Mapping[str, Any], modern: str | None) -> dict[str, Any]:
        """``params`` with 2026-07-28's per-request ``_meta`` when the era (or ``modern``)
        asks for it."""
        version = modern or (self.protocol_version if self.modern else None)
        if version is None:
            return dict(params)
        meta = dict(params.get("_meta") or {})
        meta[PROTOCOL_VERSION_META_KEY] = version
        meta[CLIENT_INFO_META_KEY] = self._client_info
        meta.setdefault(CLIENT_CAPABILITIES_META_KEY, {})  # the caller's, when it gave them
        return {**params, "_meta": meta}

    async def _send(self, verb: str, headers: Mapping[str, str], body: bytes) -> Http1Response:
        """Send one request with the credentials' headers; after a ``401``/``403`` that the
        credentials say fresh headers may cure, once more (the auth layer refused it, so the
        server did not act on it: this is no resend of a request that may have been read)."""
        credentials = self.credentials
        if credentials is None:
            return await self._transmit(verb, headers, body)
        answer = await self._transmit(verb, await self._authorized(credentials, headers), body)
        if answer.status_code not in (401, 403):
            return answer
        challenge = answer.headers.get("www-authenticate")
        if not await credentials.rejected(answer.status_code, challenge):
            return answer
        await answer.aclose()
        return await self._transmit(verb, await self._authorized(credentials, headers), body)

    async def _authorized(
        self, credentials: Credentials, headers: Mapping[str, str]
    ) -> dict[str, str]:
        """``headers`` with the credentials' merged over them (case-insensitively; never
        over the protocol's own)."""
        try:
            extra = await credentials.headers()
        except CredentialsError as error:
            raise McpFailure("credentials", f"no credentials for {self.name}: {error}") from None
        names = {name.lower() for name in extra} - PROTOCOL_HEADERS
        merged = {name: value for name, value in headers.items() if name.lower() not in names}
        merged.update((name, value) for name, value in extra.items() if name.lower() in names)
        return merged

    def _target(self, verb: str) -> str:
        """Where a request with ``verb`` goes: the server's URL (every request of Streamable
        HTTP; the legacy HTTP+SSE transport posts elsewhere)."""
        return self.url

    async def _transmit(self, verb: str, headers: Mapping[str, str], body: bytes) -> Http1Response:
        try:
            return await self._pool.request(verb, self._target(verb), headers, body)
        except Http1Error as error:
            fault: Fault = "connect" if error.kind == "connect" else "connection"
            what = (
                f"could not connect to {self.name}"
                if fault == "connect"
                else (f"the connection to {self.name} failed ({error})")
            )
            raise McpFailure(fault, what) from error

    async def _exchange(
        self,
        method: str,
        params: Mapping[str, Any],
        *,
        modern: str | None = None,
        related: Related | None = None,
    ) -> dict[str, Any]:
        """One request on the wire; its result, or the failure it got. With ``related``, a
        cancelled exchange tells the server (legacy: ``notifications/cancelled``; 2026-07-28:
        the request's stream closed)."""
        params = self._stamped(params, modern)
        request_id = next(self._ids)
        body = messages.body(request_id, method, params)
        headers = self._request_headers(method, modern, params)
        session_id = self.session_id if modern is None else None
        legacy = not self.modern and modern is None
        try:
            answer = await self._send("POST", headers, body)
        except asyncio.CancelledError:
            if related is not None and legacy:
                self._tell_cancelled(request_id, session_id)  # it may have been sent
            raise
        answer.hold()  # its connection carries nothing else until the answer is checked
        try:
            status = answer.status_code
            if 300 <= status < 400 and answer.headers.get("location"):
                where = messages.display_url(answer.headers["location"])
                raise McpFailure(
                    "mcp",
                    f"HTTP {status} redirect to {where}, which is not followed: use that URL "
                    "as the server's endpoint",
                )
            if status >= 300:
                await self._refusal(answer, method, session_id)
            if method == "initialize":
                self.session_id = answer.headers.get("mcp-session-id")
            resume = (session_id, method) if legacy and session_id is not None else None
            reply = await self._reply(answer, request_id, related, resume)
        except asyncio.CancelledError:
            if related is not None:
                answer.discard()  # the stream closed: how a 2026-07-28 server hears it
                if legacy:
                    self._tell_cancelled(request_id, session_id)
            raise
        except Http1Error as error:
            raise McpFailure(
                "connection", f"the connection to {self.name} failed ({error})"
            ) from error
        finally:
            await answer.aclose()
        return self._result(method, reply)

    async def _refusal(self, answer: Http1Response, method: str, session_id: str | None) -> None:
        """Raise what an HTTP error status means: a lost session, or an ``http`` failure
        with the JSON-RPC error its body carried."""
        status = answer.status_code
        body = b""
        async for chunk in answer.aiter_bytes():
            body += chunk
            if len(body) > ERROR_BODY_BYTES:
                break
        if session_id is not None and (
            status == 404 or (status == 400 and b"session" in body.lower())
        ):
            raise _SessionLost(session_id)
        code: int | None = None
        data: Any = None
        detail: str | None = None
        if messages.media(answer) == "application/json" and len(body) <= ERROR_BODY_BYTES:
            error = messages.loads(body)
            error = error.get("error") if isinstance(error, dict) else None
            if isinstance(error, dict) and type(error.get("code")) is int:
                code, data = error["code"], error.get("data")
                detail = str(error.get("message", ""))
        raise McpFailure(
            "http",
            f"{self.name} answered {method} with HTTP {status}",
            status=status,
            code=code,
            data=data,
            detail=detail,
            challenge=answer.headers.get("www-authenticate") if status in (401, 403) else None,
        )

    async def _notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        body = jsoncodec.dumps(message)
        answer = await self._send("POST", self._request_headers(method, None), body)
        await answer.aclose()  # an error status is no failure: nothing answers a notification

    async def _reply(
        self,
        answer: Http1Response,
        request_id: int,
        related: Related | None = None,
        resume: tuple[str, str] | None = None,
    ) -> Mapping[str, Any]:
        """The JSON-RPC response to ``request_id``: a JSON body, or an event of an SSE
        stream (the requests and notifications before it go to ``related``, else are
        skipped). With ``resume`` (a legacy session's id and the method), a stream cut or
        ended after an event id and before the response is resumed (:meth:`_resumed`)."""
        media = messages.media(answer)
        if media not in ("application/json", "text/event-stream"):
            raise McpFailure("mcp", f"unexpected content type {media or 'none'!r}")
        if media == "application/json":
            reader = self._read_body
            if isinstance(reader, Capped) and (whole := answer.whole()) is not None:
                # A small answer comes in the read of its head: no reading loop.
                if len(whole) > reader.limit:
                    raise reader.refuse()
                message = self._decode(whole)
            else:
                chunks = reader(answer, "json")
                async with contextlib.aclosing(aiter(chunks)) as reading:  # type: ignore[type-var]
                    message = self._decode(b"".join([chunk async for chunk in reading]))
            if not messages.answers(message, request_id):
                answer.discard()
                raise McpFailure("mismatch", "the answer is not the response to the request")
            return message
        cursor = StreamCursor()
        try:
            found = await self._answer_in(answer, request_id, related, cursor)
        except Http1Error:
            if resume is None or cursor.last is None:
                raise
            found = None  # cut mid-stream, after an event id: resumable
        if found is not None:
            return found
        if resume is not None and cursor.last is not None:
            return await self._resumed(resume, request_id, related, cursor)
        raise McpFailure("connection", f"{self.name} ended the stream before answering")

    async def _answer_in(
        self,
        answer: Http1Response,
        request_id: int,
        related: Related | None,
        cursor: StreamCursor,
    ) -> Mapping[str, Any] | None:
        """The response to ``request_id`` on the SSE stream ``answer``, or ``None`` when the
        stream ended first; the requests and notifications before it go to ``related``,
        the events' ids to ``cursor``."""
        body = self._read_body(answer, "sse")
        events = sse.messages(body, on_id=cursor.saw, on_retry=cursor.asked_to_wait)
        async with contextlib.aclosing(events):
            async for data in events:
                message = self._decode(data)
                if messages.answers(message, request_id):
                    return message
                if related is not None and isinstance(message.get("method"), str):
                    related.heard(message)
                    continue
                if "method" not in message:  # a response, but to another request
                    answer.discard()
                    raise McpFailure("mismatch", "the answer is not the response to the request")
        return None

    async def _resumed(
        self,
        resume: tuple[str, str],
        request_id: int,
        related: Related | None,
        cursor: StreamCursor,
    ) -> Mapping[str, Any]:
        """The response to ``request_id`` after its answer stream was cut (or ended) before
        it, read on ``GET`` streams with ``Last-Event-ID`` (2025-11-25 "Resumability and
        Redelivery"; ``resume``: the legacy session and the method). The request itself is
        never sent again. Each reopening waits the server's SSE ``retry``, else a short
        back-off. Bounded: a refused ``GET`` fails the call, and so do
        :data:`RESUME_ATTEMPTS` reopenings in a row that bring no new event (a failed
        connection, a stream that replays nothing; a stream that ends cleanly after the
        server asked for a ``retry`` is a poll of a 2025-11-25 polling server, not counted),
        the session's end, or :data:`MAX_RESUMES` reopenings; the caller's deadline bounds
        it all."""
        session_id, method = resume
        idle = 0
        for reopened in range(1, MAX_RESUMES + 1):
            if self.session_id != session_id:
                raise McpFailure(
                    "connection",
                    f"{self.name} cut the answer stream of {method}, and its session ended "
                    "before the stream could be resumed",
                )
            await asyncio.sleep(cursor.pause(idle))
            seen = cursor.events
            polled = False
            try:
                found = await self._reopen(method, request_id, related, cursor)
                # a stream that ended cleanly after the server asked for a retry: its poll
                polled = cursor.retry is not None
            except McpFailure as failure:
                if failure.fault not in ("connect", "connection") or failure.status is not None:
                    raise
                logger.debug("Could not resume %s of %s: %s", method, self.name, failure)
                found = None
            if found is not None:
                logger.info(
                    "Resumed the answer stream of %s of %s (%d reopenings)",
                    method,
                    self.name,
                    reopened,
                )
                return found
            idle = 0 if cursor.events > seen or polled else idle + 1
            if idle >= RESUME_ATTEMPTS:
                raise McpFailure(
                    "connection",
                    f"{self.name} cut the answer stream of {method}; {RESUME_ATTEMPTS} "
                    "attempts to resume it with Last-Event-ID replayed nothing",
                )
        raise McpFailure(
            "connection",
            f"{self.name} cut the answer stream of {method} more than {MAX_RESUMES} times",
        )

    async def _reopen(
        self, method: str, request_id: int, related: Related | None, cursor: StreamCursor
    ) -> Mapping[str, Any] | None:
        """One ``GET`` with ``Last-Event-ID``: the response, if it came; ``None`` when the
        stream ended first. A refusal fails the call with its status; a stream that broke is
        a ``connection`` failure without one."""
        headers = self._request_headers("", None)
        headers["accept"] = "text/event-stream"
        del headers["content-type"]
        headers["last-event-id"] = cursor.last or ""
        answer = await self._send("GET", headers, b"")
        answer.hold()
        try:
            media = messages.media(answer)
            if answer.status_code != 200 or media != "text/event-stream":
                answer.discard()
                raise McpFailure(
                    "connection",
                    f"{self.name} cut the answer stream of {method} and refused to resume it "
                    f"(HTTP {answer.status_code} to GET with Last-Event-ID)",
                    status=answer.status_code,
                )
            try:
                return await self._answer_in(answer, request_id, related, cursor)
            except Http1Error as error:
                raise McpFailure(
                    "connection", f"the resumed stream of {method} from {self.name} broke"
                ) from error
        except asyncio.CancelledError:
            answer.discard()  # the resumed stream closed: the caller stopped waiting
            raise
        finally:
            await answer.aclose()

    def _decode(self, text: bytes) -> dict[str, Any]:
        message = messages.loads(text)
        if message is messages.NOT_JSON:
            raise McpFailure("json", f"{self.name} answered with a body that is not JSON")
        if not isinstance(message, dict):
            raise McpFailure("mcp", "the answer is not a JSON-RPC message")
        return message

    def _result(self, method: str, message: Mapping[str, Any]) -> dict[str, Any]:
        result = message.get("result")
        if isinstance(result, dict):
            return result
        error = message.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            text = str(error.get("message", ""))
            raise McpFailure(
                "rpc",
                f"{self.name} answered {method} with error {code}: {' '.join(text.split())[:256]}",
                code=code if type(code) is int else None,
                data=error.get("data"),
                detail=text,
            )
        raise McpFailure("mcp", "the answer has neither a result nor an error")


async def follow(
    session: McpSession,
    on_changed: Callable[[], Awaitable[None]],
    reopen_seconds: float = REOPEN_SECONDS,
) -> None:
    """Keep the server's change stream open until cancelled, calling ``on_changed`` for every
    change it announces. A stream that ends (the server restarted, the session was
    established again, the connection dropped) is opened again after ``reopen_seconds``.
    Every open that did not resume a previous stream (the first one, a server that gave no
    event ids or refused the ``Last-Event-ID``; 2026-07-28 has none) is followed by one
    ``on_changed``: a change announced between the caller's last listing and the moment the
    stream opened reached no one (list, then watch, then list once more)."""
    while True:
        if session.announces_notices:
            try:
                async for changed in session.changes():
                    # a stream resumed with Last-Event-ID replays what it missed: no relist
                    if changed or not session.stream_resumed:
                        await on_changed()
            except McpFailure as failure:
                logger.debug("Could not follow the tool list of %s: %s", session.name, failure)
        await asyncio.sleep(reopen_seconds)
