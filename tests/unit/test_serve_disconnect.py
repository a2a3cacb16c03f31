"""A lost connection told to the requests that watch for it (serve.deadlines + asgi), over a
real uvicorn server on our protocol and real sockets."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

from mcp_operator.serve import asgi, process

REQUEST = b"POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}"


class Watching:
    """An app whose one route waits, watching for its caller to go, until told."""

    def __init__(self) -> None:
        self.extension: Any = None
        self.gone = asyncio.Event()
        self.inside = asyncio.Event()
        self.tasks_inside = 0
        self.release = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await asgi.serve_lifespan(receive, send)
            return
        await receive()  # the body
        self.extension = (scope.get("extensions") or {}).get(asgi.DISCONNECT_WATCH)
        before = len(asyncio.all_tasks())
        with asgi.watching_disconnect(scope, receive, self.gone.set):
            self.tasks_inside = len(asyncio.all_tasks()) - before
            self.inside.set()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await self.release.wait()
        await asgi.respond_json(send, 200, b"{}")


@contextlib.asynccontextmanager
async def serving(app: Watching) -> AsyncIterator[int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = process.server(app, host="127.0.0.1", port=port, log_level="WARNING", grace_seconds=1)
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(10):
        while not server.started:  # noqa: ASYNC110 - uvicorn sets a flag, not an event
            await asyncio.sleep(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        await task


async def test_a_caller_that_hangs_up_is_told_by_the_protocol_without_a_task() -> None:
    app = Watching()
    async with serving(app) as port:
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(REQUEST)
        await asyncio.wait_for(app.inside.wait(), 5)
        assert app.extension is not None, "our protocol offers the disconnect watch"
        assert app.tasks_inside == 0, "no watcher task while the protocol watches"
        assert not app.gone.is_set()
        writer.close()
        await asyncio.wait_for(app.gone.wait(), 5)
        app.release.set()


async def test_a_caller_that_stays_is_answered_and_never_reported_gone() -> None:
    app = Watching()
    async with serving(app) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(REQUEST)
        await asyncio.wait_for(app.inside.wait(), 5)
        app.release.set()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200")
        writer.close()
        await asyncio.sleep(0.1)  # the hang-up after the answer reaches nobody
        assert not app.gone.is_set()


async def test_a_watch_begun_after_the_connection_was_lost_reports_it_soon() -> None:
    app = Watching()
    async with serving(app) as port:
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(REQUEST)
        await asyncio.wait_for(app.inside.wait(), 5)
        writer.close()
        await asyncio.wait_for(app.gone.wait(), 5)
        late = asyncio.Event()
        stop = app.extension["watch"](late.set)
        await asyncio.wait_for(late.wait(), 1)
        stop()
        app.release.set()


async def test_without_the_extension_a_task_watches_the_receive_channel() -> None:
    gone = asyncio.Event()
    hung_up = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await hung_up.wait()
        return {"type": "http.disconnect"}

    with asgi.watching_disconnect({"type": "http"}, receive, gone.set):
        hung_up.set()
        await asyncio.wait_for(gone.wait(), 1)
