"""The egress policy applied to the address each connection actually goes to.

A listening socket that nobody accepts from stands in for the victim: the
kernel queues any connection to it, so ``connected`` tells whether the probe
reached it at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator

import pytest

from mcp_operator.mcp.discovery import discover
from mcp_operator.mcp.errors import ProbeError
from mcp_operator.mcp.target import ProbeTarget
from mcp_operator.net.egress import EgressPolicy
from tests.support import peers


@contextlib.contextmanager
def victim(host: str = "127.0.0.1") -> Iterator[tuple[int, socket.socket]]:
    """A listening socket; connections to it queue up, unaccepted."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind((host, 0))
        listener.listen(8)
        listener.setblocking(False)
        yield listener.getsockname()[1], listener


def connected(listener: socket.socket) -> bool:
    try:
        conn, _ = listener.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]", "127.1"])
async def test_loopback_is_refused_by_default_by_address_or_by_name(host: str) -> None:
    with victim() as (port, listener):
        with pytest.raises(ProbeError) as caught:
            await discover(ProbeTarget(f"http://{host}:{port}/mcp", timeout_seconds=5))
        assert caught.value.reason == "DestinationRefused"
        assert "is a loopback address" in caught.value.message
        assert not connected(listener)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://169.254.169.254/latest/meta-data/", "is a cloud metadata address"),
        ("http://[fd00:ec2::254]/", "is a cloud metadata address"),
        ("http://metadata.google.internal/computeMetadata/v1/", "is a cloud metadata host name"),
        ("http://169.254.10.1:8080/mcp", "is a link-local address"),
        ("http://0.0.0.0:8080/mcp", "is the unspecified address"),
        ("http://10.96.0.1:443/mcp", "is a private address"),
    ],
)
async def test_metadata_link_local_unspecified_and_private_are_refused_before_connecting(
    url: str, why: str
) -> None:
    with pytest.raises(ProbeError) as caught:
        await discover(
            ProbeTarget(url, timeout_seconds=5, egress=EgressPolicy(allow_loopback=True))
        )
    assert caught.value.reason == "DestinationRefused"
    assert why in caught.value.message


async def test_the_api_servers_address_is_refused_even_where_loopback_is_allowed() -> None:
    with victim() as (port, listener):
        policy = EgressPolicy(allow_loopback=True).with_refused([("127.0.0.1", port)])
        with pytest.raises(ProbeError) as caught:
            await discover(
                ProbeTarget(f"http://localhost:{port}/mcp", timeout_seconds=5, egress=policy)
            )
        assert "is the Kubernetes API server" in caught.value.message
        assert not connected(listener)


async def test_a_redirect_to_a_refused_address_is_never_followed() -> None:
    """An allowed server that redirects to a refused one: the probe says where to and does
    not go there (every transport of the probe is the one session, which follows none)."""
    with victim() as (port, listener):
        target_url = f"http://127.0.0.2:{port}/secret"

        async def redirect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(
                f"HTTP/1.1 307 Temporary Redirect\r\nLocation: {target_url}\r\n"
                "Content-Length: 0\r\nConnection: close\r\n\r\n".encode()
            )
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(redirect, "127.0.0.1", 0)
        redirect_port = server.sockets[0].getsockname()[1]
        policy = EgressPolicy(allow_loopback=True).with_refused([("127.0.0.2", None)])
        async with server:
            for transport in ("streamable-http", "sse"):
                target = ProbeTarget(
                    f"http://127.0.0.1:{redirect_port}/mcp",
                    timeout_seconds=5,
                    egress=policy,
                    transport=transport,
                )
                with pytest.raises(ProbeError) as caught:
                    await discover(target)
                assert target_url.removesuffix("/secret") in caught.value.message, transport
                assert not connected(listener), transport


async def test_a_server_allowed_by_the_policy_is_probed() -> None:
    with peers.hostile_server("ok") as url:
        found = await discover(
            ProbeTarget(url, timeout_seconds=5, egress=EgressPolicy(allow_loopback=True))
        )
    assert len(found.tools) == 3


async def test_environment_proxies_are_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy would hide the destination behind its own address; the probe ignores them."""
    monkeypatch.setenv("HTTP_PROXY", "http://203.0.113.1:3128")
    monkeypatch.setenv("ALL_PROXY", "http://203.0.113.1:3128")
    with peers.hostile_server("ok") as url:
        found = await discover(
            ProbeTarget(url, timeout_seconds=5, egress=EgressPolicy(allow_loopback=True))
        )
    assert len(found.tools) == 3
