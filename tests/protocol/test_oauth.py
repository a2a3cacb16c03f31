"""OAuth to external servers, against a real authorization server and a real protected server.

The authorization server is ours (``tests/support/oauth_peers.py``: client credentials, token
exchange, JWT access tokens, RFC 8414 metadata, revocation); the MCP server in front of which
it sits is the official SDK's with its bearer-token auth and RFC 9728 metadata. The probe
(:func:`~mcp_operator.mcp.discovery.discover`) and the bridge obtain, cache and refresh
tokens; a 401 gets one new token; real challenges become ``AuthRequired`` and
``InsufficientScope``; a token endpoint on a refused address is never contacted.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp.client import Client

from mcp_operator.mcp.discovery import discover
from mcp_operator.mcp.errors import ProbeError
from mcp_operator.mcp.oauth import (
    Client as OAuthClient,
)
from mcp_operator.mcp.oauth import ClientCredentialsGrant, OAuthCredentials
from mcp_operator.mcp.session import McpSession
from mcp_operator.mcp.tokens import TokenEndpoint
from mcp_operator.net.egress import EgressPolicy
from mcp_operator.net.pool import Http1Pool
from tests.support.bridge_run import run_bridge, server_entry
from tests.support.oauth_peers import OAuthPeers, oauth_peers

pytestmark = pytest.mark.timeout(120)

LOOPBACK = EgressPolicy(allow_loopback=True)
SECRET = "s3cret-Value-0f-the-client"
SUBJECT = "system:serviceaccount:team-a:agent"
SUBJECT_AUDIENCE = "https://as.example/token-exchange"


@pytest.fixture(scope="module")
def subject_key(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    """A signing key standing in for the cluster's ServiceAccount issuer, and its JWKS file."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    path = tmp_path_factory.mktemp("issuer") / "jwks.json"
    path.write_text(json.dumps({"keys": [{**public, "kid": "sa", "alg": "RS256"}]}))
    return key, path


@pytest.fixture(scope="module")
def peers(subject_key: tuple[Any, Path]) -> Iterator[OAuthPeers]:
    with oauth_peers(
        clients={"prober": SECRET, "bridge": SECRET, "exchanger": SECRET, "doomed": SECRET},
        subject_jwks=subject_key[1],
        subject_audience=SUBJECT_AUDIENCE,
    ) as running:
        yield running


def subject_token(key: Any, audience: str = SUBJECT_AUDIENCE, sub: str = SUBJECT) -> str:
    now = int(time.time())
    claims = {"iss": "https://kubernetes.default.svc", "sub": sub, "aud": audience}
    claims |= {"iat": now, "exp": now + 600}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "sa"})


def client_credentials(
    peers: OAuthPeers,
    client: str,
    *,
    scopes: tuple[str, ...] = ("mcp:tools",),
    token_url: str | None = None,
    egress: EgressPolicy = LOOPBACK,
    clock: Any = time.monotonic,
) -> OAuthCredentials:
    async def secret() -> str:
        return SECRET

    return OAuthCredentials(
        TokenEndpoint(token_url or peers.token_url, egress=egress),
        ClientCredentialsGrant(resource=peers.mcp_url, scopes=scopes),
        OAuthClient(client, secret),
        clock=clock,
    )


def target(peers: OAuthPeers, credentials: OAuthCredentials | None, **extra: Any) -> Any:
    from mcp_operator.mcp.target import ProbeTarget

    return ProbeTarget(
        url=peers.mcp_url, credentials=credentials, egress=LOOPBACK, timeout_seconds=10, **extra
    )


# -- the probe -----------------------------------------------------------------------------------


async def test_the_probe_obtains_a_token_once_and_reuses_it_for_later_probes(
    peers: OAuthPeers,
) -> None:
    credentials = client_credentials(peers, "prober")
    before = peers.stats()["client_credentials"]
    first = await discover(target(peers, credentials))
    second = await discover(target(peers, credentials))
    assert {tool.name for tool in first.tools} == {"whoami", "echo"}
    assert [tool.name for tool in second.tools] == [tool.name for tool in first.tools]
    assert peers.stats()["client_credentials"] - before == 1
    assert credentials.requests == 1
    assert SECRET not in repr(credentials) and SECRET not in credentials.describe()


async def test_concurrent_calls_without_a_token_make_one_token_request(peers: OAuthPeers) -> None:
    credentials = client_credentials(peers, "prober")
    before = peers.stats()["client_credentials"]
    pool = Http1Pool(egress=LOOPBACK)
    session = McpSession(
        peers.mcp_url, pool, client_info={"name": "t", "version": "1"}, credentials=credentials
    )
    try:
        await session.connect()
        results = await asyncio.gather(
            *(
                session.request("tools/call", {"name": "echo", "arguments": {"text": str(i)}})
                for i in range(20)
            )
        )
    finally:
        await session.close()
        await pool.aclose()
    assert [r["content"][0]["text"] for r in results] == [str(i) for i in range(20)]
    assert peers.stats()["client_credentials"] - before == 1


async def test_a_token_is_replaced_shortly_before_it_expires(peers: OAuthPeers) -> None:
    now = [1000.0]
    credentials = client_credentials(peers, "prober", clock=lambda: now[0])
    await discover(target(peers, credentials))
    token = credentials.token
    assert token is not None
    now[0] = token.refresh_at - 1  # still inside its lifetime, before the margin
    await discover(target(peers, credentials))
    assert credentials.requests == 1
    now[0] = token.refresh_at + 0.001  # inside the margin: replaced before it expires
    await discover(target(peers, credentials))
    assert credentials.requests == 2
    assert credentials.token is not None and credentials.token.value != token.value


async def test_a_401_for_a_cached_token_gets_one_new_token_and_one_more_try(
    peers: OAuthPeers,
) -> None:
    credentials = client_credentials(peers, "prober")
    await discover(target(peers, credentials))
    old = credentials.token
    peers.rotate_keys()  # every token issued so far is refused by the server now
    found = await discover(target(peers, credentials))
    assert {tool.name for tool in found.tools} == {"whoami", "echo"}
    assert credentials.requests == 2
    assert credentials.token is not None and old is not None
    assert credentials.token.value != old.value


# -- honest refusals -----------------------------------------------------------------------------


async def test_a_401_challenge_is_auth_required_naming_the_authorization_server(
    peers: OAuthPeers,
) -> None:
    with pytest.raises(ProbeError) as caught:
        await discover(target(peers, None))
    assert caught.value.reason == "AuthRequired"
    message = caught.value.message
    assert "HTTP 401 asking for Bearer authentication" in message
    assert "resource metadata http://127.0.0.1" in message
    assert f"authorization servers {peers.issuer}" in message  # fetched from RFC 9728 metadata


async def test_a_token_without_the_scope_is_insufficient_scope_naming_it(
    peers: OAuthPeers,
) -> None:
    credentials = client_credentials(peers, "prober", scopes=("other",))
    with pytest.raises(ProbeError) as caught:
        await discover(target(peers, credentials))
    assert caught.value.reason == "InsufficientScope"
    assert "mcp:tools" in caught.value.message
    assert credentials.requests == 1  # a 403 is no reason for a new token


async def test_a_revoked_client_secret_is_auth_required_at_the_next_probe(
    peers: OAuthPeers,
) -> None:
    credentials = client_credentials(peers, "doomed")
    await discover(target(peers, credentials))
    peers.revoke("doomed")
    with pytest.raises(ProbeError) as caught:
        await discover(target(peers, credentials))
    assert caught.value.reason == "AuthRequired"
    assert "refused client doomed with HTTP 401 (invalid_client)" in caught.value.message
    assert SECRET not in caught.value.message
    assert credentials.requests == 2  # the 401 dropped the token; the new request was refused


class Listener:
    """A TCP listener on loopback that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.sock.settimeout(0.1)
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop:
            try:
                connection, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            connection.close()

    def close(self) -> None:
        self._stop = True
        self._thread.join()
        self.sock.close()


@pytest.mark.parametrize("host", ["169.254.169.254", "127.0.0.1"])
async def test_a_token_url_on_a_refused_address_is_refused_without_a_connection(
    peers: OAuthPeers, host: str
) -> None:
    listener = Listener()
    try:
        port = listener.port if host == "127.0.0.1" else 80
        refusing = EgressPolicy()  # the operator's default: no loopback, no link-local
        credentials = client_credentials(
            peers, "prober", token_url=f"http://{host}:{port}/token", egress=refusing
        )
        with pytest.raises(ProbeError) as caught:
            # The server's own URL is allowed here: only the token endpoint is refused.
            await discover(target(peers, credentials))
        assert caught.value.reason == "DestinationRefused"
        assert f"the token endpoint http://{host}:{port}/token was not contacted" in (
            caught.value.message
        )
        assert credentials.requests == 1
        await asyncio.sleep(0.3)
        assert listener.accepted == 0
    finally:
        listener.close()


# -- the bridge ----------------------------------------------------------------------------------


def _text(result: Any) -> str:
    assert not result.is_error, result
    return str(result.content[0].text)


def _auth_entry(peers: OAuthPeers, auth: dict[str, Any]) -> dict[str, Any]:
    return server_entry("secure", peers.mcp_url, auth=auth)


async def test_the_bridge_calls_with_a_cached_client_credentials_token(
    peers: OAuthPeers, tmp_path: Path
) -> None:
    secret = tmp_path / "client-secret"
    secret.write_text(SECRET + "\n")
    auth = {
        "oauth2ClientCredentials": {
            "tokenURL": peers.token_url,
            "clientID": "bridge",
            "clientSecretFile": str(secret),
            "scopes": ["mcp:tools"],
            "resource": peers.mcp_url,
        }
    }
    before = peers.stats()["client_credentials"]
    with run_bridge([_auth_entry(peers, auth)]) as bridge:
        async with Client(bridge.url, mode="auto") as client:  # type: ignore[arg-type]
            listed = await client.list_tools()
            who = json.loads(_text(await client.call_tool("secure_whoami", {})))
            for i in range(20):
                assert _text(await client.call_tool("secure_echo", {"text": str(i)})) == str(i)
        output = bridge.log()
        audit = [line for line in bridge.audit_lines() if line.get("tool") == "secure_whoami"]
    assert {tool.name for tool in listed.tools} == {"secure_whoami", "secure_echo"}
    assert who["subject"] == "bridge" and who["scopes"] == ["mcp:tools"]
    assert peers.stats()["client_credentials"] - before == 1  # a listing and 21 calls: 1 token
    assert audit[0]["upstreamSubject"] == "bridge" and "upstreamActor" not in audit[0]
    assert SECRET not in output and "eyJ" not in output  # neither the secret nor a token


async def test_the_bridge_exchanges_the_runs_own_token_and_audits_subject_and_actor(
    peers: OAuthPeers, subject_key: tuple[Any, Path], tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(subject_token(subject_key[0]))
    secret = tmp_path / "client-secret"
    secret.write_text(SECRET)
    auth = {
        "tokenExchange": {
            "tokenURL": peers.token_url,
            "subjectTokenFile": str(token_file),
            "clientID": "exchanger",
            "clientSecretFile": str(secret),
            "scopes": ["mcp:tools"],
            "resource": peers.mcp_url,
        }
    }
    before = peers.stats()["token_exchange"]
    with run_bridge([_auth_entry(peers, auth)]) as bridge:
        async with Client(bridge.url, mode="auto") as client:  # type: ignore[arg-type]
            who = json.loads(_text(await client.call_tool("secure_whoami", {})))
        output = bridge.log()
        audit = [line for line in bridge.audit_lines() if line.get("tool") == "secure_whoami"]
    assert who == {
        "subject": SUBJECT,
        "actor": "exchanger",
        "client": "exchanger",
        "scopes": ["mcp:tools"],
    }
    assert peers.stats()["token_exchange"] - before == 1
    assert audit[0]["upstreamSubject"] == SUBJECT and audit[0]["upstreamActor"] == "exchanger"
    assert token_file.read_text() not in output and SECRET not in output


async def test_the_bridge_maps_refusals_to_unauthorized_and_insufficient_scope_errors(
    peers: OAuthPeers, subject_key: tuple[Any, Path], tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(subject_token(subject_key[0], audience="someone-else"))
    secret = tmp_path / "client-secret"
    secret.write_text(SECRET)
    scoped = {
        "oauth2ClientCredentials": {
            "tokenURL": peers.token_url,
            "clientID": "bridge",
            "clientSecretFile": str(secret),
            "scopes": ["other"],
            "resource": peers.mcp_url,
        }
    }
    wrong_subject = {
        "tokenExchange": {
            "tokenURL": peers.token_url,
            "subjectTokenFile": str(token_file),
            "resource": peers.mcp_url,
        }
    }
    servers = [
        server_entry("scoped", peers.mcp_url, auth=scoped, tools=["echo"]),
        server_entry("wrong", peers.mcp_url, auth=wrong_subject, tools=["echo"]),
    ]
    with run_bridge(servers) as bridge:
        async with Client(bridge.url, mode="auto") as client:  # type: ignore[arg-type]
            listed = await client.list_tools()
            assert listed.tools == []  # neither could be listed
    # The bridge lists nothing it cannot call; the pipeline's mapping is checked on the
    # failures the servers really gave, through the pool.
    from mcp_operator.api.bridge import BridgeConfig
    from mcp_operator.bridge.unauthorized import unauthorized
    from mcp_operator.bridge.upstreams import UpstreamPool, server_key
    from mcp_operator.mcp.failures import McpFailure

    config = BridgeConfig.model_validate(
        {"run": {"name": "r", "namespace": "default"}, "servers": servers}
    )
    pool = UpstreamPool(on_change=lambda _catalog: None)
    try:
        await pool.configure(config)
        errors = []
        for server in config.servers:
            with pytest.raises(McpFailure) as caught:
                await pool.call(server, "echo", {"text": "x"})
            errors.append(unauthorized(server_key(server), caught.value))
    finally:
        await pool.stop()
    scope_error, subject_error = errors
    assert scope_error is not None and scope_error.code == "insufficient_scope"
    assert "Required scope: mcp:tools" in scope_error.hint
    assert subject_error is not None and subject_error.code == "upstream_unauthorized"
    assert "(invalid_grant)" in subject_error.hint


def test_the_metadata_documents_are_real(peers: OAuthPeers) -> None:
    """The peers serve RFC 8414 and RFC 9728 documents (what the operator reads)."""
    authorization = httpx.get(f"{peers.issuer}/.well-known/oauth-authorization-server").json()
    resource = httpx.get(
        peers.mcp_url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    ).json()
    assert authorization["token_endpoint"] == peers.token_url
    assert resource["authorization_servers"] == [peers.issuer]
