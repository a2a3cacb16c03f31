"""Resumable SSE streams: event ids and the bounded store that replays what a client missed.

Owns the resumability of the Streamable HTTP transport in its handshake era (2025-11-25
"Resumability and Redelivery"; 2026-07-28 removed SSE event ids and ``Last-Event-ID``, so
its streams carry none), for the adapter and the bridge alike:

- **Ids.** Every event of a resumable stream carries ``id: <stream>-<seq>``: the stream's
  unguessable id (64 random bits, so the id names the stream it belongs to and no other
  session can guess it) and the event's number on that stream, from 1. A stream opens
  with a *priming* event (an id and empty data), so that a connection cut before the
  first message is resumable too.
- **The store** keeps each stream's events (the framed bytes, as sent) in order, bounded
  per stream in count (``max_events``) and bytes (``max_bytes``), the oldest dropped
  first, and over all streams in bytes (``max_total_bytes``): past it the least recently
  written stream is forgotten. A stream is forgotten ``ttl_seconds`` after its last
  event (after it ended, or when its client never came back). Memory is therefore
  bounded whatever clients do: a client that never reconnects leaves at most its
  bounded log behind, for at most the time limit.
- **Replay.** ``resume(last_event_id, owner, now)`` finds the stream a ``Last-Event-ID``
  names — only among the streams of the same ``owner`` (the legacy session): the spec's
  "MUST NOT replay messages that would have been delivered on a different stream" holds
  by construction, and another session's id is as unknown as a made-up one — and gives
  the events after it; what was not kept (dropped by a bound, or the whole stream
  forgotten) is :class:`ReplayGone`, garbage :class:`BadEventId`. The endpoint answers
  those (``replay_refusal``): 400 for an id that is not ours in form, 404 for one we no
  longer know (the 2025-11-25 text names no status for it; 404 "Not Found" is HTTP's
  word for it, and a client that gets it learns it cannot resume; the session itself is
  untouched).

Pure: no sockets, no clock of its own (callers pass ``now``). The pump that writes a
stream and the endpoint that answers a ``GET`` with ``Last-Event-ID`` are the callers'
(``serve.endpoint``, ``adapter.front_calls``).
"""

from __future__ import annotations

import re
import secrets
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcp_operator.serve.jsonrpc import dumps
from mcp_operator.serve.sse import SseStream, Waitable

_EVENT_ID = re.compile(r"([0-9a-f]{16})-([1-9][0-9]{0,17})")
MAX_EVENT_ID_LENGTH = 40


class BadEventId(ValueError):
    """A ``Last-Event-ID`` that is not of our form: 400."""


class ReplayGone(LookupError):
    """A ``Last-Event-ID`` of a stream (or events) no longer kept, or never ours: 404."""


def parse_event_id(raw: str) -> tuple[str, int]:
    """``<stream>-<seq>`` → (stream, seq); raises BadEventId for anything else."""
    if len(raw) > MAX_EVENT_ID_LENGTH:
        raise BadEventId("Last-Event-ID is too long")
    match = _EVENT_ID.fullmatch(raw)
    if match is None:
        raise BadEventId("Last-Event-ID is not an event id of this server")
    return match.group(1), int(match.group(2))


def frame(event_id: str, message: Any | None, event: str = "message") -> bytes:
    """One SSE event with its id: a message, or (``None``) the priming event."""
    if message is None:
        return b"id: " + event_id.encode() + b"\ndata: \n\n"
    return (
        b"id: "
        + event_id.encode()
        + b"\nevent: "
        + event.encode()
        + b"\ndata: "
        + dumps(message)
        + b"\n\n"
    )


@dataclass(eq=False)
class StreamLog(Waitable):
    """One resumable stream's kept events, and a wake-up for whoever tails it."""

    id: str
    owner: str
    """Who may resume it: the legacy session's id."""
    written: float
    """When its last event was written (the time bound counts from here)."""
    events: deque[tuple[int, bytes]] = field(default_factory=deque)
    bytes: int = 0
    seq: int = 0
    ended: bool = False
    """The stream's last event (a call's answer) is written: a resume ends after it."""
    dropped: int = 0
    """Events dropped by the bounds (the oldest kept is then ``seq - len(events) + 1``)."""
    standalone: bool = False
    """A session's GET stream (resumed, it goes on as the session's stream), not a call's."""

    def __post_init__(self) -> None:
        Waitable.__init__(self)


class EventStore:
    """Every resumable stream of one server, bounded in count, bytes and time."""

    def __init__(
        self,
        *,
        max_events: int = 1000,
        max_bytes: int = 1024 * 1024,
        max_total_bytes: int = 32 * 1024 * 1024,
        ttl_seconds: float = 300.0,
    ) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.max_total_bytes = max_total_bytes
        self.ttl_seconds = ttl_seconds
        self._streams: OrderedDict[str, StreamLog] = OrderedDict()
        """By id, least recently written first."""
        self.total_bytes = 0
        self.forgotten = 0
        """Streams forgotten by the bounds before they expired, since start."""

    def __len__(self) -> int:
        return len(self._streams)

    def open(self, owner: str, now: float, *, standalone: bool = False) -> tuple[StreamLog, bytes]:
        """A new stream of ``owner``'s, and its priming event (to send first)."""
        self.expire(now)
        stream_id = secrets.token_hex(8)
        while stream_id in self._streams:  # pragma: no cover - 64 random bits
            stream_id = secrets.token_hex(8)
        log = StreamLog(id=stream_id, owner=owner, written=now, standalone=standalone)
        self._streams[stream_id] = log
        return log, self.append(log, None, now)

    def append(
        self, log: StreamLog, message: Any | None, now: float, *, last: bool = False
    ) -> bytes:
        """Number, frame and keep one event of ``log``; returns the frame to send. ``last``:
        the stream's final event (a call's answer)."""
        log.seq += 1
        data = frame(f"{log.id}-{log.seq}", message)
        if log.id in self._streams:
            log.events.append((log.seq, data))
            log.bytes += len(data)
            self.total_bytes += len(data)
            log.written = now
            self._streams.move_to_end(log.id)
            while log.events and (len(log.events) > self.max_events or log.bytes > self.max_bytes):
                self._drop_oldest(log)
            while self.total_bytes > self.max_total_bytes and self._streams:
                oldest = next(iter(self._streams.values()))
                self._forget(oldest)
                self.forgotten += 1
        if last:
            log.ended = True
        log.wake()
        return data

    def end(self, log: StreamLog) -> None:
        """The stream will get no more events (its call ended without an answer to send)."""
        log.ended = True
        log.wake()

    def resume(
        self, last_event_id: str, owner: str, now: float
    ) -> tuple[StreamLog, list[tuple[int, bytes]]]:
        """The stream ``last_event_id`` belongs to and its kept events after it.

        Raises BadEventId (not our form) or ReplayGone (unknown, another owner's, expired,
        or events after it dropped by a bound).
        """
        stream_id, seq = parse_event_id(last_event_id)
        self.expire(now)
        log = self._streams.get(stream_id)
        if log is None or log.owner != owner or seq > log.seq:
            raise ReplayGone("Unknown or expired Last-Event-ID")
        first_kept = log.seq - len(log.events) + 1
        if seq + 1 < first_kept:
            raise ReplayGone("The events after Last-Event-ID are no longer kept")
        return log, self.after(log, seq)

    def after(self, log: StreamLog, seq: int) -> list[tuple[int, bytes]]:
        """``log``'s kept events after ``seq``, numbered (a tailing reader's next ones)."""
        return [(number, data) for number, data in log.events if number > seq]

    def expire(self, now: float) -> None:
        """Forget the streams whose last event is older than the time bound."""
        while self._streams:
            oldest = next(iter(self._streams.values()))
            if now - oldest.written <= self.ttl_seconds:
                return
            self._forget(oldest)

    def drop_owner(self, owner: str) -> None:
        """Forget every stream of ``owner`` (its session ended)."""
        for log in [log for log in self._streams.values() if log.owner == owner]:
            self._forget(log)

    def _drop_oldest(self, log: StreamLog) -> None:
        _seq, data = log.events.popleft()
        log.bytes -= len(data)
        self.total_bytes -= len(data)
        log.dropped += 1

    def _forget(self, log: StreamLog) -> None:
        self._streams.pop(log.id, None)
        self.total_bytes -= log.bytes
        log.events.clear()
        log.bytes = 0
        log.ended = True
        log.wake()


def replay_refusal(error: BadEventId | ReplayGone) -> tuple[int, bytes]:
    """The HTTP status and text for a ``Last-Event-ID`` that cannot be replayed."""
    if isinstance(error, BadEventId):
        return 400, str(error).encode()
    return 404, str(error).encode()


class ResumableStream(SseStream):
    """A session's GET stream whose every event is numbered and kept in the store."""

    __slots__ = ("_clock", "_store", "log")

    def __init__(
        self, limit: int, store: EventStore, log: StreamLog, clock: Callable[[], float]
    ) -> None:
        super().__init__(limit)
        self._store = store
        self._clock = clock
        self.log = log

    def push(self, message: dict[str, Any]) -> bool:
        if self.closed:
            return False
        return self.push_raw(self._store.append(self.log, message, self._clock()))
