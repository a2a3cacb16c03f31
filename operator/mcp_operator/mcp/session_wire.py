"""A session's state, and how one of its HTTP requests goes out.

:class:`SessionWire` is the base of :class:`~mcp_operator.mcp.session.McpSession`: the
server's URL and headers, the negotiated era and the legacy session id (all the state the
session's parts share is set here, in one place), and one request on the keep-alive pool:

- **Headers**: the configured ones, never over the protocol's own (:data:`PROTOCOL_HEADERS`),
  then the era's: ``Mcp-Protocol-Version``; 2026-07-28's ``Mcp-Method``, ``Mcp-Name`` and a
  tool's ``Mcp-Param-*``, or a legacy session's ``Mcp-Session-Id``. 2026-07-28's per-request
  ``_meta`` is stamped on the params (:meth:`SessionWire._stamped`).
- **Credentials** (:mod:`~mcp_operator.mcp.credentials`): their headers are asked for
  before every request (``POST``, ``GET`` stream, ``DELETE``) and merged after the static
  ones; a ``401``/``403`` (the auth layer refused, the server did not act) is reported to
  them, and the one request is sent once more only when they say new headers are worth it.
- **Messages no answer is awaited for**: a notification, and our answer to a server's request.

How an answer is read and matched to its request is
:mod:`~mcp_operator.mcp.session_exchange`'s. Header values never appear in messages or reprs.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Mapping
from typing import Any

import mcp_types as types
from mcp.shared.inbound import NAME_BEARING_METHODS, encode_header_value, mcp_param_headers
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    PROTOCOL_VERSION_META_KEY,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_operator.mcp import messages
from mcp_operator.mcp.bounds import BodyReader, capped
from mcp_operator.mcp.credentials import Credentials, CredentialsError
from mcp_operator.mcp.failures import Fault, McpFailure
from mcp_operator.net import jsoncodec
from mcp_operator.net.http1 import Http1Error, Http1Response
from mcp_operator.net.pool import Http1Pool

DISCOVER_SECONDS = 10.0
"""``server/discover`` unanswered this long: a legacy server (the SDK's own bound)."""
CLOSE_SECONDS = 2.0
"""A session's ``DELETE`` waits at most this long: its own deadline, never the caller's."""
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


class SessionWire:
    """One server's session: its URL and headers, the negotiated era, the legacy session id,
    and how its requests go out. Only :class:`~mcp_operator.mcp.session.McpSession` and its
    subclasses are used; this base holds what every part of them shares.

    ``name`` is how messages call the server (never a header value); ``client_info`` how
    the session introduces itself.
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

    @property
    def modern(self) -> bool:
        return self.protocol_version in MODERN_PROTOCOL_VERSIONS

    @property
    def connected(self) -> bool:
        return self.protocol_version is not None

    def reset(self) -> None:
        """Forget the negotiated era and session (the next request connects anew)."""
        self.protocol_version = None
        self.session_id = None

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

    async def _notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        body = jsoncodec.dumps(message)
        answer = await self._send("POST", self._request_headers(method, None), body)
        await answer.aclose()  # an error status is no failure: nothing answers a notification

    async def respond(self, message: Mapping[str, Any]) -> None:
        """Send the server our answer to one of its requests (a JSON-RPC result or error with
        its id), on the legacy session it was asked in. The server's HTTP status is no
        failure (it may have given up on the request); no connection is."""
        body = jsoncodec.dumps(message)
        answer = await self._send("POST", self._request_headers("", None), body)
        await answer.aclose()
