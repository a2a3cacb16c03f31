"""TLS towards the API server for a client certificate that is renewed (``kube.tls``): the SSL
contexts, loaded through private files, and the transport that opens new connections when the
certificate changes.

The transport is tested against a real TLS server on loopback that requires a client
certificate and answers with the name in the one it was shown.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import ssl
import stat
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_operator.kube.tls import (
    CertificateTransport,
    ClientCertificate,
    ServerVerification,
    client_context,
    load_certificate,
)
from tests.support.certificates import Authority, issue, new_authority

NOW = datetime.datetime.now(datetime.UTC)
VALID = {
    "not_before": NOW - datetime.timedelta(hours=1),
    "not_after": NOW + datetime.timedelta(hours=1),
}


@pytest.fixture(scope="module")
def authority() -> Authority:
    return new_authority()


def pair(authority: Authority, name: str) -> ClientCertificate:
    return ClientCertificate(*issue(authority, name, **VALID))


# -- SSL contexts ------------------------------------------------------------------------------


def test_the_pair_is_loaded_through_private_files_that_are_removed_at_once(
    authority: Authority, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    modes: list[tuple[int, int, int]] = []

    class Watched(ssl.SSLContext):
        def load_cert_chain(self, certfile: Any, keyfile: Any = None, password: Any = None) -> None:
            directory = os.path.dirname(certfile)
            modes.append(
                (
                    stat.S_IMODE(os.stat(directory).st_mode),
                    stat.S_IMODE(os.stat(certfile).st_mode),
                    stat.S_IMODE(os.stat(keyfile).st_mode),
                )
            )
            super().load_cert_chain(certfile, keyfile, password)

    load_certificate(Watched(ssl.PROTOCOL_TLS_CLIENT), pair(authority, "alice"))
    assert modes == [(0o700, 0o600, 0o600)]
    assert not any(tmp_path.iterdir())


def test_a_pair_that_does_not_load_is_an_error_without_the_key(authority: Authority) -> None:
    alice, bob = pair(authority, "alice"), pair(authority, "bob")
    mismatched = ClientCertificate(alice.certificate_pem, bob.key_pem)
    with pytest.raises(ValueError, match="do not load") as caught:
        client_context(ServerVerification(authority.certificate_pem), mismatched)
    assert "PRIVATE KEY" not in str(caught.value)


# -- the transport, against a real TLS server -------------------------------------------------


@pytest.fixture
async def server(authority: Authority, tmp_path: Path) -> AsyncIterator[str]:
    """An HTTPS server that requires a client certificate and answers with its name; its
    own certificate is for ``localhost`` and ``api.internal``, not for 127.0.0.1."""
    certificate, key = issue(authority, "api", server_names=("localhost", "api.internal"), **VALID)
    (tmp_path / "server.crt").write_text(certificate)
    (tmp_path / "server.key").write_text(key)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cadata=authority.certificate_pem)
    context.load_cert_chain(tmp_path / "server.crt", tmp_path / "server.key")
    context.verify_mode = ssl.CERT_REQUIRED

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peercert") or {}
        name = next(v for rdn in peer.get("subject", ()) for k, v in rdn if k == "commonName")
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                body = name.encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    listening = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=context)
    port = listening.sockets[0].getsockname()[1]
    try:
        yield f"https://localhost:{port}"
    finally:
        listening.close()


def renewable(
    authority: Authority, current: list[ClientCertificate | None]
) -> CertificateTransport:
    """A transport presenting ``current[0]``, which the test replaces to renew it."""
    return CertificateTransport(lambda: current[0], ServerVerification(authority.certificate_pem))


async def test_a_renewed_certificate_is_presented_on_new_connections(
    authority: Authority, server: str
) -> None:
    current: list[ClientCertificate | None] = [pair(authority, "first")]
    transport = renewable(authority, current)
    async with httpx.AsyncClient(base_url=server, transport=transport) as client:
        assert (await client.get("/")).text == "first"
        assert (await client.get("/")).text == "first", "the pool is reused"
        current[0] = None  # being renewed (another request's 401): keep what works
        assert (await client.get("/")).text == "first"
        current[0] = pair(authority, "second")
        assert (await client.get("/")).text == "second"
        assert transport.pools_opened == 2
        assert transport.context is not None


async def test_a_request_in_flight_finishes_on_the_old_certificate(
    authority: Authority, server: str
) -> None:
    current: list[ClientCertificate | None] = [pair(authority, "first")]
    transport = renewable(authority, current)
    async with httpx.AsyncClient(base_url=server, transport=transport) as client:
        async with client.stream("GET", "/") as streaming:
            current[0] = pair(authority, "second")
            assert (await client.get("/")).text == "second"
            [old] = transport._retired
            assert old.transport.pool.connections, "the old pool stays open until done"
            assert (await streaming.aread()) == b"first"
        assert old.in_flight == 0 and not old.transport.pool.connections, "then it is closed"


async def test_tls_server_name_is_the_name_checked_and_sent_instead_of_the_urls_host(
    authority: Authority, server: str
) -> None:
    by_address = server.replace("localhost", "127.0.0.1")
    alice = pair(authority, "alice")
    for server_name, answer in ((None, None), ("api.internal", "alice")):
        verification = ServerVerification(authority.certificate_pem, server_name=server_name)
        transport = CertificateTransport(lambda: alice, verification)
        async with httpx.AsyncClient(base_url=by_address, transport=transport) as client:
            if answer is None:
                with pytest.raises(httpx.ConnectError, match="IP address mismatch"):
                    await client.get("/")
            else:
                assert (await client.get("/")).text == answer
