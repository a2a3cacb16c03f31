"""One upstream MCP server as the bridge uses it: a lean JSON-RPC client over Streamable HTTP.

The bridge forwards every tool call, so this path stays lean: one pooled HTTP
client (the bridge's own keep-alive :mod:`~mcp_operator.net.pool` when
given, else httpx), the request body built as bytes, only the response's
envelope parsed.
The SDK client is not used here (it costs more per call than the whole bridge
may); the MCP facts it respects are the SDK's own constants.

- **Era**: the 2026-07-28 revision (stateless: ``server/discover``, the
  per-request ``_meta`` envelope and the ``MCP-Protocol-Version`` /
  ``Mcp-Method`` / ``Mcp-Name`` headers) when the server offers it; else the
  legacy handshake (``initialize``, ``Mcp-Session-Id``, and a fresh handshake
  when the server says the session is lost, once per call: 404 as the spec
  says, or 400 naming the session, as many deployed servers answer).
- **Answers** come as JSON or as an SSE stream; the stream is read until the
  response with the request's id arrives (notifications before it are skipped).
- **Bounds**: every answer is limited in bytes, every exchange in time.
- **Failures** are an :class:`UpstreamError` with a kind the call pipeline maps
  to its error codes: ``unavailable`` (could not connect, connection lost,
  HTTP 502/503/504: transient), ``timeout``, or ``error`` (the server answered,
  but not with a result: an HTTP or JSON-RPC error, or garbage).

Header values (credentials) never appear in messages or reprs.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import httpx
from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY
from mcp_types.version import LATEST_HANDSHAKE_VERSION, MODERN_PROTOCOL_VERSIONS

from mcp_operator import __version__
from mcp_operator.net.pool import Http1Error, Http1Pool

MAX_ANSWER_BYTES = 8 * 1024 * 1024
"""The largest answer (JSON body or SSE stream up to the response) read from an upstream."""
MAX_PAGES = 100
"""``tools/list`` pages read at most (a cursor loop ends there)."""
CLIENT_INFO = {"name": "mcp-operator-bridge", "version": __version__}
TRANSIENT_HTTP = frozenset({502, 503, 504})

Kind = Literal["unavailable", "timeout", "error"]


class _Answer(Protocol):
    """An HTTP answer as this module reads it (``httpx.Response`` or ``Http1Response``)."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    def aiter_bytes(self) -> AsyncIterator[bytes]: ...

    def aiter_text(self) -> AsyncIterator[str]: ...

    async def aread(self) -> bytes: ...

    async def aclose(self) -> None: ...


class UpstreamError(Exception):
    """A call that did not produce a result; ``kind`` says why, ``message`` says it in words."""

    def __init__(self, kind: Kind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message

    @property
    def transient(self) -> bool:
        """Whether repeating the call may help (connection trouble, a gateway error, time)."""
        return self.kind in ("unavailable", "timeout")


class _SessionLost(Exception):
    """A legacy server answered 404: its session is gone; handshake again."""


@dataclass
class Upstream:
    """One upstream server: its URL and headers, the negotiated era, the legacy session."""

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    client: httpx.AsyncClient | None = field(default=None, repr=False)
    http1: Http1Pool | None = field(default=None, repr=False)
    """When set, requests go through this lean keep-alive client instead of ``client``
    (:mod:`~mcp_operator.net.pool`: the bridge's hot path)."""
    protocol_hint: str | None = None
    """The protocol version the server's status reported (tried first when it is modern)."""
    protocol_version: str | None = None
    """The negotiated version, once connected."""
    server_info: dict[str, Any] | None = None
    capabilities: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = field(default=None, repr=False)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1), repr=False)
    _connecting: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    @property
    def modern(self) -> bool:
        return self.protocol_version in MODERN_PROTOCOL_VERSIONS

    @property
    def connected(self) -> bool:
        return self.protocol_version is not None

    def _http(self) -> httpx.AsyncClient:
        if self.client is None:
            raise RuntimeError("Upstream needs an httpx.AsyncClient")
        return self.client

    # -- connecting ------------------------------------------------------------------------

    async def connect(self, seconds: float) -> None:
        """Negotiate the era (2026-07-28 first when the server offers it), once at a time."""
        async with self._connecting:
            if self.connected:
                return
            if self.protocol_hint in MODERN_PROTOCOL_VERSIONS or self.protocol_hint is None:
                try:
                    await self._discover(seconds)
                    return
                except UpstreamError as error:
                    if error.kind != "error":
                        raise
            await self._initialize(seconds)

    async def _discover(self, seconds: float) -> None:
        version = MODERN_PROTOCOL_VERSIONS[-1]
        result = await self._exchange(
            "server/discover", {}, seconds, modern_version=version, session=False
        )
        supported = result.get("supportedVersions") or []
        if version not in supported:
            raise UpstreamError("error", f"{self.name} does not support {version}")
        self.protocol_version = version
        self.capabilities = dict(result.get("capabilities") or {})
        meta = result.get("_meta") or {}
        self.server_info = meta.get("io.modelcontextprotocol/serverInfo")

    async def _initialize(self, seconds: float) -> None:
        self.session_id = None
        params = {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": {},
            "clientInfo": CLIENT_INFO,
        }
        result = await self._exchange("initialize", params, seconds, session=False)
        self.protocol_version = str(result.get("protocolVersion") or LATEST_HANDSHAKE_VERSION)
        self.capabilities = dict(result.get("capabilities") or {})
        self.server_info = result.get("serverInfo")
        await self._notify("notifications/initialized", seconds)

    def reset(self) -> None:
        """Forget the negotiated era and session (the next call connects anew)."""
        self.protocol_version = None
        self.session_id = None

    # -- calls -----------------------------------------------------------------------------

    async def list_tools(self, seconds: float) -> list[dict[str, Any]]:
        """Every tool of every page (an empty-string cursor is not the end in 2026)."""
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _page in range(MAX_PAGES):
            params = {} if cursor is None else {"cursor": cursor}
            result = await self.request("tools/list", params, seconds)
            page = result.get("tools")
            if not isinstance(page, list):
                raise UpstreamError("error", f"{self.name} answered tools/list without a tool list")
            tools.extend(tool for tool in page if isinstance(tool, dict))
            cursor = result.get("nextCursor")
            if cursor is None or (cursor == "" and not self.modern) or cursor in seen:
                return tools
            seen.add(cursor)
        return tools

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any], seconds: float
    ) -> dict[str, Any]:
        """``tools/call`` with the server's original tool name; the result as the server sent it."""
        return await self.request("tools/call", {"name": name, "arguments": arguments}, seconds)

    async def request(self, method: str, params: dict[str, Any], seconds: float) -> dict[str, Any]:
        """One request in the negotiated era; a lost legacy session is re-established once."""
        try:
            async with asyncio.timeout(seconds):
                if not self.connected:
                    await self.connect(seconds)
                try:
                    return await self._exchange(method, params, seconds)
                except _SessionLost:
                    self.reset()
                    await self.connect(seconds)
                    try:
                        return await self._exchange(method, params, seconds)
                    except _SessionLost:
                        raise UpstreamError(
                            "unavailable", f"{self.name} lost the session again at once"
                        ) from None
        except TimeoutError:
            raise UpstreamError(
                "timeout", f"{self.name} did not answer {method} within {seconds:g}s"
            ) from None

    # -- the wire --------------------------------------------------------------------------

    def _headers(
        self, method: str, params: Mapping[str, Any], modern_version: str | None, session: bool
    ) -> dict[str, str]:
        headers = {
            **self.headers,
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
        }
        if modern_version is not None:
            headers["mcp-protocol-version"] = modern_version
            headers["mcp-method"] = method
            name = params.get("name") if method == "tools/call" else None
            if isinstance(name, str) and name.isascii():
                headers["mcp-name"] = name
        else:
            if self.protocol_version is not None:
                headers["mcp-protocol-version"] = self.protocol_version
            if session and self.session_id is not None:
                headers["mcp-session-id"] = self.session_id
        return headers

    def _envelope(
        self, method: str, params: dict[str, Any], modern_version: str | None, session: bool
    ) -> tuple[int, bytes, dict[str, str]]:
        """A request's id, body and headers in the negotiated era (or ``modern_version``)."""
        if modern_version is None and self.modern:
            modern_version = self.protocol_version
        if modern_version is not None:
            meta = dict(params.get("_meta") or {})
            meta[PROTOCOL_VERSION_META_KEY] = modern_version
            meta[CLIENT_INFO_META_KEY] = CLIENT_INFO
            meta[CLIENT_CAPABILITIES_META_KEY] = {}
            params = {**params, "_meta": meta}
        request_id = next(self._ids)
        body = json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params},
            separators=(",", ":"),
        ).encode()
        return request_id, body, self._headers(method, params, modern_version, session)

    def listen_request(self) -> tuple[bytes, dict[str, str]]:
        """The body and headers of a 2026-07-28 ``subscriptions/listen`` for tool list changes
        (its answer is the stream the notifications come on; the caller reads it)."""
        params: dict[str, Any] = {"notifications": {"toolsListChanged": True}}
        _, body, headers = self._envelope("subscriptions/listen", params, None, False)
        return body, headers

    async def _notify(self, method: str, seconds: float) -> None:
        body = json.dumps({"jsonrpc": "2.0", "method": method}).encode()
        headers = self._headers(method, {}, None, True)
        response = await self._send(body, headers, seconds)
        await response.aclose()

    async def _send(self, body: bytes, headers: dict[str, str], seconds: float) -> _Answer:
        """POST ``body``; the answer once its head arrived (the body is read by the caller)."""
        if self.http1 is not None:
            try:
                return await self.http1.request("POST", self.url, headers, body)
            except Http1Error as error:
                raise _http1_error(self.name, error) from None
        try:
            request = self._http().build_request(
                "POST", self.url, content=body, headers=headers, timeout=seconds
            )
            return await self._http().send(request, stream=True)
        except httpx.TransportError as error:
            raise _transport_error(self.name, error) from None

    async def _exchange(
        self,
        method: str,
        params: dict[str, Any],
        seconds: float,
        *,
        modern_version: str | None = None,
        session: bool = True,
    ) -> dict[str, Any]:
        request_id, body, headers = self._envelope(method, params, modern_version, session)
        response = await self._send(body, headers, seconds)
        try:
            if session and self.session_id is not None and await _session_lost(response):
                raise _SessionLost
            if response.status_code >= 400:
                kind: Kind = "unavailable" if response.status_code in TRANSIENT_HTTP else "error"
                raise UpstreamError(
                    kind, f"{self.name} answered {method} with HTTP {response.status_code}"
                )
            if method == "initialize":
                self.session_id = response.headers.get("mcp-session-id")
            message = await _read_answer(self.name, response, request_id)
        except httpx.TransportError as error:
            raise _transport_error(self.name, error) from None
        except Http1Error as error:
            raise _http1_error(self.name, error) from None
        finally:
            await response.aclose()
        return _result(self.name, method, message)


async def _session_lost(response: _Answer) -> bool:
    """Whether a legacy server says our session is gone: 404 as the spec says, or the 400 with
    a session complaint that many deployed servers send instead."""
    if response.status_code == 404:
        return True
    if response.status_code != 400:
        return False
    body = await response.aread()
    return b"session" in body[:4096].lower()


async def _read_answer(name: str, response: _Answer, request_id: int) -> dict[str, Any]:
    """The JSON-RPC response for ``request_id`` from a JSON body or an SSE stream."""
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    received = 0
    if content_type == "text/event-stream":
        data: list[str] = []
        buffer = ""
        async for chunk in response.aiter_text():
            received += len(chunk)
            if received > MAX_ANSWER_BYTES:
                raise UpstreamError("error", f"{name} sent more than {MAX_ANSWER_BYTES} bytes")
            buffer += chunk
            while "\n" in buffer:
                line, buffer = buffer.split("\n", 1)
                line = line.rstrip("\r")
                if line.startswith("data:"):
                    data.append(line[5:].lstrip(" "))
                elif line == "" and data:
                    text, data = "\n".join(data), []
                    if not text.strip():
                        continue  # a priming event (an id for resumption, no message)
                    message = _decode(name, text)
                    if message.get("id") == request_id and (
                        "result" in message or "error" in message
                    ):
                        return message
        raise UpstreamError("unavailable", f"{name} ended the stream before answering")
    pieces: list[bytes] = []
    async for piece in response.aiter_bytes():
        received += len(piece)
        if received > MAX_ANSWER_BYTES:
            raise UpstreamError("error", f"{name} sent more than {MAX_ANSWER_BYTES} bytes")
        pieces.append(piece)
    return _decode(name, b"".join(pieces).decode("utf-8", "replace"))


def _decode(name: str, text: str) -> dict[str, Any]:
    try:
        message = json.loads(text)
    except ValueError:
        raise UpstreamError("error", f"{name} answered with a body that is not JSON") from None
    if not isinstance(message, dict):
        raise UpstreamError("error", f"{name} answered with a JSON value that is not a message")
    return message


def _result(name: str, method: str, message: Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(message.get("result"), dict):
        result: dict[str, Any] = message["result"]
        return result
    error = message.get("error")
    if isinstance(error, dict):
        text = " ".join(str(error.get("message", "")).split())[:256]
        raise UpstreamError(
            "error", f"{name} answered {method} with error {error.get('code')}: {text}"
        )
    raise UpstreamError("error", f"{name} answered {method} with neither a result nor an error")


def _http1_error(name: str, error: Http1Error) -> UpstreamError:
    if error.kind == "connect":
        return UpstreamError("unavailable", f"could not connect to {name}")
    return UpstreamError("unavailable", f"the connection to {name} failed ({error})")


def _transport_error(name: str, error: httpx.TransportError) -> UpstreamError:
    if isinstance(error, httpx.TimeoutException):
        return UpstreamError("timeout", f"{name} did not answer in time")
    if isinstance(error, httpx.ConnectError):
        return UpstreamError("unavailable", f"could not connect to {name}")
    return UpstreamError("unavailable", f"the connection to {name} failed ({type(error).__name__})")
