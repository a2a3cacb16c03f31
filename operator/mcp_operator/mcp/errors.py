"""Probe failures: :class:`ProbeError`, and what the probe had seen when it failed.

A probe can fail in its session, its connections, on its deadline or on one of its own
bounds; :mod:`~mcp_operator.mcp.translation` turns any of those into one
:class:`ProbeError` with a CamelCase ``reason`` (the ``Probed`` condition's reason) and a
one-sentence message that says where the probe was (:class:`ProbeState`). This module owns
those two, the failures the probe's own bounds raise, a refused destination's error,
:func:`scrub` (masks header values a server may have echoed into a message), and what a
failure must let go of (:func:`release`, :func:`reraise_cancellation`). It leaves
connecting to :mod:`~mcp_operator.mcp.probe_client` and the tool walk to
:mod:`~mcp_operator.mcp.discovery`.
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Mapping

from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.scrub import Scrubber
from mcp_operator.net.cancel import cancelling
from mcp_operator.net.egress import Refused


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
        self.received = 0
        self.response_limit: int | None = None
        self.probe_limit: int | None = None
        self.failure: ProbeError | None = None
        """A failure the probe's own checks found inside the HTTP client (such as too many
        tools in a page), where the SDK would only see a broken stream."""


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


def scrub(error: ProbeError, headers: Mapping[str, str]) -> ProbeError:
    """Mask any header value a server might have echoed into the message (in any of the
    forms :class:`~mcp_operator.mcp.scrub.Scrubber` knows)."""
    message = Scrubber(headers.values())(error.message)
    if message == error.message:
        return error
    return ProbeError(error.reason, message)
