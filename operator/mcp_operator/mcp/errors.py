"""Probe failures: :class:`ProbeError`, and the translation of whatever went wrong into one.

A probe can fail in the SDK, in httpx2, on its deadline or on one of its own
bounds. :func:`translate` turns any of those into one :class:`ProbeError` with a
CamelCase ``reason`` (the ``Probed`` condition's reason) and a one-sentence
message that says where the probe was (:class:`ProbeState`). :func:`scrub`
masks header values a server may have echoed into that message.

This module owns the vocabulary of reasons and their sentences; it leaves
connecting to :mod:`~mcp_operator.mcp.client` and the tool walk to
:mod:`~mcp_operator.mcp.discovery`.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx2
import mcp
from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST, PARSE_ERROR
from pydantic import ValidationError

from mcp_operator.mcp import challenge
from mcp_operator.mcp.naming import cut
from mcp_operator.mcp.oauth import TokenError
from mcp_operator.mcp.scrub import Scrubber
from mcp_operator.mcp.session import McpFailure
from mcp_operator.net.cancel import cancelling
from mcp_operator.net.egress import Refused
from mcp_operator.net.pool import BrokenHTTP, ConnectFailed, ConnectionLost, NotSent

MAX_SERVER_TEXT_CHARS = 200
"""Text chosen by the server (error messages) is cut to this length in a ``ProbeError``."""

MiB = 1024 * 1024


class ProbeError(Exception):
    """A probe failed. ``reason`` is a CamelCase word, ``message`` one sentence.

    Reasons: ``InvalidTarget``, ``Unreachable``, ``TLSError``, ``Timeout``,
    ``HTTPError``, ``ProtocolError``, ``ServerError``, ``ResponseTooLarge``,
    ``PaginationLoop``, ``TooManyPages``, ``TooManyTools``, ``DestinationRefused``,
    ``CredentialsUnavailable``, ``AuthRequired`` (a 401, or a token endpoint that refused
    the credentials), ``InsufficientScope`` (a challenge's ``insufficient_scope``),
    ``ProbeFailed``.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"ProbeError(reason={self.reason!r}, message={self.message!r})"


class ResponseTooLarge(Exception):
    """Raised inside the HTTP client when a response body passes its byte bound, ``limit``."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit} bytes")
        self.limit = limit


class HTTPStatus(McpFailure):
    """An HTTP error status as the session reports one (an ``http`` :class:`McpFailure`)."""

    def __init__(self, status: int) -> None:
        super().__init__("http", f"HTTP {status}", status=status)


class ProbeState:
    """What the probe has seen so far, for turning a failure into a clear message.

    ``url`` is the display form (no userinfo, no query). The HTTP client sets
    ``response_limit`` or ``probe_limit`` to the byte bound that a response, or
    the whole probe, passed.
    """

    def __init__(self, url: str, timeout: float) -> None:
        self.url = url
        self.timeout = timeout
        self.phase = "connecting"
        self.error_status: int | None = None
        self.received = 0
        self.response_limit: int | None = None
        self.probe_limit: int | None = None
        self.failure: ProbeError | None = None
        """A failure the probe's own checks found inside the HTTP client (such as too many
        tools in a page), where the SDK would only see a broken stream."""


def _leaves(error: BaseException) -> Iterator[BaseException]:
    """The exceptions inside (nested) exception groups, or ``error`` itself; a session's
    failure that wraps a lower error (the pool's, pydantic's) is explained by that error."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    elif isinstance(error, McpFailure) and error.__cause__ is not None:
        yield from _leaves(error.__cause__)
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


def _http_label(status: int) -> str:
    return f"HTTP {status} {_HTTP_REASONS.get(status, '')}".rstrip()


E = TypeVar("E", bound=BaseException)


def _always(_leaf: BaseException, _state: ProbeState) -> bool:
    return True


@dataclass(frozen=True)
class Rule(Generic[E]):
    """One row of :data:`RULES`: the first failure of type ``kind``, ``when`` the
    predicate holds for it, fails the probe with ``reason`` and ``message``."""

    kind: type[E] | tuple[type[E], ...]
    reason: str
    message: Callable[[E, ProbeState], str]
    when: Callable[[E, ProbeState], bool] = _always


def _connect_cause(error: BaseException) -> OSError | None:
    """The OS error that decides why a connection failed: the first TLS, name-resolution
    or numbered OS error in the chain of causes, if any."""
    for link in _chain(error):
        if isinstance(link, ssl.SSLError | socket.gaierror):
            return link
        if isinstance(link, OSError) and link.errno is not None:
            return link
    return None


def _cause_is(kind: type[OSError]) -> Callable[[BaseException, ProbeState], bool]:
    return lambda error, _state: isinstance(_connect_cause(error), kind)


def _cause_errno(*codes: int) -> Callable[[BaseException, ProbeState], bool]:
    def check(error: BaseException, _state: ProbeState) -> bool:
        cause = _connect_cause(error)
        return cause is not None and cause.errno in codes

    return check


def _says(*words: str) -> Callable[[BaseException, ProbeState], bool]:
    """No OS error underneath, but the text of the error says one of ``words``."""

    def check(error: BaseException, _state: ProbeState) -> bool:
        text = str(error).lower()
        return _connect_cause(error) is None and any(word in text for word in words)

    return check


def _not_connected(detail: Callable[[BaseException], str]) -> Callable[..., str]:
    return lambda error, state: f"could not connect to {state.url}: {detail(error)}"


def _verify_message(error: BaseException) -> str:
    cause = _connect_cause(error)
    return f"certificate verification failed ({getattr(cause, 'verify_message', None)})"


def _tls_reason(error: BaseException) -> str:
    return f"TLS handshake failed ({getattr(_connect_cause(error), 'reason', None) or 'unknown'})"


def _os_text(error: BaseException) -> str:
    cause = _connect_cause(error)
    return ((cause.strerror if cause is not None else None) or "connection failed").lower()


def _too_large(limit: Callable[[Any, ProbeState], int | None]) -> Callable[..., str]:
    return lambda error, state: (
        f"{state.url} sent a response larger than {(limit(error, state) or 0) // MiB} MiB "
        f"during {state.phase}"
    )


def _timed_out(_error: BaseException, state: ProbeState) -> str:
    return (
        f"{state.url} did not complete the probe within {state.timeout:g}s (stuck in {state.phase})"
    )


def _answered_http(status: Callable[[Any, ProbeState], int | None]) -> Callable[..., str]:
    return lambda error, state: (
        f"{state.url} answered {_http_label(status(error, state) or 0)} during {state.phase}"
    )


def _challenged(error: McpFailure, state: ProbeState) -> str:
    return challenge.explain(
        f"{state.url} (during {state.phase})", error.status or 0, challenge.parse(error.challenge)
    )


def _asks_scope(error: McpFailure, _state: ProbeState) -> bool:
    found = challenge.parse(error.challenge)
    return error.status in (401, 403) and found is not None and found.insufficient_scope


def _not_json_rpc(_error: BaseException, state: ProbeState) -> str:
    return f"{state.url} answered {state.phase} with a body that is not valid JSON-RPC"


def _not_mcp(text: Callable[[Any], str]) -> Callable[..., str]:
    return lambda error, state: (
        f"{state.url} gave an answer that is not MCP during {state.phase}: {_one_line(text(error))}"
    )


def _rpc_error(text: Callable[[Any], str]) -> Callable[..., str]:
    return lambda error, state: (
        f"{state.url} answered {state.phase} with error {error.code}: {_one_line(text(error))}"
    )


# The SDK's client fails with httpx2's errors, the lean one with the pool's (net/pool.py).
_CONNECT = (httpx2.ConnectError, ConnectFailed)
_MCP = mcp.MCPError

RULES: tuple[Rule[Any], ...] = (
    # Bounds of the probe itself: whatever the SDK made of the aborted read.
    Rule(
        BaseException,
        "ResponseTooLarge",
        lambda _e, s: (
            f"{s.url} sent more than {(s.probe_limit or 0) // MiB} MiB in one probe "
            f"(stopped in {s.phase})"
        ),
        when=lambda _e, s: s.probe_limit is not None,
    ),
    Rule(
        BaseException,
        "ResponseTooLarge",
        _too_large(lambda _e, s: s.response_limit),
        when=lambda _e, s: s.response_limit is not None,
    ),
    Rule(ResponseTooLarge, "ResponseTooLarge", _too_large(lambda e, _s: e.limit)),
    # The deadline.
    Rule(TimeoutError, "Timeout", _timed_out),
    Rule(httpx2.TimeoutException, "Timeout", _timed_out),
    # No connection: the OS error underneath says why; without one, the error's text.
    Rule(
        _CONNECT,
        "TLSError",
        _not_connected(_verify_message),
        when=_cause_is(ssl.SSLCertVerificationError),
    ),
    Rule(_CONNECT, "TLSError", _not_connected(_tls_reason), when=_cause_is(ssl.SSLError)),
    Rule(
        _CONNECT,
        "Unreachable",
        _not_connected(lambda _e: "host name not resolved"),
        when=_cause_is(socket.gaierror),
    ),
    Rule(
        _CONNECT,
        "Unreachable",
        _not_connected(lambda _e: "connection refused"),
        when=_cause_errno(errno.ECONNREFUSED),
    ),
    Rule(
        _CONNECT,
        "Unreachable",
        _not_connected(lambda _e: "no route to host"),
        when=_cause_errno(errno.EHOSTUNREACH, errno.ENETUNREACH),
    ),
    Rule(
        _CONNECT,
        "Unreachable",
        _not_connected(_os_text),
        when=lambda e, _s: _connect_cause(e) is not None,
    ),
    Rule(
        _CONNECT,
        "Unreachable",
        _not_connected(lambda _e: "connection refused"),
        when=_says("refused", "all connection attempts failed"),
    ),
    Rule(
        _CONNECT,
        "Unreachable",
        _not_connected(lambda _e: "host name not resolved"),
        when=_says("name or service not known", "nodename"),
    ),
    Rule(
        _CONNECT,
        "TLSError",
        _not_connected(lambda _e: "TLS handshake failed"),
        when=_says("certificate", "ssl", "tls"),
    ),
    Rule(_CONNECT, "Unreachable", _not_connected(lambda _e: "connection failed")),
    # The server's authorization layer said no: what its challenge asks for.
    Rule(McpFailure, "InsufficientScope", _challenged, when=_asks_scope),
    Rule(McpFailure, "AuthRequired", _challenged, when=lambda e, _s: e.status == 401),
    # An HTTP error status, seen by httpx2, by the session, or behind the SDK's error.
    Rule(
        McpFailure,
        "HTTPError",
        _answered_http(lambda e, _s: e.status),
        when=lambda e, _s: e.status is not None,
    ),
    Rule(httpx2.HTTPStatusError, "HTTPError", _answered_http(lambda e, _s: e.response.status_code)),
    Rule(
        _MCP,
        "HTTPError",
        _answered_http(lambda _e, s: s.error_status),
        when=lambda _e, s: s.error_status is not None,
    ),
    # The session's failures: a timeout of its own, a body that is not JSON, an answer that
    # is not MCP (or not to this request), a JSON-RPC error.
    Rule(McpFailure, "Timeout", _timed_out, when=lambda e, _s: e.fault == "timeout"),
    Rule(
        McpFailure,
        "CredentialsUnavailable",
        lambda e, _s: e.message,
        when=lambda e, _s: e.fault == "credentials",
    ),
    Rule(McpFailure, "ProtocolError", _not_json_rpc, when=lambda e, _s: e.fault == "json"),
    Rule(
        McpFailure,
        "ProtocolError",
        _not_mcp(lambda e: e.message),
        when=lambda e, _s: e.fault != "rpc",
    ),
    Rule(
        McpFailure,
        "ProtocolError",
        _not_mcp(lambda e: e.detail or ""),
        when=lambda e, _s: e.code in (INVALID_REQUEST, CONNECTION_CLOSED),
    ),
    Rule(McpFailure, "ServerError", _rpc_error(lambda e: e.detail or "")),
    # JSON-RPC errors.
    Rule(_MCP, "ProtocolError", _not_json_rpc, when=lambda e, _s: e.code == PARSE_ERROR),
    Rule(
        _MCP,
        "ProtocolError",
        _not_mcp(lambda e: e.error.message),
        when=lambda e, _s: e.code in (INVALID_REQUEST, CONNECTION_CLOSED),
    ),
    Rule(_MCP, "ServerError", _rpc_error(lambda e: e.error.message)),
    # Answers that are not MCP, or not HTTP.
    Rule(
        ValidationError,
        "ProtocolError",
        lambda e, s: (
            f"{s.url} gave an answer that does not match the MCP schema during "
            f"{s.phase} ({e.error_count()} validation errors)"
        ),
    ),
    Rule(
        (httpx2.RemoteProtocolError, BrokenHTTP),
        "ProtocolError",
        lambda _e, s: f"{s.url} broke the HTTP protocol during {s.phase}",
    ),
    Rule(
        (httpx2.TransportError, ConnectionLost, NotSent),
        "Unreachable",
        lambda e, s: f"the connection to {s.url} failed during {s.phase} ({type(e).__name__})",
    ),
)
"""How a failure becomes a reason, in order: the first row that applies wins.

A row looks at the first failure of its ``kind`` among the leaves of the raised
exception group (the SDK raises groups from its task groups), so rows of one
kind are alternatives for one failure. Nothing matched: ``ProbeFailed``, with
the types of what was raised."""


def match(error: BaseException, state: ProbeState) -> tuple[Rule[Any], BaseException] | None:
    """The row of :data:`RULES` that explains ``error``, and the failure it looked at."""
    leaves = list(_leaves(error))
    for rule in RULES:
        leaf = next((leaf for leaf in leaves if isinstance(leaf, rule.kind)), None)
        if leaf is not None and rule.when(leaf, state):
            return rule, leaf
    return None


def refusal_error(state: ProbeState, refused: Refused) -> ProbeError:
    """The probe's failure for a destination the policy refused (also kept in ``state``)."""
    error = ProbeError(
        "DestinationRefused",
        f"{state.url} was not contacted: {refused} "
        "(the operator's egress policy; see docs/security.md)",
    )
    state.failure = error
    return error


def release(failure: BaseException) -> None:
    """Let the finished frames of ``failure``'s traceback (and of its causes') drop their
    locals. A failure found while a page was being read (``TooManyTools``) holds that page,
    parsed, in those frames for as long as the failure lives; released, it holds only its
    words."""
    seen: set[int] = set()
    current: BaseException | None = failure
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        traceback.clear_frames(current.__traceback__)
        current = current.__cause__ or current.__context__


def reraise_cancellation() -> None:
    """Raise ``CancelledError`` when the current task was cancelled and a library turned the
    cancellation into an error of its own (anyio's closed streams in the SDK's task groups,
    say). A cancelled probe must end cancelled: as a failure, its caller would write
    ``ProbeFailed`` to status and carry on, and a shutdown would wait for it. The probe's own
    deadline is not a cancellation of the task (anyio takes its cancel back)."""
    if cancelling():
        raise asyncio.CancelledError


def translate(error: BaseException, state: ProbeState) -> ProbeError:
    """One ProbeError for whatever the SDK, httpx2 or the deadline raised."""
    leaves = list(_leaves(error))
    already = next((leaf for leaf in leaves if isinstance(leaf, ProbeError)), None)
    if already is not None:  # raised by the probe's own checks: it says it best
        return already
    if state.failure is not None:
        return state.failure
    for leaf in leaves:
        if isinstance(leaf, TokenError):  # the token endpoint's failure, in its own words
            return ProbeError(leaf.reason, f"{leaf.message} (for {state.url})")
        if isinstance(leaf, McpFailure) and leaf.limit is not None:
            return ProbeError(leaf.limit, leaf.message)
        if isinstance(leaf, ConnectFailed) and isinstance(leaf.__cause__, Refused):
            return refusal_error(state, leaf.__cause__)
    found = match(error, state)
    if found is not None:
        rule, leaf = found
        return ProbeError(rule.reason, rule.message(leaf, state))
    names = ", ".join(sorted({type(leaf).__name__ for leaf in leaves}))
    return ProbeError(
        "ProbeFailed", f"the probe of {state.url} failed during {state.phase}: {names}"
    )


def _one_line(text: str) -> str:
    """Server-chosen text fit for a one-sentence message: one line, bounded."""
    return cut(" ".join(text.split()), MAX_SERVER_TEXT_CHARS)


def scrub(error: ProbeError, headers: Mapping[str, str]) -> ProbeError:
    """Mask any header value a server might have echoed into the message (in any of the
    forms :class:`~mcp_operator.mcp.scrub.Scrubber` knows)."""
    message = Scrubber(headers.values())(error.message)
    if message == error.message:
        return error
    return ProbeError(error.reason, message)
