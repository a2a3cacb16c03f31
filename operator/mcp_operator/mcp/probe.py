"""Discovery over the network: handshake, then every page of ``tools/list``.

:func:`discover` talks to one MCP server with the official SDK client, in
either era: ``server/discover`` (2026-07-28) first, the ``initialize``
handshake (2025-11-25 and older) when the server does not answer it; over
Streamable HTTP or the legacy HTTP+SSE transport. Every failure comes out as a
:class:`ProbeError` with a CamelCase ``reason`` and a one-sentence message.

Bounds, so that a slow, broken or hostile server cannot hold or sink the
operator (documented in ``docs/status-bounds.md``):

- one overall deadline, ``timeout_seconds``, for the whole probe;
- at most ``MAX_RESPONSE_BYTES`` in one HTTP response body (and one SSE event),
  and ``MAX_PROBE_BYTES`` in all responses of one probe together;
- descriptions and titles are cut as soon as a page arrives, so a probe keeps
  no more of each tool than status can hold;
- at most ``MAX_PAGES`` pages and ``MAX_DISCOVERED_TOOLS`` tools; a server past
  either bound fails the probe (``TooManyPages`` / ``TooManyTools``) rather than
  yield a silently partial list; a cursor seen twice fails it (``PaginationLoop``).

Header values (credentials) never appear in messages, logs or reprs; URLs are
shown without userinfo and query string.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import socket
import ssl
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import anyio
import httpx2
import mcp
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ToolsListChanged
from mcp_types import (
    CONNECTION_CLOSED,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    Implementation,
    ToolListChangedNotification,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcp_operator import __version__
from mcp_operator.mcp.naming import (
    MAX_DESCRIPTION_CHARS,
    MAX_TITLE_CHARS,
    MAX_TOOL_NAME_CHARS,
    RawTool,
    bounded_annotations,
    cut,
)

MAX_PAGES = 100
"""A ``tools/list`` walk longer than this fails with ``TooManyPages``."""

MAX_DISCOVERED_TOOLS = 5000
"""A server listing more tools than this fails the probe with ``TooManyTools``."""

MAX_RESPONSE_BYTES = 16 * 1024 * 1024
"""One HTTP response body (or SSE event) larger than this fails with ``ResponseTooLarge``."""

MAX_PROBE_BYTES = 64 * 1024 * 1024
"""All response bodies of one probe together: more fails with ``ResponseTooLarge``. This
also bounds what the SDK's session keeps per tool (it caches output schemas)."""

MAX_SERVER_TEXT_CHARS = 200
"""Text chosen by the server (error messages) is cut to this length in a ``ProbeError``."""

Transport = Literal["streamable-http", "sse"]


@dataclass(frozen=True)
class ProbeTarget:
    """Where and how to probe. ``repr`` shows header names, never their values."""

    url: str
    transport: Transport = "streamable-http"
    headers: Mapping[str, str] = field(default_factory=dict, hash=False)
    timeout_seconds: float = 10.0
    verify_tls: bool | ssl.SSLContext = True
    """``True``: the system CAs; ``False``: no verification; an ``SSLContext``: its CAs
    (e.g. the cluster CA, when probing through the API server's service proxy)."""

    def __repr__(self) -> str:
        verify = "custom" if isinstance(self.verify_tls, ssl.SSLContext) else self.verify_tls
        return (
            f"ProbeTarget(url={display_url(self.url)!r}, transport={self.transport!r}, "
            f"headers={sorted(self.headers)!r}, timeout_seconds={self.timeout_seconds!r}, "
            f"verify_tls={verify!r})"
        )


@dataclass(frozen=True)
class Discovery:
    """What a probe saw: who the server is, which era it speaks and its tools."""

    server_name: str | None
    server_version: str | None
    protocol_version: str
    tools: list[RawTool]
    list_changed: bool
    """The server advertises ``tools.listChanged`` (it will notify when its tools change)."""


class ProbeError(Exception):
    """A probe failed. ``reason`` is a CamelCase word, ``message`` one sentence.

    Reasons: ``InvalidTarget``, ``Unreachable``, ``TLSError``, ``Timeout``,
    ``HTTPError``, ``ProtocolError``, ``ServerError``, ``ResponseTooLarge``,
    ``PaginationLoop``, ``TooManyPages``, ``TooManyTools``, ``ProbeFailed``.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"ProbeError(reason={self.reason!r}, message={self.message!r})"


def display_url(url: str) -> str:
    """``url`` without userinfo, query and fragment: safe to show in messages and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid URL>"
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path}"


class Paginator:
    """The ``tools/list`` cursor walk, without I/O.

    After each page call :meth:`advance` with the page's ``nextCursor`` and its
    number of tools; it returns the cursor for the next request, or ``None``
    when the listing is complete. Only an absent cursor ends the walk: ``""`` is
    a real cursor (2026-07-28 allows it), so callers must test ``is None``.
    """

    def __init__(self, max_pages: int = MAX_PAGES, max_tools: int = MAX_DISCOVERED_TOOLS) -> None:
        self.max_pages = max_pages
        self.max_tools = max_tools
        self.pages = 0
        self.tools = 0
        self._seen: set[bytes] = set()  # digests: a hostile cursor may be large

    def advance(self, next_cursor: str | None, page_tools: int) -> str | None:
        self.pages += 1
        self.tools += page_tools
        if self.tools > self.max_tools:
            raise ProbeError(
                "TooManyTools",
                f"the server lists more than {self.max_tools} tools "
                f"({self.tools} in the first {self.pages} pages)",
            )
        if next_cursor is None:
            return None
        digest = hashlib.sha256(next_cursor.encode("utf-8", "surrogatepass")).digest()
        if digest in self._seen:
            raise ProbeError(
                "PaginationLoop",
                f"the server returned a tools/list cursor it had returned before "
                f"(page {self.pages})",
            )
        if self.pages >= self.max_pages:
            raise ProbeError(
                "TooManyPages", f"the server's tool list runs past {self.max_pages} pages"
            )
        self._seen.add(digest)
        return next_cursor


async def discover(target: ProbeTarget) -> Discovery:
    """Handshake with the server at ``target`` and list all its tools.

    Raises:
        ProbeError: on any failure, within ``target.timeout_seconds`` (plus the
            time it takes to close connections).
    """
    _check_target(target)
    state = _State(target)
    try:
        with anyio.fail_after(target.timeout_seconds):
            return await _discover(target, state)
    except Exception as error:  # boundary: every failure becomes one ProbeError
        raise _scrub(_translate(error, state), target) from None


async def watch_tools(target: ProbeTarget, *, max_seconds: float) -> bool:
    """Wait until the server announces that its tool list changed.

    Returns ``True`` on ``notifications/tools/list_changed`` (legacy era, on the
    session's GET stream) or a ``ToolsListChanged`` event (2026-07-28,
    ``subscriptions/listen``); ``False`` when ``max_seconds`` pass first or the
    server ends the stream. The connection is opened within
    ``target.timeout_seconds``; after that only ``max_seconds`` bound it, so a
    caller re-opens it now and then (a legacy GET stream that the SDK gave up
    reconnecting would otherwise stay silent for good).

    Raises:
        ProbeError: the connection or the handshake failed.
    """
    _check_target(target)
    state = _State(target)
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            changed.set()

    connected = False
    try:
        # One scope for the whole session (the SDK's task groups must not outlive an inner
        # one): first the probe's timeout for connecting, then ``max_seconds`` of listening.
        with anyio.move_on_after(target.timeout_seconds) as scope:
            async with AsyncExitStack() as stack:
                client = await _connect(
                    stack,
                    target,
                    state,
                    message_handler=on_message,
                    http_timeout=httpx2.Timeout(target.timeout_seconds, read=None),
                )
                connected = True
                scope.deadline = anyio.current_time() + max_seconds
                state.phase = "listening for tool list changes"
                if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    async with client.listen(tools_list_changed=True) as subscription:
                        async for event in subscription:
                            if isinstance(event, ToolsListChanged):
                                return True
                    return False
                await changed.wait()
                return True
        if not connected:
            raise TimeoutError
        return False
    except Exception as error:  # boundary: every failure becomes one ProbeError
        raise _scrub(_translate(error, state), target) from None


class _ResponseTooLarge(Exception):
    """Raised inside the HTTP client when a response body passes ``MAX_RESPONSE_BYTES``."""


class _State:
    """What the probe has seen so far, for turning a failure into a clear message."""

    def __init__(self, target: ProbeTarget) -> None:
        self.url = display_url(target.url)
        self.timeout = target.timeout_seconds
        self.phase = "connecting"
        self.error_status: int | None = None
        self.too_large = False
        self.too_much = False
        self.received = 0


class _LimitedStream(httpx2.AsyncByteStream):
    """A response body stream that fails once more than ``limit`` bytes went through."""

    def __init__(self, inner: httpx2.AsyncByteStream, state: _State, limit: int) -> None:
        self._inner = inner
        self._state = state
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        received = 0
        async for chunk in self._inner:
            received += len(chunk)
            self._state.received += len(chunk)
            if received > self._limit:
                self._state.too_large = True
                raise _ResponseTooLarge
            if self._state.received > MAX_PROBE_BYTES:
                self._state.too_much = True
                raise _ResponseTooLarge
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


@functools.cache
def _default_tls() -> ssl.SSLContext:
    """One verifying TLS context for every probe: loading the CA bundle costs ~25 ms of CPU,
    which a fleet of a thousand servers would otherwise pay on every probe."""
    return ssl.create_default_context()


def _tls(verify: bool | ssl.SSLContext) -> bool | ssl.SSLContext:
    return _default_tls() if verify is True else verify


def _http_client(
    target: ProbeTarget, state: _State, timeout: httpx2.Timeout | None = None
) -> httpx2.AsyncClient:
    async def on_response(response: httpx2.Response) -> None:
        if response.request.method == "POST":
            status = response.status_code
            state.error_status = status if status >= 400 else None
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > MAX_RESPONSE_BYTES:
            state.too_large = True
            raise _ResponseTooLarge
        if isinstance(response.stream, httpx2.AsyncByteStream):
            response.stream = _LimitedStream(response.stream, state, MAX_RESPONSE_BYTES)

    # identity: a compressed body could inflate past the bound after it was counted.
    headers = {"accept-encoding": "identity", **target.headers}
    return httpx2.AsyncClient(
        headers=headers,
        timeout=timeout or httpx2.Timeout(target.timeout_seconds),
        verify=_tls(target.verify_tls),
        event_hooks={"response": [on_response]},
    )


async def _connect(
    stack: AsyncExitStack,
    target: ProbeTarget,
    state: _State,
    *,
    message_handler: Any = None,
    http_timeout: httpx2.Timeout | None = None,
) -> mcp.Client:
    """An SDK client after the handshake (2026 discovery first, then ``initialize``)."""
    transport: Any
    if target.transport == "sse":

        def factory(*_args: Any, **_kwargs: Any) -> httpx2.AsyncClient:
            return _http_client(target, state, http_timeout)  # sse_client enters and closes it

        transport = sse_client(
            target.url,
            timeout=target.timeout_seconds,
            sse_read_timeout=target.timeout_seconds if http_timeout is None else 86400,
            httpx_client_factory=factory,
        )
    else:
        http = await stack.enter_async_context(_http_client(target, state, http_timeout))
        transport = streamable_http_client(
            target.url, http_client=http, max_sse_event_size=MAX_RESPONSE_BYTES
        )
    client_info = Implementation(name="mcp-operator-probe", version=__version__)
    state.phase = "the handshake"
    client: mcp.Client = await stack.enter_async_context(
        mcp.Client(
            transport,
            mode="auto",
            cache=None,
            client_info=client_info,
            message_handler=message_handler,
        )
    )
    return client


async def _discover(target: ProbeTarget, state: _State) -> Discovery:
    async with AsyncExitStack() as stack:
        client = await _connect(stack, target, state)
        capabilities = client.server_capabilities
        info = client.server_info
        walk = Paginator()
        tools: list[RawTool] = []
        cursor: str | None = None
        while True:
            state.phase = f"tools/list (page {walk.pages + 1})"
            try:
                page = await client.list_tools(cursor=cursor)
            except mcp.MCPError as error:
                if error.code == METHOD_NOT_FOUND and capabilities.tools is None and not tools:
                    break  # a server without the tools capability: no tools, not a failure
                raise
            tools.extend(_raw_tool(tool) for tool in page.tools)
            cursor = walk.advance(page.next_cursor, len(page.tools))
            if cursor is None:
                break
        discovery = Discovery(
            server_name=info.name if info is not None else None,
            server_version=info.version if info is not None else None,
            protocol_version=client.protocol_version,
            tools=tools,
            list_changed=bool(capabilities.tools and capabilities.tools.list_changed),
        )
        state.phase = "closing the session"
    return discovery


def _raw_tool(tool: Any) -> RawTool:
    """The fields the operator keeps, bounded as in status.

    ``title`` folds into the annotations (the display precedence is title, then
    annotations.title). A name longer than a valid one is cut to one character
    past the limit, so that it stays invalid and is reported, without being kept whole.
    """
    annotations = bounded_annotations(
        tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else None
    )
    title = getattr(tool, "title", None)
    if isinstance(title, str) and title:
        annotations["title"] = cut(title, MAX_TITLE_CHARS)
    description = tool.description
    if isinstance(description, str):
        description = cut(description, MAX_DESCRIPTION_CHARS)
    return RawTool(
        name=tool.name[: MAX_TOOL_NAME_CHARS + 1],
        description=description,
        annotations=annotations or None,
    )


def _check_target(target: ProbeTarget) -> None:
    try:
        parts = urlsplit(target.url)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        valid = False
    if not valid:
        raise ProbeError(
            "InvalidTarget", f"{display_url(target.url)} is not an http:// or https:// URL"
        )
    if target.transport not in ("streamable-http", "sse"):
        raise ProbeError(
            "InvalidTarget", f"transport {target.transport!r} cannot be probed over the network"
        )
    if target.timeout_seconds <= 0:
        raise ProbeError("InvalidTarget", "the probe timeout must be positive")


def _leaves(error: BaseException) -> Iterator[BaseException]:
    """The exceptions inside (nested) exception groups, or ``error`` itself."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


_HTTP_REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    406: "Not Acceptable",
    407: "Proxy Authentication Required",
    408: "Request Timeout",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    421: "Misdirected Request",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


def _http_error(status: int, state: _State) -> ProbeError:
    reason = _HTTP_REASONS.get(status, "")
    label = f"HTTP {status} {reason}".rstrip()
    return ProbeError("HTTPError", f"{state.url} answered {label} during {state.phase}")


def _connect_detail(error: BaseException) -> tuple[str, str]:
    """(reason, detail) for a failed connection, from the OS error underneath."""
    for link in _chain(error):
        if isinstance(link, ssl.SSLCertVerificationError):
            return "TLSError", f"certificate verification failed ({link.verify_message})"
        if isinstance(link, ssl.SSLError):
            return "TLSError", f"TLS handshake failed ({link.reason or 'unknown'})"
        if isinstance(link, socket.gaierror):
            return "Unreachable", "host name not resolved"
        if isinstance(link, OSError) and link.errno is not None:
            if link.errno == errno.ECONNREFUSED:
                return "Unreachable", "connection refused"
            if link.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
                return "Unreachable", "no route to host"
            return "Unreachable", (link.strerror or "connection failed").lower()
    text = str(error).lower()
    if "refused" in text or "all connection attempts failed" in text:
        return "Unreachable", "connection refused"
    if "name or service not known" in text or "nodename" in text:
        return "Unreachable", "host name not resolved"
    if "certificate" in text or "ssl" in text or "tls" in text:
        return "TLSError", "TLS handshake failed"
    return "Unreachable", "connection failed"


def _translate(error: BaseException, state: _State) -> ProbeError:
    """One ProbeError for whatever the SDK, httpx2 or the deadline raised."""
    leaves = list(_leaves(error))
    for leaf in leaves:
        if isinstance(leaf, ProbeError):
            return leaf
    if state.too_much:
        return ProbeError(
            "ResponseTooLarge",
            f"{state.url} sent more than {MAX_PROBE_BYTES // (1024 * 1024)} MiB in one probe "
            f"(stopped in {state.phase})",
        )
    if state.too_large or any(isinstance(leaf, _ResponseTooLarge) for leaf in leaves):
        return ProbeError(
            "ResponseTooLarge",
            f"{state.url} sent a response larger than {MAX_RESPONSE_BYTES // (1024 * 1024)} MiB "
            f"during {state.phase}",
        )
    for leaf in leaves:
        if isinstance(leaf, TimeoutError | httpx2.TimeoutException):
            return ProbeError(
                "Timeout",
                f"{state.url} did not complete the probe within {state.timeout:g}s "
                f"(stuck in {state.phase})",
            )
    for leaf in leaves:
        if isinstance(leaf, httpx2.ConnectError):
            reason, detail = _connect_detail(leaf)
            return ProbeError(reason, f"could not connect to {state.url}: {detail}")
    for leaf in leaves:
        if isinstance(leaf, httpx2.HTTPStatusError):
            return _http_error(leaf.response.status_code, state)
    for leaf in leaves:
        if isinstance(leaf, mcp.MCPError):
            if state.error_status is not None:
                return _http_error(state.error_status, state)
            text = _one_line(leaf.error.message)
            if leaf.code == PARSE_ERROR:
                return ProbeError(
                    "ProtocolError",
                    f"{state.url} answered {state.phase} with a body that is not valid JSON-RPC",
                )
            if leaf.code in (INVALID_REQUEST, CONNECTION_CLOSED):
                return ProbeError(
                    "ProtocolError",
                    f"{state.url} gave an answer that is not MCP during {state.phase}: {text}",
                )
            return ProbeError(
                "ServerError",
                f"{state.url} answered {state.phase} with error {leaf.code}: {text}",
            )
    for leaf in leaves:
        if isinstance(leaf, ValidationError):
            return ProbeError(
                "ProtocolError",
                f"{state.url} gave an answer that does not match the MCP schema during "
                f"{state.phase} ({leaf.error_count()} validation errors)",
            )
    for leaf in leaves:
        if isinstance(leaf, httpx2.RemoteProtocolError):
            return ProbeError(
                "ProtocolError", f"{state.url} broke the HTTP protocol during {state.phase}"
            )
    for leaf in leaves:
        if isinstance(leaf, httpx2.TransportError):
            return ProbeError(
                "Unreachable",
                f"the connection to {state.url} failed during {state.phase} "
                f"({type(leaf).__name__})",
            )
    names = ", ".join(sorted({type(leaf).__name__ for leaf in leaves}))
    return ProbeError(
        "ProbeFailed", f"the probe of {state.url} failed during {state.phase}: {names}"
    )


def _one_line(text: str) -> str:
    """Server-chosen text fit for a one-sentence message: one line, bounded."""
    return cut(" ".join(text.split()), MAX_SERVER_TEXT_CHARS)


def _scrub(error: ProbeError, target: ProbeTarget) -> ProbeError:
    """Mask any header value a server might have echoed into the message."""
    secrets: set[str] = set()
    for value in target.headers.values():
        if len(value.strip()) >= 4:
            secrets.add(value.strip())
        secrets.update(token for token in value.split() if len(token) >= 8)
    message = error.message
    for secret in sorted(secrets, key=len, reverse=True):
        message = message.replace(secret, "***")
        # Server text is cut to a bounded length before it gets here: a secret echoed at
        # the cut shows only as a prefix ending in the ellipsis. Mask that too.
        for keep in range(len(secret) - 1, 7, -1):
            cut_form = secret[:keep] + "…"
            if cut_form in message:
                message = message.replace(cut_form, "***…")
                break
    if message == error.message:
        return error
    return ProbeError(error.reason, message)
