"""The table that translates whatever went wrong in a probe into one :class:`ProbeError`.

This module owns the vocabulary of reasons and their sentences: :data:`RULES`, one row per
kind of failure (the session's, the pool's, TLS, the deadline, the probe's own bounds),
:func:`match` (the row that explains a failure) and :func:`translate` (the one
:class:`~mcp_operator.mcp.errors.ProbeError` for it, with what the probe had seen,
:class:`~mcp_operator.mcp.errors.ProbeState`). Server-chosen text in a message is one line,
cut to :data:`MAX_SERVER_TEXT_CHARS`.
"""

from __future__ import annotations

import errno
import socket
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST
from pydantic import ValidationError

from mcp_operator.mcp import challenge
from mcp_operator.mcp.errors import (
    ProbeError,
    ProbeState,
    ResponseTooLarge,
    refusal_error,
)
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.naming import cut
from mcp_operator.mcp.tokens import TokenError
from mcp_operator.net.egress import Refused
from mcp_operator.net.http1 import BrokenHTTP, ConnectFailed, ConnectionLost, NotSent

MAX_SERVER_TEXT_CHARS = 200
"""Text chosen by the server (error messages) is cut to this length in a ``ProbeError``."""

MiB = 1024 * 1024


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
        f"{state.url} gave an answer that is not MCP during {state.phase}: {one_line(text(error))}"
    )


def _rpc_error(text: Callable[[Any], str]) -> Callable[..., str]:
    return lambda error, state: (
        f"{state.url} answered {state.phase} with error {error.code}: {one_line(text(error))}"
    )


# The session fails with the pool's errors (net/http1.py).
_CONNECT = ConnectFailed

RULES: tuple[Rule[Any], ...] = (
    # Bounds of the probe itself: whatever the session made of the aborted read.
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
    # An HTTP error status the session saw.
    Rule(
        McpFailure,
        "HTTPError",
        _answered_http(lambda e, _s: e.status),
        when=lambda e, _s: e.status is not None,
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
        BrokenHTTP,
        "ProtocolError",
        lambda _e, s: f"{s.url} broke the HTTP protocol during {s.phase}",
    ),
    Rule(
        (ConnectionLost, NotSent),
        "Unreachable",
        lambda e, s: f"the connection to {s.url} failed during {s.phase} ({type(e).__name__})",
    ),
)
"""How a failure becomes a reason, in order: the first row that applies wins.

A row looks at the first failure of its ``kind`` among the leaves of the raised
exception (a group's, or what a session's failure wraps), so rows of one kind are
alternatives for one failure. Nothing matched: ``ProbeFailed``, with
the types of what was raised."""


def match(error: BaseException, state: ProbeState) -> tuple[Rule[Any], BaseException] | None:
    """The row of :data:`RULES` that explains ``error``, and the failure it looked at."""
    leaves = list(_leaves(error))
    for rule in RULES:
        leaf = next((leaf for leaf in leaves if isinstance(leaf, rule.kind)), None)
        if leaf is not None and rule.when(leaf, state):
            return rule, leaf
    return None


def translate(error: BaseException, state: ProbeState) -> ProbeError:
    """One ProbeError for whatever the session, the pool or the deadline raised."""
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


def one_line(text: str) -> str:
    """Server-chosen text fit for a one-sentence message: one line, bounded."""
    return cut(" ".join(text.split()), MAX_SERVER_TEXT_CHARS)
