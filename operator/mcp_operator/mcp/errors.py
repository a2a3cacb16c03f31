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

import errno
import socket
import ssl
from collections.abc import Iterator, Mapping

import httpx2
import mcp
from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST, PARSE_ERROR
from pydantic import ValidationError

from mcp_operator.mcp.naming import cut

MAX_SERVER_TEXT_CHARS = 200
"""Text chosen by the server (error messages) is cut to this length in a ``ProbeError``."""

MiB = 1024 * 1024


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


class ResponseTooLarge(Exception):
    """Raised inside the HTTP client when a response body passes its byte bound, ``limit``."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit} bytes")
        self.limit = limit


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


def _http_error(status: int, state: ProbeState) -> ProbeError:
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


def translate(error: BaseException, state: ProbeState) -> ProbeError:
    """One ProbeError for whatever the SDK, httpx2 or the deadline raised."""
    leaves = list(_leaves(error))
    for leaf in leaves:
        if isinstance(leaf, ProbeError):
            return leaf
    if state.probe_limit is not None:
        return ProbeError(
            "ResponseTooLarge",
            f"{state.url} sent more than {state.probe_limit // MiB} MiB in one probe "
            f"(stopped in {state.phase})",
        )
    response_limit = state.response_limit
    for leaf in leaves:
        if response_limit is None and isinstance(leaf, ResponseTooLarge):
            response_limit = leaf.limit
    if response_limit is not None:
        return ProbeError(
            "ResponseTooLarge",
            f"{state.url} sent a response larger than {response_limit // MiB} MiB "
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


def scrub(error: ProbeError, headers: Mapping[str, str]) -> ProbeError:
    """Mask any header value a server might have echoed into the message."""
    secrets: set[str] = set()
    for value in headers.values():
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
