"""Both bridges reach upstream servers over HTTPS, verified, and over the legacy HTTP+SSE
transport.

HTTPS: a real MCP server (server-everything) behind TLS terminators of this module's own
(:class:`TlsFront`), each with a serving certificate of a CA the test makes: one signed by the
CA the bridge is told to trust (``SSL_CERT_FILE``, which the Python bridge's OpenSSL and the
compiled bridge's rustls-native-certs both honour), one signed by a CA nobody trusts, one
signed by the trusted CA for another name. The same test runs against the Python bridge and
the compiled one (parametrized): the verified server's tools are listed and called, the two
others fail alone (the compiled bridge's reason says ``certificate``; the Python bridge's
says only that it could not connect), and a plain ``http://`` server beside them keeps
working.

The legacy HTTP+SSE upstream tests are the Python bridge's own (``test_bridge_sse.py``),
imported and run again against the compiled bridge (the autouse fixture swaps the program
``tests.support.bridge_run`` starts), as ``test_dataplane_bridge.py`` does.
"""

from __future__ import annotations

import asyncio
import datetime
import ssl
import tempfile
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from tests.protocol.test_bridge_sse import (
    test_a_cancelled_call_to_an_sse_server_is_cancelled_upstream,
    test_a_json_rpc_error_of_an_sse_server_is_the_agents_tool_error,
    test_a_list_change_an_sse_server_announces_reaches_the_agent,
    test_an_endpoint_on_another_origin_is_refused_and_nothing_is_posted_there,
    test_an_sse_server_that_dies_mid_call_is_unavailable_then_used_again,
    test_an_sse_servers_tools_are_listed_and_called_through_the_bridge,
    test_progress_of_a_long_call_on_an_sse_server_reaches_the_agent,
    test_requests_of_an_sse_server_outside_any_call_are_refused_and_pings_answered,
)
from tests.support import certificates, needs
from tests.support.bridge_run import run_bridge, server_entry
from tests.support.peers import free_port
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.timeout(180),
    needs.mark(needs.node_missing()),
    pytest.mark.usefixtures("compiled_bridge"),
]

# The legacy HTTP+SSE upstream tests of the home module that run here again against the
# compiled bridge (those of "the session alone" drive the Python session, not a bridge).
__all__ = [
    "test_a_cancelled_call_to_an_sse_server_is_cancelled_upstream",
    "test_a_json_rpc_error_of_an_sse_server_is_the_agents_tool_error",
    "test_a_list_change_an_sse_server_announces_reaches_the_agent",
    "test_an_endpoint_on_another_origin_is_refused_and_nothing_is_posted_there",
    "test_an_sse_server_that_dies_mid_call_is_unavailable_then_used_again",
    "test_an_sse_servers_tools_are_listed_and_called_through_the_bridge",
    "test_progress_of_a_long_call_on_an_sse_server_reaches_the_agent",
    "test_requests_of_an_sse_server_outside_any_call_are_refused_and_pings_answered",
]


class TlsFront:
    """A TLS terminator on loopback in front of a plain HTTP server, serving ``pair``
    (certificate and key PEM); it runs its own event loop in a thread."""

    def __init__(self, upstream_url: str, pair: tuple[str, str], folder: Path, name: str) -> None:
        parts = httpx.URL(upstream_url)
        self.target = (parts.host, parts.port or 80)
        self.port = free_port()
        self.url = str(parts.copy_with(scheme="https", port=self.port))
        certificate, key = folder / f"{name}.crt", folder / f"{name}.key"
        certificate.write_text(pair[0])
        key.write_text(pair[1])
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(certificate, key)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, ssl.SSLError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    def __enter__(self) -> TlsFront:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._connection, "127.0.0.1", self.port, ssl=self.context),
            self._loop,
        )
        self._server = started.result(10)
        return self

    def __exit__(self, *_: object) -> None:
        self._server.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


def _serving(authority: certificates.Authority, *names: str) -> tuple[str, str]:
    now = datetime.datetime.now(datetime.UTC)
    return certificates.issue(
        authority,
        names[0],
        server_names=names,
        not_before=now - datetime.timedelta(minutes=5),
        not_after=now + datetime.timedelta(hours=1),
    )


def _text(result: Any) -> str:
    return result.content[0].text  # type: ignore[no-any-return]


async def test_an_https_server_is_verified_and_one_not_trusted_fails_alone(
    program: str, everything_url: str
) -> None:
    trusted, stranger = certificates.new_authority("trusted"), certificates.new_authority("x")
    with tempfile.TemporaryDirectory(prefix="mcp-tls-") as tmp:
        folder = Path(tmp)
        (folder / "ca.pem").write_text(trusted.certificate_pem)
        with (
            TlsFront(everything_url, _serving(trusted, "127.0.0.1"), folder, "good") as good,
            TlsFront(everything_url, _serving(stranger, "127.0.0.1"), folder, "rogue") as rogue,
            TlsFront(everything_url, _serving(trusted, "elsewhere.test"), folder, "other") as other,
        ):
            servers = [
                server_entry("good", good.url),
                server_entry("rogue", rogue.url),
                server_entry("other", other.url),
                server_entry("plain", everything_url),
            ]
            running = run_bridge(servers, env={"SSL_CERT_FILE": str(folder / "ca.pem")})
            bridge = await asyncio.to_thread(running.__enter__)
            try:
                async with Client(bridge.url, mode="legacy") as agent:
                    names = {tool.name for tool in (await agent.list_tools()).tools}
                    echoed = await agent.call_tool("good_echo", {"message": "over tls"})
                    plain = await agent.call_tool("plain_echo", {"message": "in clear"})
                ready = await asyncio.to_thread(httpx.get, f"{bridge.health}/readyz")
                state = ready.json()["servers"]

                def refused() -> str:
                    return bridge.log()

                log = await asyncio.to_thread(
                    eventually,
                    "both refusals logged",
                    refused,
                    20,
                    until=lambda t: "default/rogue" in t and "default/other" in t,
                )
            finally:
                await asyncio.to_thread(running.__exit__, None, None, None)
    assert "good_echo" in names and "plain_echo" in names, names
    assert not any(n.startswith(("rogue_", "other_")) for n in names), names
    assert not echoed.is_error and _text(echoed) == "Echo: over tls", echoed
    assert not plain.is_error and _text(plain) == "Echo: in clear", plain
    assert state["default/good"]["up"] is True and state["default/plain"]["up"] is True
    assert state["default/rogue"]["up"] is False and state["default/other"]["up"] is False
    for key in ("default/rogue", "default/other"):
        lines = [line for line in log.splitlines() if key in line]
        assert lines, log
        if program == "compiled":  # the Python bridge says only "could not connect to ..."
            assert any("certificate" in line.lower() for line in lines), lines
