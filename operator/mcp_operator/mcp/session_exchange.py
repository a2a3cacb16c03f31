"""One request of a session on the wire, and its answer: read, matched, resumed when cut.

:class:`SessionExchange` posts one JSON-RPC request and takes its answer apart:

- **Answers** are JSON or an SSE stream (one reader, :mod:`~mcp_operator.mcp.sse`), read by
  the caller's ``read_body``. Every answer's id is checked against its request, strictly by
  type and value (``true`` and ``"1"`` are not ``1``), for JSON and SSE alike: a response to
  another request means the connection is out of step, so it is dropped and the call fails;
  it is never a result.
- **An HTTP error status** is a lost legacy session (:class:`SessionLost`: a 404, or a 400
  that names the session) or an ``http`` failure with the JSON-RPC error its body carried; a
  redirect is not followed.
- **Related messages**: the requests and notifications a server sends on the request's own
  response stream go to the caller's :class:`Related` (else they are skipped); when the
  request is cancelled the server is told (legacy: ``notifications/cancelled``, in the
  background; 2026-07-28: the request's stream is closed).
- **A cut answer stream** of a legacy session's request, whose events had ids, is resumed
  with ``GET`` + ``Last-Event-ID`` (2025-11-25 "Resumability and Redelivery"), never by
  sending the request again; bounded by :mod:`~mcp_operator.mcp.resume` and the caller's
  deadline.

When to connect and what a lost session costs are :mod:`~mcp_operator.mcp.session`'s;
headers and credentials :mod:`~mcp_operator.mcp.session_wire`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from mcp_operator.mcp import messages, sse
from mcp_operator.mcp.bounds import Capped
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.resume import MAX_RESUMES, RESUME_ATTEMPTS, StreamCursor
from mcp_operator.mcp.session_wire import CLOSE_SECONDS, SessionWire
from mcp_operator.net.http1 import Http1Error, Http1Response

logger = logging.getLogger("mcp_operator.mcp.session")  # one logger for the whole session

ERROR_BODY_BYTES = 64 * 1024
"""Of an HTTP error's body, this much is read (a JSON-RPC error, a session complaint)."""


def not_followed(answer: Http1Response) -> None:
    """A redirect is never followed (it would carry the session's headers elsewhere): raise
    a failure that says where it pointed, without the credentials in that URL."""
    status = answer.status_code
    if 300 <= status < 400 and answer.headers.get("location"):
        where = messages.display_url(answer.headers["location"])
        raise McpFailure(
            "mcp",
            f"HTTP {status} redirect to {where}, which is not followed: use that URL "
            "as the server's endpoint",
        )


class Related(Protocol):
    """Who hears what a server says on one request's response stream before answering it."""

    def heard(self, message: dict[str, Any]) -> None:
        """A request or notification of the server, about the request in flight; called in
        order as the stream is read (it must not block: answer later, with ``respond``)."""
        ...


class SessionLost(Exception):
    """A legacy server said the session ``session_id`` is gone: handshake again."""

    def __init__(self, session_id: str | None) -> None:
        super().__init__("session lost")
        self.session_id = session_id


class SessionExchange(SessionWire):
    """A session's requests on the wire, each matched to its own answer."""

    async def _exchange(
        self,
        method: str,
        params: Mapping[str, Any],
        *,
        modern: str | None = None,
        related: Related | None = None,
    ) -> dict[str, Any]:
        """One request on the wire; its result, or the failure it got. With ``related``, a
        cancelled exchange tells the server (legacy: ``notifications/cancelled``; 2026-07-28:
        the request's stream closed)."""
        params = self._stamped(params, modern)
        request_id = next(self._ids)
        body = messages.body(request_id, method, params)
        headers = self._request_headers(method, modern, params)
        session_id = self.session_id if modern is None else None
        legacy = not self.modern and modern is None
        try:
            answer = await self._send("POST", headers, body)
        except asyncio.CancelledError:
            if related is not None and legacy:
                self._tell_cancelled(request_id, session_id)  # it may have been sent
            raise
        answer.hold()  # its connection carries nothing else until the answer is checked
        try:
            not_followed(answer)
            if answer.status_code >= 300:
                await self._refusal(answer, method, session_id)
            if method == "initialize":
                self.session_id = answer.headers.get("mcp-session-id")
            resume = (session_id, method) if legacy and session_id is not None else None
            reply = await self._reply(answer, request_id, related, resume)
        except asyncio.CancelledError:
            if related is not None:
                answer.discard()  # the stream closed: how a 2026-07-28 server hears it
                if legacy:
                    self._tell_cancelled(request_id, session_id)
            raise
        except Http1Error as error:
            raise McpFailure(
                "connection", f"the connection to {self.name} failed ({error})"
            ) from error
        finally:
            await answer.aclose()
        return self._result(method, reply)

    async def _refusal(self, answer: Http1Response, method: str, session_id: str | None) -> None:
        """Raise what an HTTP error status means: a lost session, or an ``http`` failure
        with the JSON-RPC error its body carried."""
        status = answer.status_code
        body = b""
        async for chunk in answer.aiter_bytes():
            body += chunk
            if len(body) > ERROR_BODY_BYTES:
                break
        if session_id is not None and (
            status == 404 or (status == 400 and b"session" in body.lower())
        ):
            raise SessionLost(session_id)
        code: int | None = None
        data: Any = None
        detail: str | None = None
        if messages.media(answer) == "application/json" and len(body) <= ERROR_BODY_BYTES:
            error = messages.loads(body)
            error = error.get("error") if isinstance(error, dict) else None
            if isinstance(error, dict) and type(error.get("code")) is int:
                code, data = error["code"], error.get("data")
                detail = str(error.get("message", ""))
        raise McpFailure(
            "http",
            f"{self.name} answered {method} with HTTP {status}",
            status=status,
            code=code,
            data=data,
            detail=detail,
            challenge=answer.headers.get("www-authenticate") if status in (401, 403) else None,
        )

    async def _reply(
        self,
        answer: Http1Response,
        request_id: int,
        related: Related | None = None,
        resume: tuple[str, str] | None = None,
    ) -> Mapping[str, Any]:
        """The JSON-RPC response to ``request_id``: a JSON body, or an event of an SSE
        stream (the requests and notifications before it go to ``related``, else are
        skipped). With ``resume`` (a legacy session's id and the method), a stream cut or
        ended after an event id and before the response is resumed (:meth:`_resumed`)."""
        media = messages.media(answer)
        if media not in ("application/json", "text/event-stream"):
            raise McpFailure("mcp", f"unexpected content type {media or 'none'!r}")
        if media == "application/json":
            reader = self._read_body
            if isinstance(reader, Capped) and (whole := answer.whole()) is not None:
                # A small answer comes in the read of its head: no reading loop.
                if len(whole) > reader.limit:
                    raise reader.refuse()
                message = self._decode(whole)
            else:
                chunks = reader(answer, "json")
                async with contextlib.aclosing(aiter(chunks)) as reading:  # type: ignore[type-var]
                    message = self._decode(b"".join([chunk async for chunk in reading]))
            if not messages.answers(message, request_id):
                answer.discard()
                raise McpFailure("mismatch", "the answer is not the response to the request")
            return message
        cursor = StreamCursor()
        try:
            found = await self._answer_in(answer, request_id, related, cursor)
        except Http1Error:
            if resume is None or cursor.last is None:
                raise
            found = None  # cut mid-stream, after an event id: resumable
        if found is not None:
            return found
        if resume is not None and cursor.last is not None:
            return await self._resumed(resume, request_id, related, cursor)
        raise McpFailure("connection", f"{self.name} ended the stream before answering")

    async def _answer_in(
        self,
        answer: Http1Response,
        request_id: int,
        related: Related | None,
        cursor: StreamCursor,
    ) -> Mapping[str, Any] | None:
        """The response to ``request_id`` on the SSE stream ``answer``, or ``None`` when the
        stream ended first; the requests and notifications before it go to ``related``,
        the events' ids to ``cursor``."""
        body = self._read_body(answer, "sse")
        events = sse.messages(body, on_id=cursor.saw, on_retry=cursor.asked_to_wait)
        async with contextlib.aclosing(events):
            async for data in events:
                message = self._decode(data)
                if messages.answers(message, request_id):
                    return message
                if related is not None and isinstance(message.get("method"), str):
                    related.heard(message)
                    continue
                if "method" not in message:  # a response, but to another request
                    answer.discard()
                    raise McpFailure("mismatch", "the answer is not the response to the request")
        return None

    async def _resumed(
        self,
        resume: tuple[str, str],
        request_id: int,
        related: Related | None,
        cursor: StreamCursor,
    ) -> Mapping[str, Any]:
        """The response to ``request_id`` after its answer stream was cut (or ended) before
        it, read on ``GET`` streams with ``Last-Event-ID`` (2025-11-25 "Resumability and
        Redelivery"; ``resume``: the legacy session and the method). The request itself is
        never sent again. Each reopening waits the server's SSE ``retry``, else a short
        back-off. Bounded: a refused ``GET`` fails the call, and so do
        :data:`RESUME_ATTEMPTS` reopenings in a row that bring no new event (a failed
        connection, a stream that replays nothing; a stream that ends cleanly after the
        server asked for a ``retry`` is a poll of a 2025-11-25 polling server, not counted),
        the session's end, or :data:`MAX_RESUMES` reopenings; the caller's deadline bounds
        it all."""
        session_id, method = resume
        idle = 0
        for reopened in range(1, MAX_RESUMES + 1):
            if self.session_id != session_id:
                raise McpFailure(
                    "connection",
                    f"{self.name} cut the answer stream of {method}, and its session ended "
                    "before the stream could be resumed",
                )
            await asyncio.sleep(cursor.pause(idle))
            seen = cursor.events
            polled = False
            try:
                found = await self._reopen(method, request_id, related, cursor)
                # a stream that ended cleanly after the server asked for a retry: its poll
                polled = cursor.retry is not None
            except McpFailure as failure:
                if failure.fault not in ("connect", "connection") or failure.status is not None:
                    raise
                logger.debug("Could not resume %s of %s: %s", method, self.name, failure)
                found = None
            if found is not None:
                logger.info(
                    "Resumed the answer stream of %s of %s (%d reopenings)",
                    method,
                    self.name,
                    reopened,
                )
                return found
            idle = 0 if cursor.events > seen or polled else idle + 1
            if idle >= RESUME_ATTEMPTS:
                raise McpFailure(
                    "connection",
                    f"{self.name} cut the answer stream of {method}; {RESUME_ATTEMPTS} "
                    "attempts to resume it with Last-Event-ID replayed nothing",
                )
        raise McpFailure(
            "connection",
            f"{self.name} cut the answer stream of {method} more than {MAX_RESUMES} times",
        )

    async def _reopen(
        self, method: str, request_id: int, related: Related | None, cursor: StreamCursor
    ) -> Mapping[str, Any] | None:
        """One ``GET`` with ``Last-Event-ID``: the response, if it came; ``None`` when the
        stream ended first. A refusal fails the call with its status; a stream that broke is
        a ``connection`` failure without one."""
        headers = self._request_headers("", None)
        headers["accept"] = "text/event-stream"
        del headers["content-type"]
        headers["last-event-id"] = cursor.last or ""
        answer = await self._send("GET", headers, b"")
        answer.hold()
        try:
            media = messages.media(answer)
            if answer.status_code != 200 or media != "text/event-stream":
                answer.discard()
                raise McpFailure(
                    "connection",
                    f"{self.name} cut the answer stream of {method} and refused to resume it "
                    f"(HTTP {answer.status_code} to GET with Last-Event-ID)",
                    status=answer.status_code,
                )
            try:
                return await self._answer_in(answer, request_id, related, cursor)
            except Http1Error as error:
                raise McpFailure(
                    "connection", f"the resumed stream of {method} from {self.name} broke"
                ) from error
        except asyncio.CancelledError:
            answer.discard()  # the resumed stream closed: the caller stopped waiting
            raise
        finally:
            await answer.aclose()

    def _decode(self, text: bytes) -> dict[str, Any]:
        message = messages.loads(text)
        if message is messages.NOT_JSON:
            raise McpFailure("json", f"{self.name} answered with a body that is not JSON")
        if not isinstance(message, dict):
            raise McpFailure("mcp", "the answer is not a JSON-RPC message")
        return message

    def _result(self, method: str, message: Mapping[str, Any]) -> dict[str, Any]:
        result = message.get("result")
        if isinstance(result, dict):
            return result
        error = message.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            text = str(error.get("message", ""))
            raise McpFailure(
                "rpc",
                f"{self.name} answered {method} with error {code}: {' '.join(text.split())[:256]}",
                code=code if type(code) is int else None,
                data=error.get("data"),
                detail=text,
            )
        raise McpFailure("mcp", "the answer has neither a result nor an error")

    def _tell_cancelled(self, request_id: int, session_id: str | None) -> None:
        """Tell a legacy server, in the background, that request ``request_id`` of session
        ``session_id`` is cancelled (the caller stopped waiting: nothing waits for this)."""
        if session_id is None or session_id != self.session_id:
            return  # the session is gone, and the request with it
        params = {"requestId": request_id, "reason": "The caller cancelled the request"}

        async def tell() -> None:
            with contextlib.suppress(McpFailure, OSError):
                async with asyncio.timeout(CLOSE_SECONDS):
                    await self._notify("notifications/cancelled", params)

        task = asyncio.get_running_loop().create_task(tell())
        self._errands.add(task)
        task.add_done_callback(self._errands.discard)
