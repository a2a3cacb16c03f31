"""ASGI plumbing for the MCP endpoints: types, lifespan, bounded bodies, responses, disconnects.

Owns the bytes-level conversation with the ASGI server: how the lifespan
protocol is answered, which request headers are read, how a body is read
within a size limit, how a plain-text or JSON response is sent, how a
streamed chunk is written and how a disconnect is noticed. Leaves what the
bodies mean (JSON-RPC, SSE framing, MCP eras) to ``jsonrpc``, ``sse`` and
``era``, and routing to the front that uses it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

JSON_HEADERS = [(b"content-type", b"application/json")]
MCP_REQUEST_HEADERS = frozenset(
    {
        b"host",
        b"origin",
        b"accept",
        b"content-type",
        b"content-length",
        b"mcp-session-id",
        b"mcp-protocol-version",
        b"last-event-id",
        b"authorization",
        b"mcp-operator-authorization",
    }
)
"""The request headers an MCP endpoint reads (the rest are not decoded)."""


async def serve_lifespan(
    receive: Receive,
    send: Send,
    *,
    start: Callable[[], Awaitable[None]] | None = None,
    stop: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Answer the ASGI lifespan protocol until shutdown, running ``start`` and ``stop`` if given.

    A ``start`` that raises is reported as ``lifespan.startup.failed`` with its message (the
    ASGI server then exits); without callbacks the app is started and stopped by its process.
    """
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            if start is not None:
                try:
                    await start()
                except Exception as error:
                    await send({"type": "lifespan.startup.failed", "message": str(error)})
                    return
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            if stop is not None:
                await stop()
            await send({"type": "lifespan.shutdown.complete"})
            return


class BodyTooLargeError(Exception):
    """The request body is over the limit: the caller answers 413."""


class ClientGoneError(Exception):
    """The client disconnected while its request was read or answered."""


def request_headers(scope: Scope) -> dict[bytes, str]:
    """The MCP request headers of ``scope``, by lowercase name (the last copy wins), without
    the optional whitespace around a field value (RFC 9110 §5.5)."""
    headers: dict[bytes, str] = {}
    for key, value in scope["headers"]:
        if key in MCP_REQUEST_HEADERS:
            headers[key] = value.decode("latin-1").strip(" \t")
    return headers


async def read_body(headers: dict[bytes, str], receive: Receive, limit: int) -> bytes:
    length = headers.get(b"content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise BodyTooLargeError
    message = await receive()
    if message["type"] == "http.disconnect":
        raise ClientGoneError
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        if len(body) > limit:
            raise BodyTooLargeError
        return body
    chunks = [body]
    size = len(body)
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGoneError
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLargeError
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


DISCONNECT_WATCH = "mcp_operator.disconnect"
"""The scope extension (``scope["extensions"]``) through which our HTTP protocol
(``serve.deadlines``) tells a request that its connection was lost: its ``"watch"``,
``watch(on_gone)``, calls ``on_gone`` then (soon, if it already was) and returns the function
that stops watching."""


def disconnect_watch(
    scope: Scope | None,
) -> Callable[[Callable[[], None]], Callable[[], None]] | None:
    """The request's :data:`DISCONNECT_WATCH` ``watch`` function, if its server offers one."""
    extensions = scope.get("extensions") if scope is not None else None
    extension = extensions.get(DISCONNECT_WATCH) if extensions else None
    return extension["watch"] if extension is not None else None


async def watch_disconnect(receive: Receive, on_gone: Callable[[], None]) -> None:
    """Call ``on_gone`` when the client disconnects (run as a task; cancel it when done)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            on_gone()
            return


@contextlib.contextmanager
def watching_disconnect(
    scope: Scope | None, receive: Receive, on_gone: Callable[[], None]
) -> Iterator[None]:
    """While inside: ``on_gone`` is called when the client disconnects. Told by the protocol
    where it offers :data:`DISCONNECT_WATCH` (no task per request: this is every 2026-07-28
    call's path), else noticed by :func:`watch_disconnect` in a task of its own, cancelled
    on the way out."""
    watch = disconnect_watch(scope)
    if watch is not None:
        stop = watch(on_gone)
        try:
            yield
        finally:
            stop()
        return
    watcher = asyncio.create_task(watch_disconnect(receive, on_gone))
    try:
        yield
    finally:
        watcher.cancel()


async def send_more(send: Send, body: bytes) -> None:
    try:
        await send({"type": "http.response.body", "body": body, "more_body": True})
    except OSError as error:
        raise ClientGoneError from error


async def respond_json(
    send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [*JSON_HEADERS, (b"content-length", str(len(body)).encode())]
    if extra:
        headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def respond_plain(
    send: Send,
    status: int,
    body: bytes,
    extra: list[tuple[bytes, bytes]] | None = None,
    content_type: bytes = b"text/plain; charset=utf-8",
) -> None:
    headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
    ]
    if extra:
        headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
