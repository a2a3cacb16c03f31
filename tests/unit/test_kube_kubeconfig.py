"""A kubeconfig user that is not an exec plugin, read by kube.credentials itself, and the
credential that kopf's watches get from it (the same identity as the operator's client)."""

from __future__ import annotations

import base64
import datetime
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp.web
import jwt as pyjwt
import kopf
import pytest
import yaml

from mcp_operator.controller.handlers import authenticate
from mcp_operator.kube.credentials import load_credentials, login
from mcp_operator.kube.tokens import CredentialError, OidcToken, jwt_claims
from tests.support.certificates import Authority, issue, new_authority

NOW = datetime.datetime.now(datetime.UTC)


@pytest.fixture(scope="module")
def authority() -> Authority:
    return new_authority()


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def kubeconfig(tmp_path: Path, user: dict[str, Any], **cluster: Any) -> Path:
    path = tmp_path / "config"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": {"server": "https://k8s:6443/", **cluster}}],
                "users": [{"name": "me", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "me"}}],
                "current-context": "x",
            }
        )
    )
    return path


def jwt(expires: datetime.datetime, marker: str) -> str:
    """An ID token as an issuer signs it (with a key the client never sees)."""
    claims = {"exp": int(expires.timestamp()), "marker": marker}
    return pyjwt.encode(claims, "the identity provider's signing key", algorithm="HS256")


async def test_a_token_user_on_a_cluster_with_ca_data_is_what_kopf_gets_too(
    tmp_path: Path, authority: Authority
) -> None:
    path = kubeconfig(
        tmp_path,
        {"token": "t0ken"},
        **{"certificate-authority-data": b64(authority.certificate_pem)},
    )
    credentials = load_credentials(str(path))
    assert credentials.server == "https://k8s:6443" and not credentials.in_cluster
    assert await credentials.tokens.token() == "t0ken"
    current = await login(credentials, renew=False)
    assert (current.server, current.token, current.ca_pem) == (
        "https://k8s:6443",
        "t0ken",
        authority.certificate_pem,
    )
    assert "t0ken" not in repr(current)


async def test_a_client_certificate_from_files_is_loaded_and_handed_to_kopf(
    tmp_path: Path, authority: Authority
) -> None:
    certificate, key = issue(
        authority,
        "operator",
        not_before=NOW - datetime.timedelta(hours=1),
        not_after=NOW + datetime.timedelta(hours=1),
    )
    (tmp_path / "me.crt").write_text(certificate)
    (tmp_path / "me.key").write_text(key)
    (tmp_path / "ca.crt").write_text(authority.certificate_pem)
    path = kubeconfig(
        tmp_path,
        {"client-certificate": "me.crt", "client-key": "me.key"},
        **{"certificate-authority": "ca.crt", "tls-server-name": "api.internal"},
    )
    credentials = load_credentials(str(path))
    assert credentials.certificate is not None
    assert credentials.certificate.certificate_pem == certificate
    assert credentials.verification is not None
    assert credentials.verification.server_name == "api.internal"
    info = await authenticate(memo=kopf.Memo(login_credentials=credentials))
    assert info.certificate_data == certificate and info.private_key_data == key
    assert info.token is None and info.ca_data == authority.certificate_pem


@pytest.mark.parametrize(
    ("user", "complaint"),
    [
        ({"username": "admin", "password": "pw"}, "basic authentication"),
        ({"auth-provider": {"name": "gcp"}}, "only oidc"),
        ({"client-certificate-data": b64("x")}, "without the other"),
        ({"client-key-data": "%%%", "client-certificate-data": "%%%"}, "not base64"),
    ],
)
def test_a_user_we_cannot_be_is_an_error_naming_the_user(
    tmp_path: Path, user: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(CredentialError, match=complaint) as raised:
        load_credentials(str(kubeconfig(tmp_path, user)))
    assert "me" in str(raised.value) and "pw" not in str(raised.value)


def test_a_kubeconfig_without_a_current_user_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump({"clusters": [], "users": [], "contexts": []}))
    with pytest.raises(CredentialError, match="names a current context"):
        load_credentials(str(path))


async def test_a_token_file_is_read_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file\n")
    credentials = load_credentials(str(kubeconfig(tmp_path, {"tokenFile": "token"})))
    assert await credentials.tokens.token() == "from-file"


@pytest.fixture
async def issuer() -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    """An OpenID Connect issuer on loopback: discovery and a token endpoint that hands out
    a fresh ID token (and a new refresh token) for the refresh token it knows."""
    grants: list[dict[str, str]] = []
    app = aiohttp.web.Application()
    runner = aiohttp.web.AppRunner(app)

    async def discovery(_request: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.json_response({"token_endpoint": f"{base}/token"})

    async def token(request: aiohttp.web.Request) -> aiohttp.web.Response:
        form = dict(await request.post())
        grants.append({key: str(value) for key, value in form.items()})
        if form.get("refresh_token") != f"refresh-{len(grants)}":
            return aiohttp.web.json_response({"error": "invalid_grant"}, status=400)
        fresh = jwt(NOW + datetime.timedelta(hours=1), f"fresh-{len(grants)}")
        return aiohttp.web.json_response(
            {"id_token": fresh, "refresh_token": f"refresh-{len(grants) + 1}"}
        )

    app.router.add_get("/.well-known/openid-configuration", discovery)
    app.router.add_post("/token", token)
    await runner.setup()
    site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    base = f"http://127.0.0.1:{port}"
    yield base, grants
    await runner.cleanup()


async def test_an_expired_oidc_id_token_is_refreshed_at_the_issuer_and_refused_refreshes_say_so(
    tmp_path: Path, issuer: tuple[str, list[dict[str, str]]]
) -> None:
    base, grants = issuer
    config = {
        "id-token": jwt(NOW - datetime.timedelta(minutes=5), "expired"),
        "refresh-token": "refresh-1",
        "client-id": "kubectl",
        "client-secret": "s3cret",
        "idp-issuer-url": base,
    }
    credentials = load_credentials(
        str(kubeconfig(tmp_path, {"auth-provider": {"name": "oidc", "config": config}}))
    )
    assert isinstance(credentials.tokens, OidcToken) and "s3cret" not in repr(credentials.tokens)
    token = await credentials.tokens.token()
    assert token is not None and jwt_claims(token)["marker"] == "fresh-1"
    assert grants == [
        {
            "grant_type": "refresh_token",
            "refresh_token": "refresh-1",
            "client_id": "kubectl",
            "client_secret": "s3cret",
        }
    ]
    assert await credentials.tokens.token() == token  # fresh now: no second refresh
    assert len(grants) == 1
    # A 401 makes kopf log in again: renewed with the refresh token the issuer handed out.
    renewed = await login(credentials, renew=True)
    assert renewed.token != token and grants[-1]["refresh_token"] == "refresh-2"
    assert renewed.expires_at is not None and renewed.expires_at > NOW

    grants.append({})  # the issuer now expects another refresh token than ours
    with pytest.raises(CredentialError, match="HTTP 400") as raised:
        await login(credentials, renew=True)
    assert "s3cret" not in str(raised.value) and "refresh-" not in str(raised.value)
