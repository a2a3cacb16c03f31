"""Resuming a request's answer stream that was cut before its response: where it got to.

2025-11-25's "Resumability and Redelivery": a legacy session's answer stream whose events
had ids is reopened with ``GET`` + ``Last-Event-ID``, never by sending the request again.
This module owns the cursor of such a stream (:class:`StreamCursor`: its last event id, how
many it gave, the wait the server asked for) and the bounds of resuming it
(:data:`RESUME_ATTEMPTS` empty reopenings in a row, :data:`MAX_RESUMES` in all, the pauses
between them). The reopening itself is
:class:`~mcp_operator.mcp.session_exchange.SessionExchange`'s.
"""

from __future__ import annotations

MAX_EVENT_ID_CHARS = 256
"""A longer event id of the server's is not kept as the change stream's cursor."""
RESUME_ATTEMPTS = 3
"""A request's answer stream cut before its response is reopened (``GET`` with
``Last-Event-ID``) at most this many times in a row without a new event."""
RESUME_PAUSES = (0.1, 0.5, 1.0)
"""Seconds before each of those reopenings (the last repeats), unless the server's SSE
``retry`` says how long to wait."""
MAX_RETRY_SECONDS = 10.0
"""A server's SSE ``retry`` longer than this is taken as this."""
MAX_RESUMES = 1000
"""However many events each brings, a request's answer stream is reopened at most this often
(a polling server's, too)."""


class StreamCursor:
    """Where a request's answer stream got to: its last event id (the ``Last-Event-ID`` of
    a resume; a longer id than :data:`MAX_EVENT_ID_CHARS` makes the stream not resumable
    until the next), how many ids it gave, and the wait the server last asked of a
    reconnect (SSE ``retry``, seconds; 2025-11-25's "polling" servers close a stream on
    purpose after one)."""

    __slots__ = ("events", "last", "retry")

    def __init__(self) -> None:
        self.last: str | None = None
        self.events = 0
        self.retry: float | None = None

    def saw(self, event_id: str) -> None:
        self.events += 1
        self.last = event_id if event_id and len(event_id) <= MAX_EVENT_ID_CHARS else None

    def asked_to_wait(self, milliseconds: int) -> None:
        self.retry = min(milliseconds / 1000, MAX_RETRY_SECONDS)

    def pause(self, idle: int) -> float:
        """Seconds before the next reopening: the server's ``retry`` (at least the first of
        :data:`RESUME_PAUSES`), else the back-off after ``idle`` empty reopenings."""
        if self.retry is not None:
            return max(self.retry, RESUME_PAUSES[0])
        return RESUME_PAUSES[min(idle, len(RESUME_PAUSES) - 1)]
