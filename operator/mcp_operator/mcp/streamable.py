"""The probe's Streamable HTTP client: either MCP era, on keep-alive connections, lean.

A probe is a few requests: ``server/discover``; for a server of the 2025 era or older,
``initialize`` and ``notifications/initialized``; one ``tools/list`` per page; the
session's ``DELETE``. A fleet's probes are most of the operator's work, and the SDK's
client spends about 12 ms of CPU per probe on them (task groups, memory streams, a model
per message, a connection per request); this one spends under 2 ms, over
:mod:`~mcp_operator.net.pool`'s keep-alive connections (bench/probe_bench.py).

What it keeps of the SDK: the era policy of ``Client(mode="auto")`` (``server/discover``
first at the newest modern version; any JSON-RPC or HTTP rejection of it, or a result
without a modern version, falls back to ``initialize``; ``-32022`` naming a mutual modern
version retries once at that version, naming only modern versions it fails), the
protocol's constants, and the SDK's models for what the probe reads (``DiscoverResult``,
``InitializeResult``, ``ListToolsResult``). :class:`StreamableClient` offers what
:mod:`~mcp_operator.mcp.discovery` reads of an SDK client (``server_capabilities``,
``server_info``, ``protocol_version``, ``list_tools``), so discovery is one walk for
either; the SDK's client stays for the legacy HTTP+SSE transport and for listening.

Every body passes the probe's bounds and has its tool lists counted and cut on arrival
(:class:`~mcp_operator.mcp.client.BoundedBody`). Failures are what
:mod:`~mcp_operator.mcp.errors` turns into reasons: the pool's connection errors, an
:class:`~mcp_operator.mcp.errors.HTTPStatus`, the SDK's ``MCPError`` for JSON-RPC errors and
answers that are not MCP, and pydantic's ``ValidationError``.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import urllib.parse
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any

import anyio
import mcp
import mcp_types as types
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    CONNECTION_CLOSED,
    INVALID_REQUEST,
    PARSE_ERROR,
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

from mcp_operator import __version__
from mcp_operator.mcp.client import MAX_RESPONSE_BYTES, BoundedBody
from mcp_operator.mcp.errors import HTTPStatus, ProbeState, ResponseTooLarge, refusal_error
from mcp_operator.mcp.pages import (
    MAX_DISCOVERED_TOOLS,
    Keep,
    ToolCount,
    event_fields,
    split_events,
)
from mcp_operator.mcp.target import ProbeTarget, display_url
from mcp_operator.net.cancel import cancelling
from mcp_operator.net.egress import Refused
from mcp_operator.net.pool import ConnectFailed, Http1Error, Http1Pool, Http1Response
from mcp_operator.net.tls import tls_context

CLIENT_INFO = {"name": "mcp-operator-probe", "version": __version__}
DISCOVER_SECONDS = 10.0
"""``server/discover`` unanswered this long: a legacy server (the SDK's own bound)."""
LATER_REVISION_FIELDS = ("ttlMs", "cacheScope", "resultType")
"""2026-07-28's fields of a ``tools/list`` result, dropped in a legacy session (as the SDK)."""
PROTOCOL_HEADERS = frozenset(
    {
        "content-type",
        "accept",
        "accept-encoding",
        "mcp-protocol-version",
        "mcp-method",
        "mcp-session-id",
    }
)
"""Headers the client sets itself: a server's configured headers cannot replace them."""
CLOSE_SECONDS = 2.0
"""The session's ``DELETE`` waits at most this long: the tools are listed by then."""
ERROR_BODY_BYTES = 64 * 1024
"""Of an HTTP error's body, this much is read for a JSON-RPC error (``-32022``, say)."""


class StreamableClient:
    """One probe's conversation with a Streamable HTTP server (use :func:`streamable`)."""

    def __init__(self, target: ProbeTarget, state: ProbeState, keep: Keep, pool: Http1Pool):
        self._target = target
        self._state = state
        self._keep = keep
        self._pool = pool
        self._count = ToolCount(MAX_DISCOVERED_TOOLS)
        self._ids = itertools.count(1)
        self._session_id: str | None = None
        self.protocol_version: str | None = None
        self.server_capabilities = types.ServerCapabilities()
        self.server_info: types.Implementation | None = None

    @property
    def modern(self) -> bool:
        return self.protocol_version in MODERN_PROTOCOL_VERSIONS

    # -- the handshake -----------------------------------------------------------------

    async def open(self) -> None:
        """Negotiate the era as the SDK's ``mode="auto"`` does."""
        version = LATEST_MODERN_VERSION
        for attempt in range(2):
            raw: dict[str, Any] | None = None
            try:
                # As the SDK: a server that never answers an unknown method is a legacy one.
                with anyio.move_on_after(DISCOVER_SECONDS):
                    raw = await self._request("server/discover", {}, modern=version)
            except (mcp.MCPError, HTTPStatus) as failure:
                error = failure.rpc if isinstance(failure, HTTPStatus) else failure
                if error is not None and error.code == UNSUPPORTED_PROTOCOL_VERSION:
                    supported = _supported(error.error.data)
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
                result = types.DiscoverResult.model_validate(_clamped(raw))
            except ValidationError:
                await self._initialize()
                return
            mutual = [v for v in MODERN_PROTOCOL_VERSIONS if v in result.supported_versions]
            if not mutual:  # a discover-answering server that advertises only legacy versions
                await self._initialize()
                return
            self.protocol_version = mutual[-1]
            self.server_capabilities = result.capabilities
            self.server_info = _server_info((result.meta or {}).get(SERVER_INFO_META_KEY))
            return

    async def _initialize(self) -> None:
        params = {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": {},
            "clientInfo": CLIENT_INFO,
        }
        result = types.InitializeResult.model_validate(await self._request("initialize", params))
        if result.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            raise mcp.MCPError(
                INVALID_REQUEST,
                f"the server chose protocol version {result.protocol_version}, "
                "which this client does not speak",
            )
        self.protocol_version = result.protocol_version
        self.server_capabilities = result.capabilities
        self.server_info = result.server_info
        await self._notify("notifications/initialized")

    # -- what discovery asks -----------------------------------------------------------

    async def list_tools(self, cursor: str | None = None) -> types.ListToolsResult:
        params = {} if cursor is None else {"cursor": cursor}
        raw = _clamped(await self._request("tools/list", params))
        if not self.modern:  # 2026-07-28's fields are outside a legacy session's contract
            for key in LATER_REVISION_FIELDS:
                raw.pop(key, None)
        return types.ListToolsResult.model_validate(raw)

    async def close(self) -> None:
        """End a legacy session (``DELETE``, briefly; a server that ignores it is no failure)."""
        if self._session_id is None or self.modern:
            return
        headers = self._headers("", None)
        with anyio.move_on_after(CLOSE_SECONDS):
            try:
                answer = await self._send("DELETE", headers, b"")
                await answer.aclose()
            except (OSError, Http1Error, mcp.MCPError, HTTPStatus):
                pass  # the tools are listed; the server's session ends on its own clock

    # -- the wire ----------------------------------------------------------------------

    def _headers(self, method: str, modern: str | None) -> dict[str, str]:
        configured = {name.lower() for name in self._target.headers}
        headers = {} if "authorization" in configured else _userinfo_auth(self._target.url)
        headers.update(
            (name, value)
            for name, value in self._target.headers.items()
            if name.lower() not in PROTOCOL_HEADERS  # the protocol's own win, once
        )
        headers["content-type"] = "application/json"
        headers["accept"] = "application/json, text/event-stream"
        # Identity: a compressed body could inflate past the bound after it was counted.
        headers["accept-encoding"] = "identity"
        version = modern or self.protocol_version
        if version is not None:
            headers["mcp-protocol-version"] = version
        if version in MODERN_PROTOCOL_VERSIONS:
            headers["mcp-method"] = method
        elif self._session_id is not None:
            headers["mcp-session-id"] = self._session_id
        return headers

    async def _send(self, verb: str, headers: Mapping[str, str], body: bytes) -> Http1Response:
        try:
            return await self._pool.request(verb, self._target.url, headers, body)
        except ConnectFailed as error:
            if isinstance(error.__cause__, Refused):
                raise refusal_error(self._state, error.__cause__) from None
            raise

    async def _request(
        self, method: str, params: dict[str, Any], *, modern: str | None = None
    ) -> dict[str, Any]:
        """One request; its result, or the error it got as an exception."""
        version = modern or (self.protocol_version if self.modern else None)
        if version is not None:
            params = {
                **params,
                "_meta": {
                    PROTOCOL_VERSION_META_KEY: version,
                    CLIENT_INFO_META_KEY: CLIENT_INFO,
                    CLIENT_CAPABILITIES_META_KEY: {},
                },
            }
        request_id = next(self._ids)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        body = json.dumps(message, separators=(",", ":")).encode()
        answer = await self._send("POST", self._headers(method, modern), body)
        try:
            if 300 <= answer.status_code < 400 and answer.headers.get("location"):
                where = display_url(answer.headers["location"])
                raise mcp.MCPError(
                    INVALID_REQUEST,
                    f"HTTP {answer.status_code} redirect to {where}, which the probe does not "
                    "follow: use that URL as the server's endpoint",
                )
            if answer.status_code >= 300:
                raise HTTPStatus(answer.status_code, await _rpc_error(answer))
            if method == "initialize":
                self._session_id = answer.headers.get("mcp-session-id")
            reply = await self._reply(answer, request_id)
        finally:
            await answer.aclose()
        return _result(reply)

    async def _notify(self, method: str) -> None:
        body = json.dumps({"jsonrpc": "2.0", "method": method}).encode()
        answer = await self._send("POST", self._headers(method, None), body)
        await answer.aclose()  # an error status is no failure: nothing answers a notification

    async def _reply(self, answer: Http1Response, request_id: int) -> Mapping[str, Any]:
        """The JSON-RPC response to ``request_id``: a JSON body, or an event of an SSE stream."""
        length = answer.headers.get("content-length", "")
        if length.isdigit() and int(length) > MAX_RESPONSE_BYTES:
            self._state.response_limit = MAX_RESPONSE_BYTES
            raise ResponseTooLarge(MAX_RESPONSE_BYTES)
        media = answer.headers.get("content-type", "").partition(";")[0].strip().lower()
        if media not in ("application/json", "text/event-stream"):
            raise mcp.MCPError(INVALID_REQUEST, f"unexpected content type {media or 'none'!r}")
        kind = "json" if media == "application/json" else "sse"
        body = BoundedBody(
            _Body(answer),
            self._state,
            MAX_RESPONSE_BYTES,
            kind=kind,
            keep=self._keep,
            count=self._count,
        )
        if kind == "json":
            async with contextlib.aclosing(aiter(body)) as chunks:
                message = _decode(b"".join([chunk async for chunk in chunks]))
            if not _answers(message, request_id):
                raise mcp.MCPError(INVALID_REQUEST, "the answer is not the response to the request")
            return message
        async with contextlib.aclosing(_events(body)) as messages:
            async for message in messages:
                if _answers(message, request_id):
                    return message
        raise mcp.MCPError(CONNECTION_CLOSED, "the server ended the stream before answering")


@contextlib.asynccontextmanager
async def streamable(
    target: ProbeTarget, state: ProbeState, keep: Keep
) -> AsyncIterator[StreamableClient]:
    """A :class:`StreamableClient` after the handshake; its session and connections end with
    the ``async with``."""
    pool = Http1Pool(egress=target.egress, ssl_context=tls_context(target.verify_tls))
    client = StreamableClient(target, state, keep, pool)
    try:
        state.phase = "the handshake"
        await client.open()
        yield client
        state.phase = "closing the session"
    finally:
        try:
            if not cancelling():  # a failed probe ends its session too, a cancelled one not
                await client.close()
        finally:
            await pool.aclose()


class _Body:
    """An answer's body as :class:`~mcp_operator.mcp.client.BoundedBody` reads one."""

    def __init__(self, answer: Http1Response) -> None:
        self._answer = answer

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._answer.aiter_bytes()

    async def aclose(self) -> None:
        await self._answer.aclose()


async def _events(body: BoundedBody) -> AsyncGenerator[Mapping[str, Any], None]:
    """The JSON-RPC messages of an SSE stream: the data of each ``message`` event (events
    without data, such as a priming event with only an id, are skipped). The bounded body
    passes whole events on (``SseSlimmer``); a last one without its blank line is dropped,
    as SSE says."""
    rest = b""
    async with contextlib.aclosing(aiter(body)) as chunks:
        async for chunk in chunks:
            events, rest = split_events(rest + chunk)
            for event in events:
                kind, data = event_fields(event)
                if data is not None and data.strip() and kind in (None, "message"):
                    yield _decode(data)


def _answers(message: Mapping[str, Any], request_id: int) -> bool:
    """Whether ``message`` is the response to ``request_id`` (``true`` is not ``1``)."""
    answer_id = message.get("id")
    return (
        type(answer_id) is int
        and answer_id == request_id
        and ("result" in message or "error" in message)
    )


def _clamped(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` with a negative ``ttlMs`` floored to 0, as the SDK does (a caching SHOULD)."""
    ttl = raw.get("ttlMs")
    if isinstance(ttl, int | float) and not isinstance(ttl, bool) and ttl < 0:
        raw["ttlMs"] = 0
    return raw


def _decode(text: bytes) -> Mapping[str, Any]:
    try:
        message = json.loads(text)
    except ValueError:
        raise mcp.MCPError(PARSE_ERROR, "the body is not JSON") from None
    if not isinstance(message, dict):
        raise mcp.MCPError(INVALID_REQUEST, "the answer is not a JSON-RPC message")
    return message


def _result(message: Mapping[str, Any]) -> dict[str, Any]:
    result = message.get("result")
    if isinstance(result, dict):
        return result
    error = message.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        raise mcp.MCPError(
            code if isinstance(code, int) else INVALID_REQUEST,
            str(error.get("message", "")),
            error.get("data"),
        )
    raise mcp.MCPError(INVALID_REQUEST, "the answer has neither a result nor an error")


async def _rpc_error(answer: Http1Response) -> mcp.MCPError | None:
    """The JSON-RPC error an HTTP error's JSON body carries, if any."""
    if not answer.headers.get("content-type", "").lower().startswith("application/json"):
        return None
    body = b""
    async for chunk in answer.aiter_bytes():
        body += chunk
        if len(body) > ERROR_BODY_BYTES:
            return None
    try:
        _result(_decode(body))
    except mcp.MCPError as error:
        return error
    return None


def _supported(data: Any) -> list[str] | None:
    """``supported`` of a -32022 error's data, if it has one."""
    try:
        return types.UnsupportedProtocolVersionErrorData.model_validate(data).supported
    except ValidationError:
        return None


def _userinfo_auth(url: str) -> dict[str, str]:
    """Basic credentials from the URL's userinfo (``https://user:secret@host/mcp``), as httpx
    sends them; a configured ``Authorization`` header replaces them."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return {}
    user = urllib.parse.unquote(parts.username)
    secret = urllib.parse.unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{secret}".encode()).decode("ascii")
    return {"authorization": f"Basic {token}"}


def _server_info(data: Any) -> types.Implementation | None:
    try:
        return types.Implementation.model_validate(data) if data is not None else None
    except ValidationError:
        return None
