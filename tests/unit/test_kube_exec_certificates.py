"""Client certificates from exec plugins: parsing, what the plugin is told, the SSL
contexts and the transport that opens new connections for a renewed certificate.

The transport is tested against a real TLS server on loopback that requires a client
certificate and answers with the name in the one it was shown.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import os
import ssl
import stat
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_operator.kube.credentials import cluster_ca, load_credentials
from mcp_operator.kube.exec_plugin import (
    ExecPlugin,
    exec_info,
    interactive_mode,
    parse_exec_credential,
)
from mcp_operator.kube.tls import (
    CertificateTransport,
    ClientCertificate,
    ServerVerification,
    client_context,
    load_certificate,
)
from mcp_operator.kube.tokens import CredentialError
from tests.support.certificates import Authority, issue, new_authority

NOW = datetime.datetime.now(datetime.UTC)
VALID = {
    "not_before": NOW - datetime.timedelta(hours=1),
    "not_after": NOW + datetime.timedelta(hours=1),
}
V1 = "client.authentication.k8s.io/v1"


@pytest.fixture(scope="module")
def authority() -> Authority:
    return new_authority()


def pair(authority: Authority, name: str) -> ClientCertificate:
    return ClientCertificate(*issue(authority, name, **VALID))


def credential_text(status: dict[str, Any], api_version: str = V1) -> str:
    return json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "status": status})


# -- parsing -------------------------------------------------------------------------------


def test_a_certificate_and_key_are_parsed_and_the_key_never_shown(authority: Authority) -> None:
    certificate = pair(authority, "alice")
    text = credential_text(
        {
            "clientCertificateData": certificate.certificate_pem,
            "clientKeyData": certificate.key_pem,
            "expirationTimestamp": "2026-12-01T10:15:00Z",
        }
    )
    credential = parse_exec_credential(text, "issuer", V1)
    assert credential.certificate == certificate and credential.token is None
    assert credential.kind == "client certificate"
    assert credential.expires_at == datetime.datetime(2026, 12, 1, 10, 15, tzinfo=datetime.UTC)
    assert "PRIVATE KEY" not in repr(credential) and "CERTIFICATE" not in repr(credential)


def test_a_token_and_a_certificate_may_come_together(authority: Authority) -> None:
    certificate = pair(authority, "alice")
    status = {
        "token": "t0ken",
        "clientCertificateData": certificate.certificate_pem,
        "clientKeyData": certificate.key_pem,
    }
    credential = parse_exec_credential(credential_text(status), "issuer")
    assert credential.token == "t0ken" and credential.certificate == certificate
    assert "t0ken" not in repr(credential)


@pytest.mark.parametrize(
    ("status", "complaint"),
    [
        ({"clientCertificateData": "CERT"}, "clientCertificateData without status.clientKeyData"),
        ({"clientKeyData": "KEY"}, "clientKeyData without status.clientCertificateData"),
        (
            {"clientCertificateData": "not pem", "clientKeyData": "-----BEGIN PRIVATE KEY-----s3"},
            "clientCertificateData in no PEM",
        ),
        (
            {"clientCertificateData": "-----BEGIN CERTIFICATE-----", "clientKeyData": "s3cr3t"},
            "clientKeyData in no PEM",
        ),
    ],
)
def test_a_broken_pair_is_an_error_that_never_quotes_the_key(
    status: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(CredentialError, match=complaint) as caught:
        parse_exec_credential(credential_text(status), "issuer")
    assert "s3" not in str(caught.value)


def test_the_plugin_must_answer_in_the_version_the_kubeconfig_asks_for() -> None:
    text = credential_text({"token": "t"}, "client.authentication.k8s.io/v1beta1")
    with pytest.raises(CredentialError, match=r"but the kubeconfig asks for .*k8s\.io/v1$"):
        parse_exec_credential(text, "issuer", V1)


# -- what the plugin is told ------------------------------------------------------------------


def test_cluster_info_is_passed_only_when_asked_with_the_ca_of_a_file_and_the_extension() -> None:
    cluster = {
        "server": "https://api:6443",
        "certificate-authority": "/etc/ca.crt",
        "tls-server-name": "api.internal",
        "proxy-url": "http://proxy:3128",
        "extensions": [
            {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "k8s"}},
            {"name": "other", "extension": {"x": 1}},
        ],
    }
    told = json.loads(exec_info({"apiVersion": V1, "provideClusterInfo": True}, cluster, b"PEM"))
    assert told["apiVersion"] == V1 and told["spec"]["interactive"] is False
    assert told["spec"]["cluster"] == {
        "server": "https://api:6443",
        "tls-server-name": "api.internal",
        "proxy-url": "http://proxy:3128",
        "certificate-authority-data": base64.b64encode(b"PEM").decode(),
        "config": {"audience": "k8s"},
    }
    assert "cluster" not in json.loads(exec_info({"apiVersion": V1}, cluster))["spec"]


def test_a_plugin_that_needs_a_terminal_is_refused_with_what_to_do_instead() -> None:
    assert interactive_mode({}, "login") == "IfAvailable"
    assert interactive_mode({"interactiveMode": "Never"}, "login") == "Never"
    with pytest.raises(CredentialError, match="needs a terminal, which the operator never has"):
        ExecPlugin({"command": "login", "interactiveMode": "Always"}, {}, user="u")
    with pytest.raises(CredentialError, match="interactiveMode 'Sometimes', not one of"):
        interactive_mode({"interactiveMode": "Sometimes"}, "login")


async def test_a_missing_plugin_names_the_user_and_the_install_hint(tmp_path: Path) -> None:
    spec = {
        "command": str(tmp_path / "absent"),
        "installHint": "install it with: brew install absent",
    }
    with pytest.raises(CredentialError) as caught:
        await ExecPlugin(spec, {}, user="ci-robot").token()
    message = str(caught.value)
    assert "kubeconfig user ci-robot" in message and "brew install absent" in message


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


# -- reading the kubeconfig's cluster ----------------------------------------------------------


def test_an_exec_users_cluster_is_read_without_running_the_plugin(
    authority: Authority, tmp_path: Path
) -> None:
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "ca.crt").write_text(authority.certificate_pem)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": {
                    "server": "https://127.0.0.1:6443/",
                    "certificate-authority": "certs/ca.crt",
                    "tls-server-name": "api.internal",
                },
            }
        ],
        "users": [{"name": "robot", "user": {"exec": {"apiVersion": V1, "command": "absent"}}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "robot"}}],
        "current-context": "x",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(config))
    credentials = load_credentials(str(path))
    assert credentials.server == "https://127.0.0.1:6443"
    assert credentials.verification == ServerVerification(
        authority.certificate_pem, server_name="api.internal"
    )
    assert credentials.plugin is not None and credentials.plugin.user == "robot"
    assert credentials.plugin.runs == 0, "the plugin runs at the first request, not before"


def test_a_cluster_ca_that_is_not_base64_is_an_error_naming_the_user() -> None:
    with pytest.raises(CredentialError, match="user robot has certificate-authority-data"):
        cluster_ca({"certificate-authority-data": "not base64!"}, Path("/"), "robot")
