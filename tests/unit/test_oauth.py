"""OAuth to external servers, the pure parts: the API, challenges, token responses, the cache's
rules, and how the bridge's configuration and Pod carry ``spec.auth`` (files, never values).

The wire (a real authorization server, a real protected MCP server) is tests/protocol/test_oauth.py.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Mapping
from typing import Any

import jwt as pyjwt
import pytest
from pydantic import ValidationError

from mcp_operator.api import MCPServer
from mcp_operator.api.bridge import parse_bridge_config
from mcp_operator.bridge.unauthorized import unauthorized
from mcp_operator.controller.agentrun import configmap, render, resolve
from mcp_operator.mcp import challenge
from mcp_operator.mcp.errors import ProbeState
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.oauth import (
    Client,
    ClientCredentialsGrant,
    OAuthCredentials,
    TokenExchangeGrant,
)
from mcp_operator.mcp.tokens import (
    TokenEndpoint,
    TokenError,
    jwt_claims,
    refresh_margin,
    token_from,
)
from mcp_operator.mcp.translation import translate
from mcp_operator.net.egress import EgressPolicy
from tests.support.waiting import eventually_async
from tests.unit.test_agentrun_render import SETTINGS, ready_server, run, servers

CC = {
    "oauth2ClientCredentials": {
        "tokenURL": "https://as.example/token",
        "clientID": "platform",
        "clientSecretRef": {"name": "oauth-client", "key": "secret"},
        "scopes": ["mcp:tools"],
    }
}
EXCHANGE = {
    "tokenExchange": {
        "tokenURL": "https://as.example/token",
        "audience": "files",
        "subjectTokenAudience": "https://as.example",
    }
}


def server(**spec: Any) -> MCPServer:
    body = {"mode": "external", "url": "https://files.example/mcp", **spec}
    return MCPServer.model_validate({"metadata": {"name": "files", "namespace": "a"}, "spec": body})


# -- the API ---------------------------------------------------------------------------------


def test_auth_takes_exactly_one_method() -> None:
    assert server(auth=CC).spec.auth is not None
    with pytest.raises(ValidationError, match="exactly one of oauth2ClientCredentials or"):
        server(auth={**CC, **EXCHANGE})
    with pytest.raises(ValidationError, match="exactly one of"):
        server(auth={})


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ({"mode": "managed", "url": None, "deployment": {"image": "x"}}, "only when mode is"),
        ({"transport": "sse"}, "need transport streamable-http"),
        ({"headers": [{"name": "authorization", "value": "x"}]}, "Authorization header"),
    ],
)
def test_auth_is_refused_where_it_cannot_work(spec: dict[str, Any], words: str) -> None:
    body = {"mode": "external", "url": "https://files.example/mcp", "auth": CC, **spec}
    body = {key: value for key, value in body.items() if value is not None}
    with pytest.raises(ValidationError, match=words):
        MCPServer.model_validate({"metadata": {"name": "f", "namespace": "a"}, "spec": body})


def test_a_client_secret_needs_a_client_in_a_token_exchange() -> None:
    exchange = {
        "tokenExchange": {
            "tokenURL": "https://as.example/t",
            "clientSecretRef": {"name": "s", "key": "k"},
        }
    }
    with pytest.raises(ValidationError, match="only together with clientID"):
        server(auth=exchange)


@pytest.mark.parametrize(
    "audience",
    [
        "https://kubernetes.default.svc",
        "https://as.example:8443",
        "http://as.example",
        "https://as.example/tok",
        "https://as.exampl",
    ],
)
def test_a_subject_token_audience_names_the_authorization_server_it_is_sent_to(
    audience: str,
) -> None:
    """A tenant's server must not make the bridge (or the operator) hand a token good for
    the Kubernetes API, or for anything but the token endpoint, to that endpoint."""
    exchange = {"tokenExchange": {"tokenURL": "https://as.example/token"}}
    exchange["tokenExchange"]["subjectTokenAudience"] = audience
    with pytest.raises(ValidationError, match="the tokenURL or the part of it before a '/'"):
        server(auth=exchange)
    for good in ("https://as.example", "https://as.example/token"):
        exchange["tokenExchange"]["subjectTokenAudience"] = good
        assert server(auth=exchange).spec.auth is not None


def test_the_probe_uses_its_own_auth_else_the_calls_and_both_secrets_are_referenced() -> None:
    probe_cc = json.loads(json.dumps(CC).replace("oauth-client", "probe-client"))
    both = server(auth=CC, probe={"auth": probe_cc})
    assert both.spec.probe_auth == both.spec.probe.auth
    assert server(auth=CC).spec.probe_auth == server(auth=CC).spec.auth
    uses = [(u.reader, u.name, u.secret) for u in both.referenced_secrets()]
    assert uses == [("auth", "auth", "oauth-client"), ("auth", "probe.auth", "probe-client")]
    assert server(auth=EXCHANGE).spec.auth.token_exchange.effective_subject_token_audience == (  # type: ignore[union-attr]
        "https://as.example"
    )


# -- challenges ------------------------------------------------------------------------------


def test_a_challenge_is_read_with_quoted_and_bare_parameters() -> None:
    found = challenge.parse(
        'Bearer realm="x", error="insufficient_scope", scope="a b", '
        'resource_metadata="https://s.example/.well-known/oauth-protected-resource", '
        'Basic realm="y"'
    )
    assert found is not None and found.scheme == "Bearer" and found.insufficient_scope
    assert found.scope == "a b" and found.params["realm"] == "x"
    assert found.resource_metadata == "https://s.example/.well-known/oauth-protected-resource"
    assert challenge.parse("") is None and challenge.parse(None) is None
    assert (
        challenge.parse('Bearer resource_metadata="file:///etc/passwd"').resource_metadata is None
    )


def test_server_text_in_a_challenge_is_cut_and_printable() -> None:
    found = challenge.parse('Bearer error="x\\u0007' + "y" * 500 + '"')
    text = challenge.explain("S", 401, found)
    assert len(text) < 400 and "\x07" not in text


# -- token responses and refusals ------------------------------------------------------------


def signed(claims: Mapping[str, Any]) -> str:
    """A JWT signed by a key the client does not know (the server's business to verify)."""
    key = "the authorization server's signing key, unknown here"
    return pyjwt.encode(dict(claims), key, algorithm="HS256")


def test_a_token_response_gives_a_bearer_token_with_its_subject_and_actor() -> None:
    value = signed({"sub": "system:serviceaccount:a:agent", "act": {"sub": "bridge"}})
    token = token_from(
        {"access_token": value, "token_type": "bearer", "expires_in": 600}, 10.0, "T"
    )
    assert token.headers == {"authorization": f"Bearer {value}"}
    assert (token.subject, token.actor) == ("system:serviceaccount:a:agent", "bridge")
    assert token.expires == 610.0 and token.refresh_at == 580.0
    assert value not in repr(token)
    assert refresh_margin(10) == 1.0 and refresh_margin(3600) == 30.0
    assert jwt_claims("opaque-token") == {}


def test_the_subject_of_a_token_is_read_whatever_its_expiry_audience_or_issuer() -> None:
    # Unverified on purpose: the claims name the caller in the audit line; checking the
    # expiry, audience or issuer is the server's (a reader that did would lose the name).
    claims = {"sub": "alice", "exp": 1, "nbf": 4102444800, "aud": "elsewhere", "iss": "x"}
    assert jwt_claims(signed(claims)) == claims
    assert jwt_claims("e30.WzFd.sig") == {}  # a payload that is not an object
    token = token_from({"access_token": signed({"act": "no"}), "token_type": "Bearer"}, 0, "T")
    assert (token.subject, token.actor) == (None, None)


@pytest.mark.parametrize(
    "response",
    [
        {"token_type": "Bearer"},
        {"access_token": "a b\n", "token_type": "Bearer"},
        {"access_token": "t", "token_type": "mac"},
    ],
)
def test_a_token_response_without_a_usable_bearer_token_is_a_protocol_error(
    response: dict[str, Any],
) -> None:
    with pytest.raises(TokenError) as caught:
        token_from(response, 0.0, "T")
    assert caught.value.reason == "ProtocolError"


class ScriptedEndpoint(TokenEndpoint):
    """A token endpoint that answers from a list (the cache's rules, without a network)."""

    def __init__(self, *answers: dict[str, Any] | TokenError) -> None:
        super().__init__("https://as.example/token", egress=EgressPolicy())
        self.answers = list(answers)
        self.forms: list[dict[str, str]] = []
        self.heads: list[Mapping[str, str]] = []

    async def request(
        self, form: Mapping[str, str], headers: Mapping[str, str], who: str
    ) -> dict[str, Any]:
        self.forms.append(dict(form))
        self.heads.append(headers)
        await asyncio.sleep(0.01)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, TokenError):
            raise answer
        return answer


def bearer(value: str, lifetime: int = 600) -> dict[str, Any]:
    return {"access_token": value, "token_type": "Bearer", "expires_in": lifetime}


async def secret() -> str:
    return "pa:ss/word"


async def test_the_client_authenticates_with_basic_and_the_form_carries_the_grant() -> None:
    endpoint = ScriptedEndpoint(bearer("t1"))
    grant = ClientCredentialsGrant(
        resource="https://files.example/mcp", audience="files", scopes=("a", "b")
    )
    credentials = OAuthCredentials(endpoint, grant, Client("plat form", secret))
    assert await credentials.headers() == {"authorization": "Bearer t1"}
    assert endpoint.forms == [
        {
            "grant_type": "client_credentials",
            "resource": "https://files.example/mcp",
            "audience": "files",
            "scope": "a b",
        }
    ]
    basic = base64.b64decode(endpoint.heads[0]["authorization"].split()[1]).decode()
    assert basic == "plat%20form:pa%3Ass%2Fword"  # RFC 6749 §2.3.1: form-encoded, then Basic


async def test_a_token_exchange_sends_the_subject_and_a_public_client_its_id() -> None:
    async def subject() -> str:
        return "subject-jwt"

    endpoint = ScriptedEndpoint(bearer("t1"))
    grant = TokenExchangeGrant(subject=subject, resource="https://files.example/mcp")
    await OAuthCredentials(endpoint, grant, Client("public")).headers()
    form = endpoint.forms[0]
    assert form["grant_type"] == "urn:ietf:params:oauth:grant-type:token-exchange"
    assert form["subject_token"] == "subject-jwt" and form["client_id"] == "public"
    assert form["subject_token_type"] == "urn:ietf:params:oauth:token-type:jwt"
    assert "authorization" not in endpoint.heads[0]


async def test_concurrent_callers_share_one_token_request_and_a_401_burst_costs_one_more() -> None:
    now = [0.0]
    endpoint = ScriptedEndpoint(bearer("t1"), bearer("t2"), bearer("t3"))
    credentials = OAuthCredentials(
        endpoint, ClientCredentialsGrant(), Client("c", secret), clock=lambda: now[0]
    )

    answered, out = asyncio.Event(), []

    async def call() -> tuple[str, bool]:
        sent = (await credentials.headers())["authorization"]
        out.append(sent)
        await answered.wait()  # every request is out before the first 401 comes back
        return sent, await credentials.rejected(401, None)

    calls = [asyncio.ensure_future(call()) for _ in range(10)]

    async def requests_out() -> int:
        return len(out)

    await eventually_async("every caller's request out", requests_out, until=lambda n: n == 10)
    answered.set()
    results = await asyncio.gather(*calls)
    assert {sent for sent, _ in results} == {"Bearer t1"} and all(again for _, again in results)
    assert len(endpoint.forms) == 1
    # Every request of the burst carried t1: the first 401 dropped it, and the one token
    # request that followed gave t2, which the later 401s (for t1) leave alone.
    assert await credentials.headers() == {"authorization": "Bearer t2"}
    assert await credentials.rejected(401, None) is True  # this task sent t2: dropped
    assert await credentials.headers() == {"authorization": "Bearer t3"}
    assert len(endpoint.forms) == 3


async def test_a_403_is_no_reason_for_a_new_token() -> None:
    endpoint = ScriptedEndpoint(bearer("t1"))
    credentials = OAuthCredentials(endpoint, ClientCredentialsGrant(), Client("c", secret))
    await credentials.headers()
    assert await credentials.rejected(403, 'Bearer error="insufficient_scope"') is False
    await credentials.headers()
    assert len(endpoint.forms) == 1


# -- what refusals become --------------------------------------------------------------------


def test_a_token_error_is_the_probes_reason_in_its_own_words() -> None:
    error = TokenError(
        "AuthRequired", "the token endpoint https://as.example/token refused client c"
    )
    translated = translate(error, ProbeState("https://files.example/mcp", 10))
    assert translated.reason == "AuthRequired"
    assert translated.message == (
        "the token endpoint https://as.example/token refused client c (for https://files.example/mcp)"
    )


@pytest.mark.parametrize(
    ("failure", "code"),
    [
        (TokenError("AuthRequired", "refused"), "upstream_unauthorized"),
        (TokenError("DestinationRefused", "not contacted"), "upstream_unauthorized"),
        (TokenError("InsufficientScope", "scopes"), "insufficient_scope"),
        (McpFailure("http", "401", status=401, challenge="Bearer"), "upstream_unauthorized"),
        (
            McpFailure("http", "403", status=403, challenge='Bearer error="insufficient_scope"'),
            "insufficient_scope",
        ),
        (McpFailure("http", "403", status=403), None),
        (McpFailure("http", "500", status=500), None),
    ],
)
def test_the_bridge_maps_authorization_refusals_to_their_codes(
    failure: McpFailure, code: str | None
) -> None:
    error = unauthorized("a/files", failure)
    assert (error.code if error is not None else None) == code


def test_an_unreachable_token_endpoint_is_transient_and_a_refusal_is_not() -> None:
    assert TokenError("Unreachable", "x").transient
    assert not TokenError("AuthRequired", "x").transient
    assert not TokenError("DestinationRefused", "x").transient


# -- the run's bridge ------------------------------------------------------------------------


def test_the_bridge_config_names_files_for_the_client_secret_and_defaults_the_resource() -> None:
    files = ready_server("files", auth=CC)
    the_run = run({"name": "files"})
    resolution = resolve.resolve(the_run, servers(files))
    config = configmap.bridge_config(the_run, resolution)
    text = configmap.config_text(config)
    parsed = parse_bridge_config(text)
    auth = parsed.servers[0].auth
    assert auth is not None and auth.oauth2_client_credentials is not None
    assert auth.oauth2_client_credentials.client_secret_file == (
        "/var/run/mcp-bridge/secrets/oauth-client/secret"
    )
    assert auth.oauth2_client_credentials.resource == "http://files.example/mcp"
    pod = render.pod(the_run, resolution, SETTINGS)
    bridge = pod["spec"]["initContainers"][0]
    assert {
        "name": "secret-0",
        "mountPath": "/var/run/mcp-bridge/secrets/oauth-client",
        "readOnly": True,
    } in bridge["volumeMounts"]
    agent = pod["spec"]["containers"][0]
    assert all("secret" not in mount["name"] for mount in agent["volumeMounts"])


def test_a_token_exchange_mounts_the_runs_own_token_for_the_authorization_server() -> None:
    files = ready_server("files", auth=EXCHANGE)
    the_run = run({"name": "files"})
    resolution = resolve.resolve(the_run, servers(files))
    config = parse_bridge_config(
        configmap.config_text(configmap.bridge_config(the_run, resolution))
    )
    exchange = config.servers[0].auth.token_exchange  # type: ignore[union-attr]
    assert exchange is not None
    assert exchange.subject_token_file == "/var/run/mcp-bridge/exchange/agents/files/token"
    assert exchange.audience == "files" and exchange.client_secret_file is None
    pod = render.pod(the_run, resolution, SETTINGS)
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "exchange-0")
    token = volume["projected"]["sources"][0]["serviceAccountToken"]
    assert token["audience"] == "https://as.example" and token["path"] == "token"
    bridge, agent = pod["spec"]["initContainers"][0], pod["spec"]["containers"][0]
    assert any(m["name"] == "exchange-0" for m in bridge["volumeMounts"])
    assert all(m["name"] != "exchange-0" for m in agent["volumeMounts"])


def test_a_client_secret_is_not_shared_across_namespaces_and_needs_the_opt_in() -> None:
    files = ready_server("files", namespace="platform", auth=CC, access={"namespaces": ["*"]})
    the_run = run({"name": "files", "namespace": "platform"})
    binding = resolve.resolve(the_run, servers(files)).bindings[0]
    assert binding.reason == resolve.SECRET_NOT_SHAREABLE
    local = ready_server("files", auth=CC)
    assert resolve.header_secrets(servers(local)) == {("agents", "oauth-client")}
    unlabelled = resolve.resolve(run({"name": "files"}), servers(local), opted_in_secrets=set())
    assert unlabelled.bindings[0].reason == resolve.SECRET_NOT_SHAREABLE
