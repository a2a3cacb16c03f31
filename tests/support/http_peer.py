"""Small real HTTP/1.1 servers on loopback, for tests of the wire (net/).

:class:`HttpPeer` is an asyncio server on ``127.0.0.1`` (or another loopback address) that
reads each request to its end (head and ``Content-Length`` body), records it, and answers as
its :class:`Behaviour` says: a JSON echo of the body or what its ``respond`` script returns,
optionally after interim (1xx) answers, held until released, or not at all (the connection
dropped after the request was read, as a Pod killed mid-call). :func:`black_hole` is a
listening socket whose backlog is full, so the kernel drops every further SYN: a connection
attempt to it never completes, like a black-holed address.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field

Answer = tuple[int, dict[str, str], bytes]
"""Status, headers and body of an answer."""


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    """Lowercase names."""
    body: bytes
    connection: int
    """Which accepted connection (1, 2, ...) it arrived on."""


@dataclass
class Behaviour:
    """How the peer answers; changeable while it runs."""

    interim: list[bytes] = field(default_factory=list)
    """Interim answers written (each flushed on its own) before every answer."""
    interim_pause: float = 0.0
    """Seconds between the interim answers and the answer (a CDN's hints come early)."""
    drops: int = 0
    """The next this many requests are read to their end, recorded, and their connection
    closed without a byte of answer (then decremented)."""
    hold: asyncio.Event | None = None
    """When set, every answer waits for this event."""
    respond: Callable[[Request], Answer | None] | None = None
    """The answer to a request; ``None`` drops the connection without one (after reading the
    request). Unset: a JSON echo of the body."""


class HttpPeer:
    """A recording HTTP/1.1 server; start with :func:`http_peer`."""

    def __init__(self, host: str, port: int, behaviour: Behaviour) -> None:
        self.host = host
        self.port = port
        self.behaviour = behaviour
        self.requests: list[Request] = []
        self.connections = 0
        self.open_connections = 0
        self.peak_connections = 0
        self._arrived = asyncio.Condition()
        self.closed_by_client = asyncio.Event()
        """Set whenever a connection ends because the client closed it."""

    async def received(self, count: int) -> None:
        """Return once ``count`` requests have been read (bound it with the caller's timeout)."""
        async with self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) >= count)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/mcp"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        self.open_connections += 1
        self.peak_connections = max(self.peak_connections, self.open_connections)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    self.closed_by_client.set()
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                request = Request(method, path, headers, body, number)
                self.requests.append(request)
                async with self._arrived:
                    self._arrived.notify_all()
                behaviour = self.behaviour
                if behaviour.drops > 0:
                    behaviour.drops -= 1
                    return
                if behaviour.respond is not None:
                    answer = behaviour.respond(request)
                    if answer is None:
                        return
                else:
                    answer = (200, {"content-type": "application/json"}, body or b"{}")
                for interim in behaviour.interim:
                    writer.write(interim)
                    await writer.drain()
                if behaviour.interim and behaviour.interim_pause:
                    await asyncio.sleep(behaviour.interim_pause)
                if behaviour.hold is not None:
                    await behaviour.hold.wait()
                status, answer_headers, content = answer
                out = [f"HTTP/1.1 {status} Peer", f"content-length: {len(content)}"]
                out += [f"{name}: {value}" for name, value in answer_headers.items()]
                writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + content)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            self.open_connections -= 1
            writer.close()


@contextlib.asynccontextmanager
async def http_peer(
    behaviour: Behaviour | None = None, *, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[HttpPeer]:
    """A running :class:`HttpPeer` on ``host`` (a loopback address) and ``port`` (0: any)."""
    peer = HttpPeer(host, port, behaviour or Behaviour())
    server = await asyncio.start_server(peer.serve, host, port)
    peer.port = server.sockets[0].getsockname()[1]
    try:
        yield peer
    finally:
        server.close()


@contextlib.contextmanager
def black_hole(host: str = "127.0.0.2", port: int = 0) -> Iterator[int]:
    """A port on ``host`` (loopback) where connection attempts never complete: a listener
    with a backlog of zero, filled by connections nobody accepts, so the kernel drops further
    SYNs (Linux, ``tcp_abort_on_overflow`` off, its default). Yields the port."""
    listener = socket.socket()
    fillers: list[socket.socket] = []
    try:
        listener.bind((host, port))
        listener.listen(0)
        bound = listener.getsockname()[1]
        for _ in range(3):
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect((host, bound))
            fillers.append(filler)
        probe = socket.socket()
        probe.settimeout(0.3)
        try:
            probe.connect((host, bound))
        except TimeoutError:
            pass  # black-holed, as wanted
        else:
            raise RuntimeError(f"{host}:{bound} accepted a connection: not a black hole")
        finally:
            probe.close()
        yield bound
    finally:
        for filler in fillers:
            filler.close()
        listener.close()
