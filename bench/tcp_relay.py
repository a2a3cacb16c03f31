"""A byte relay on uvloop: the least any forwarder written in Python does, as a benchmark row.

``python bench/tcp_relay.py LISTEN_PORT UPSTREAM_PORT`` accepts connections on loopback and
gives each one a connection of its own to the upstream, copying bytes both ways as they
arrive: no HTTP parsing, no JSON, no MCP. bench/bridge_bench.py puts it between wrk and an
upstream to measure the ceiling a Python process in the path sets on this machine (its
socket reads and writes, event-loop turns and the one more process on the cores), against
which the bridge's own ratio is read.
"""

from __future__ import annotations

import asyncio
import sys
from typing import cast

import uvloop


class _Upstream(asyncio.Protocol):
    """The upstream side of one relayed connection: what it sends goes to the client."""

    def __init__(self, client: asyncio.Transport) -> None:
        self.client = client

    def data_received(self, data: bytes) -> None:
        self.client.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.client.close()


class _Client(asyncio.Protocol):
    """The client side: bytes that arrive before the upstream connection are kept for it."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.upstream: asyncio.Transport | None = None
        self.early: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not subclasses of asyncio.Transport, only alike.
        client = cast(asyncio.Transport, transport)
        asyncio.get_running_loop().create_task(self._connect(client))

    async def _connect(self, transport: asyncio.Transport) -> None:
        try:
            upstream, _ = await asyncio.get_running_loop().create_connection(
                lambda: _Upstream(transport), "127.0.0.1", self.upstream_port
            )
        except OSError:
            transport.close()
            return
        self.upstream = upstream
        for data in self.early:
            upstream.write(data)
        self.early.clear()

    def data_received(self, data: bytes) -> None:
        if self.upstream is None:
            self.early.append(data)
        else:
            self.upstream.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.upstream is not None:
            self.upstream.close()


async def _serve(listen_port: int, upstream_port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Client(upstream_port), "127.0.0.1", listen_port)
    await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(_serve(int(sys.argv[1]), int(sys.argv[2])))
