"""The compiled bridge presents OAuth credentials to its servers as the Python bridge does.

The home module's own bridge tests (a cached client-credentials token, an exchanged token
with ``upstreamSubject`` / ``upstreamActor`` audited) run here again against the compiled
bridge. The tests written here run against both bridges (``program``), with
``tests/protocol/test_oauth.py``'s authorization server and protected MCP server
(``tests.support.oauth_peers``): a token the server refuses replaced once, and a server whose
credentials cannot be had failing alone, the secret and the tokens in no log line. The home
module's its refusal-mapping test reads the
Python pool's internals and is covered by ``test_a_server_whose_token_cannot_be_had...``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client import Client

from tests.protocol.test_oauth import (
    SECRET,
    _auth_entry,
    _text,
    peers,
    subject_key,
    test_the_bridge_calls_with_a_cached_client_credentials_token,
    test_the_bridge_exchanges_the_runs_own_token_and_audits_subject_and_actor,
)
from tests.support import dataplane, needs
from tests.support.bridge_run import run_bridge, server_entry
from tests.support.oauth_peers import OAuthPeers
from tests.support.waiting import eventually_async

pytestmark = [
    pytest.mark.timeout(180),
    needs.mark(needs.node_missing()),
    pytest.mark.usefixtures("compiled_bridge"),
]

# The fixtures and the home tests that run here again (pytest collects them).
__all__ = [
    "peers",
    "subject_key",
    "test_the_bridge_calls_with_a_cached_client_credentials_token",
    "test_the_bridge_exchanges_the_runs_own_token_and_audits_subject_and_actor",
]


def _client_credentials(peers: OAuthPeers, secret: Path, **extra: Any) -> dict[str, Any]:
    return {
        "oauth2ClientCredentials": {
            "tokenURL": peers.token_url,
            "clientID": "bridge",
            "clientSecretFile": str(secret),
            "scopes": ["mcp:tools"],
            "resource": peers.mcp_url,
            **extra,
        }
    }


async def test_a_token_the_server_no_longer_accepts_is_replaced_once(
    program: str, peers: OAuthPeers, tmp_path: Path
) -> None:
    secret = tmp_path / "client-secret"
    secret.write_text(SECRET)
    with run_bridge([_auth_entry(peers, _client_credentials(peers, secret))]) as bridge:
        async with Client(bridge.url, mode="auto") as client:  # type: ignore[arg-type]
            assert _text(await client.call_tool("secure_echo", {"text": "a"})) == "a"
            before = peers.stats()["client_credentials"]
            peers.rotate_keys()  # every token issued so far stops verifying: 401
            assert _text(await client.call_tool("secure_echo", {"text": "b"})) == "b"
        output = bridge.log()
    assert peers.stats()["client_credentials"] - before == 1
    assert SECRET not in output and "eyJ" not in output


async def test_a_server_whose_token_cannot_be_had_fails_alone_in_words_without_secrets(
    program: str, peers: OAuthPeers, tmp_path: Path
) -> None:
    wrong = tmp_path / "wrong-secret"
    wrong.write_text("not-the-Client-s3cret-value")
    missing = tmp_path / "absent"
    servers = [
        server_entry("refused", peers.mcp_url, auth=_client_credentials(peers, wrong)),
        server_entry("unread", peers.mcp_url, auth=_client_credentials(peers, missing)),
        _auth_entry(peers, _client_credentials(peers, tmp_path / "good")),
    ]
    (tmp_path / "good").write_text(SECRET)
    with run_bridge(servers) as bridge:
        async with Client(bridge.url, mode="auto") as client:  # type: ignore[arg-type]
            listed = await client.list_tools()
            assert _text(await client.call_tool("secure_echo", {"text": "ok"})) == "ok"
        output = bridge.log()
    assert {tool.name for tool in listed.tools} == {"secure_whoami", "secure_echo"}
    assert "not-the-Client-s3cret-value" not in output and SECRET not in output
    assert "eyJ" not in output
    assert "(invalid_client)" in output, output  # the token endpoint's refusal, named
    assert str(missing) in output, output  # the unreadable secret file, named


def _token(peers: OAuthPeers, scope: str) -> str:
    """An access token of the peers' authorization server for client ``bridge``."""
    answer = httpx.post(
        peers.token_url,
        auth=("bridge", SECRET),
        data={"grant_type": "client_credentials", "scope": scope, "resource": peers.mcp_url},
    )
    answer.raise_for_status()
    return str(answer.json()["access_token"])


async def test_a_servers_refusal_of_the_credentials_names_its_challenge_and_is_no_outage(
    program: str, peers: OAuthPeers, tmp_path: Path
) -> None:
    """The server's own 401 and 403 (the official SDK's bearer auth, with RFC 6750 and
    RFC 9728 challenges) become ``upstream_unauthorized`` and ``insufficient_scope`` saying
    what it asks for; the server stays up: the call after the fix goes through at once."""
    good, unscoped = _token(peers, "mcp:tools"), _token(peers, "other")
    token_file = tmp_path / "token"
    token_file.write_text(good)
    with run_bridge([server_entry("secure", peers.mcp_url, tokenFile=str(token_file))]) as bridge:
        async with Client(bridge.url, mode="auto") as client:  # type: ignore[arg-type]

            async def once_the_file_is_read(token: str, refused: bool) -> Any:
                """The first call's answer that is (not) a refusal after ``token`` is written
                (the compiled bridge reads the file at every request, the Python one checks
                it at most every second)."""
                token_file.write_text(token)
                answers: list[Any] = []

                async def answered() -> bool:
                    answers.append(await client.call_tool("secure_echo", {"text": "x"}))
                    return bool(answers[-1].is_error) == refused

                await eventually_async("the token file read", answered, 10)
                return answers[-1]

            assert _text(await client.call_tool("secure_echo", {"text": "a"})) == "a"
            scoped = await once_the_file_is_read(unscoped, True)
            refused = await once_the_file_is_read("not-a-token-at-all", True)
            assert _text(await once_the_file_is_read(good, False)) == "x"
        output = bridge.log()
    scope_error = scoped.structured_content or {}
    assert scope_error["code"] == "insufficient_scope", scoped
    assert "answered HTTP 403: the token lacks a scope it needs" in scope_error["hint"]
    assert "Required scope: mcp:tools" in scope_error["hint"]
    auth_error = refused.structured_content or {}
    assert auth_error["code"] == "upstream_unauthorized", refused
    hint = auth_error["hint"]
    assert "answered HTTP 401 asking for Bearer authentication" in hint
    assert "error invalid_token" in hint and "resource metadata http://127.0.0.1" in hint
    assert "configure spec.auth" in hint
    assert good not in output and unscoped not in output


def test_the_compiled_bridge_is_the_one_tested(program: str) -> None:
    """Guard: the ``compiled`` parameter really starts the binary."""
    from tests.support import bridge_run

    assert (str(dataplane.BINARY) in bridge_run.PROGRAM) == (program == "compiled")


async def test_bad_oauth_settings_fail_only_their_server_with_the_field_named(
    peers: OAuthPeers, tmp_path: Path
) -> None:
    """The compiled bridge reads ``auth`` per server: settings it cannot use fail that one
    server, named by field and never by value (the Python bridge refuses the whole
    configuration at load, so this test is the compiled bridge's alone)."""
    (tmp_path / "good").write_text(SECRET)
    relative = _client_credentials(peers, Path("relative/s3cret-path"))
    both = {**relative, "tokenExchange": {"tokenURL": peers.token_url, "resource": peers.mcp_url}}
    servers = [
        server_entry("relative", peers.mcp_url, auth=relative),
        server_entry("both", peers.mcp_url, auth=both),
        _auth_entry(peers, _client_credentials(peers, tmp_path / "good")),
    ]
    with run_bridge(servers) as bridge:
        async with Client(bridge.url, mode="auto") as client:  # type: ignore[arg-type]
            listed = await client.list_tools()
            assert _text(await client.call_tool("secure_echo", {"text": "ok"})) == "ok"
        output = bridge.log()
    assert {tool.name for tool in listed.tools} == {"secure_whoami", "secure_echo"}
    assert "default/relative: auth.oauth2ClientCredentials.clientSecretFile" in output, output
    assert "default/both: auth: exactly one of" in output, output
    assert "s3cret-path" not in output and SECRET not in output
