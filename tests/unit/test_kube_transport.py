"""The API client's transport (net/transport.py) on real sockets: httpx's errors and limits
over the lean pool, idle connections expiring, and the proxy fallback (kube/client.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from mcp_operator.kube import KubeClient
from mcp_operator.kube.client import CONNECTIONS
from mcp_operator.kube.credentials import Credential, Credentials
from mcp_operator.net import pool as http1
from mcp_operator.net.tls import tls_context
from mcp_operator.net.transport import Http1Transport
from tests.support.http_peer import Behaviour, http_peer

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Handler], Awaitable[tuple[str, list[int]]]]]:
    """Starts a raw HTTP server on loopback; gives its URL and a list that counts connections."""
    servers: list[asyncio.Server] = []

    async def start(handler: Handler) -> tuple[str, list[int]]:
        opened: list[int] = []

        async def counted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            opened.append(1)
            try:
                await handler(reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(counted, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", opened

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


async def answer_ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}")
        await writer.drain()


def client(url: str, **timeouts: float) -> httpx.AsyncClient:
    transport = Http1Transport(tls_context(True), egress=None)
    timeout = httpx.Timeout(timeouts.get("read", 5.0), connect=timeouts.get("connect", 5.0))
    return httpx.AsyncClient(base_url=url, transport=transport, timeout=timeout)


async def test_a_connection_reset_mid_body_is_an_httpx_read_error(
    serve: Callable[[Handler], Awaitable[tuple[str, list[int]]]],
) -> None:
    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b'HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{"partial')
        await writer.drain()
        writer.transport.abort()  # RST, not FIN

    url, _ = await serve(reset)
    async with client(url) as http:
        with pytest.raises(httpx.ReadError):
            await http.get("/api")


async def test_an_answer_that_stalls_is_an_httpx_read_timeout(
    serve: Callable[[Handler], Awaitable[tuple[str, list[int]]]],
) -> None:
    async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await asyncio.sleep(10)

    url, _ = await serve(stall)
    async with client(url, read=0.3, connect=0.2) as http:  # the head: connect + read
        with pytest.raises(httpx.ReadTimeout):
            await http.get("/api")


async def test_an_idle_connection_is_reused_soon_and_replaced_later(
    serve: Callable[[Handler], Awaitable[tuple[str, list[int]]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http1, "IDLE_SECONDS", 0.2)
    url, opened = await serve(answer_ok)
    async with client(url) as http:
        await http.get("/a")
        await http.get("/b")
        assert len(opened) == 1, "kept alive"
        await asyncio.sleep(0.4)
        await http.get("/c")
        assert len(opened) == 2, "idle too long: a new connection"


def test_an_api_server_behind_a_proxy_keeps_httpxs_own_transport(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    credentials = Credentials(Credential("https://10.0.0.1:6443", token="t"))
    assert isinstance(KubeClient(credentials)._transport, Http1Transport)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert KubeClient(credentials)._transport is None, "httpx speaks to the proxy"
    monkeypatch.setenv("NO_PROXY", "10.0.0.1")
    assert isinstance(KubeClient(credentials)._transport, Http1Transport)
    # The kubeconfig's proxy-url (which the kubernetes package reads) routes it too.
    proxied = Credential("https://10.0.0.1:6443", token="t", proxy="http://proxy.example:3128")
    assert KubeClient(Credentials(proxied))._transport is None


async def test_the_api_client_opens_at_most_its_connections_and_the_rest_wait() -> None:
    """The pool's cap is the API client's only limit (it had a semaphore of its own): with
    every answer held, no more than CONNECTIONS requests reach the server; all get answers."""
    hold = asyncio.Event()
    async with http_peer(Behaviour(hold=hold)) as peer:
        credentials = Credentials(Credential(f"http://127.0.0.1:{peer.port}", token="t"))
        kube = KubeClient(credentials)
        calls = [
            asyncio.get_running_loop().create_task(kube.request("GET", f"/api/v1/n{number}"))
            for number in range(CONNECTIONS + 10)
        ]
        await asyncio.wait_for(peer.received(CONNECTIONS), 10)
        await asyncio.sleep(0.3)  # bounded: time for a request past the cap to arrive
        assert len(peer.requests) == CONNECTIONS
        hold.set()
        assert len(await asyncio.gather(*calls)) == CONNECTIONS + 10
        assert peer.peak_connections == CONNECTIONS
        await kube.close()
