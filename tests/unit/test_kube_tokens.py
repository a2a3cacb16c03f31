"""Credentials that expire: a real exec plugin script behind the API client.

The plugin is a small program written by the test (as EKS', GKE's and AKS' plugins are
programs): it hands out ``token-1``, ``token-2``, ... counting its runs in a file, with the
expiry the test asks for. The API server is an httpx mock that accepts only the newest
token, so a client that kept an old one gets 401.
"""

from __future__ import annotations

import datetime
import json
import stat
import sys
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
import yaml

from mcp_operator.kube.client import KubeClient
from mcp_operator.kube.credentials import load_credentials
from mcp_operator.kube.exec_plugin import ExecPlugin, parse_exec_credential
from mcp_operator.kube.resources import SECRETS
from mcp_operator.kube.tokens import (
    CredentialError,
    jwt_claims,
    jwt_expiry,
    kubeconfig_user,
    still_fresh,
)

NOW = datetime.datetime(2026, 12, 1, 10, 0, tzinfo=datetime.UTC)
SKEW = datetime.timedelta(seconds=30)

PLUGIN = """\
#!{python}
import datetime, json, os, pathlib, sys
runs = pathlib.Path(os.environ["RUNS_FILE"])
count = int(runs.read_text()) + 1 if runs.exists() else 1
runs.write_text(str(count))
if os.environ.get("PLUGIN_FAILS"):
    sys.stderr.write("login expired, run the cloud's login command\\n")
    sys.exit(3)
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
lifetime = int(os.environ.get("LIFETIME", "3600"))
expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=lifetime)
server = info["spec"].get("cluster", {{}}).get("server")
print(json.dumps({{
    "apiVersion": info["apiVersion"],
    "kind": "ExecCredential",
    "status": {{
        "token": f"token-{{count}}:{{sys.argv[1]}}:{{server}}",
        "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }},
}}))
"""


def plugin(tmp_path: Path) -> Path:
    path = tmp_path / "bin" / "get-token"
    path.parent.mkdir()
    path.write_text(PLUGIN.format(python=sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def exec_spec(tmp_path: Path, **env: str) -> dict[str, Any]:
    variables = {"RUNS_FILE": str(tmp_path / "runs"), **env}
    return {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": str(plugin(tmp_path)),
        "args": ["arg"],
        "env": [{"name": k, "value": v} for k, v in variables.items()],
        "provideClusterInfo": True,
        "interactiveMode": "Never",
    }


def runs(tmp_path: Path) -> int:
    return int((tmp_path / "runs").read_text())


# -- pure parts ----------------------------------------------------------------------------


def test_an_exec_credential_is_parsed_with_its_expiry_and_never_shows_the_token() -> None:
    text = json.dumps(
        {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "kind": "ExecCredential",
            "status": {"token": "s3cr3t", "expirationTimestamp": "2026-12-01T10:15:00Z"},
        }
    )
    credential = parse_exec_credential(text, "aws")
    assert credential.token == "s3cr3t"
    assert credential.expires_at == NOW + datetime.timedelta(minutes=15)
    assert "s3cr3t" not in repr(credential)


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("not json", "printed no JSON"),
        ('{"kind": "Other"}', "no ExecCredential"),
        ('{"kind": "ExecCredential", "apiVersion": "v0"}', "apiVersion 'v0'"),
        (
            '{"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1",'
            ' "status": {}}',
            "neither status.token nor status.clientCertificateData",
        ),
    ],
)
def test_a_bad_exec_credential_is_an_error_naming_the_plugin(text: str, complaint: str) -> None:
    with pytest.raises(CredentialError, match=complaint) as caught:
        parse_exec_credential(text, "gke-gcloud-auth-plugin")
    assert "gke-gcloud-auth-plugin" in str(caught.value)


def test_a_token_is_renewed_shortly_before_it_expires() -> None:
    assert still_fresh(None, NOW, SKEW)
    assert still_fresh(NOW + datetime.timedelta(seconds=31), NOW, SKEW)
    assert not still_fresh(NOW + datetime.timedelta(seconds=30), NOW, SKEW)


def test_the_expiry_of_an_oidc_id_token_is_read_from_its_exp_claim() -> None:
    # Signed with a key the client does not have: the API server verifies, the client reads.
    key = "the issuer's signing key, which the client lacks"
    token = jwt.encode({"exp": 1796112000}, key, algorithm="HS256")
    assert jwt_expiry(token) == datetime.datetime.fromtimestamp(1796112000, datetime.UTC)
    assert jwt_expiry("not-a-jwt") is None


def test_an_expired_id_token_still_tells_its_expiry_so_that_it_is_refreshed() -> None:
    expired = jwt.encode({"exp": int(NOW.timestamp()) - 3600}, "k" * 32, algorithm="HS256")
    expires_at = jwt_expiry(expired)
    assert expires_at == NOW - datetime.timedelta(hours=1)
    assert not still_fresh(expires_at, NOW, SKEW)


@pytest.mark.parametrize(
    "token",
    [
        "a.b",
        "e30.WzFd.sig",  # the payload is [1], not an object
        jwt.encode({"exp": "soon"}, "k" * 32, algorithm="HS256"),
        jwt.encode({"sub": "no-exp"}, "k" * 32, algorithm="HS256"),
        "e30.!!!.sig",
    ],
)
def test_a_token_without_a_readable_exp_has_no_expiry(token: str) -> None:
    assert jwt_expiry(token) is None
    assert isinstance(jwt_claims(token), dict)


# -- the real plugin ----------------------------------------------------------------------


async def test_the_plugin_runs_once_while_its_token_is_fresh(tmp_path: Path) -> None:
    source = ExecPlugin(exec_spec(tmp_path), {"server": "https://api.example:6443"})
    assert await source.token() == "token-1:arg:https://api.example:6443"
    assert await source.token() == "token-1:arg:https://api.example:6443"
    assert runs(tmp_path) == 1


async def test_an_expiring_token_is_renewed_before_use(tmp_path: Path) -> None:
    # The plugin's tokens live 10 s, inside the renewal margin: every use renews.
    source = ExecPlugin(exec_spec(tmp_path, LIFETIME="10"), {})
    assert (await source.token() or "").startswith("token-1")
    assert (await source.token() or "").startswith("token-2")


async def test_a_failing_plugin_is_an_error_with_its_exit_code_and_last_line(
    tmp_path: Path,
) -> None:
    source = ExecPlugin(exec_spec(tmp_path, PLUGIN_FAILS="1"), {})
    with pytest.raises(CredentialError, match=r"exited with code 3: login expired"):
        await source.token()


def kubeconfig(tmp_path: Path, spec: dict[str, Any]) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"exec": spec}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


async def test_after_a_401_the_client_runs_the_plugin_again_and_retries_once(
    tmp_path: Path,
) -> None:
    path = kubeconfig(tmp_path, exec_spec(tmp_path))
    named = kubeconfig_user(str(path))
    assert named is not None and "exec" in named.user
    credentials = load_credentials(str(path))
    kube = KubeClient(credentials)
    seen: list[str] = []

    def api(request: httpx.Request) -> httpx.Response:
        token = request.headers.get("authorization", "")
        seen.append(token.split(":")[0])
        newest = f"Bearer token-{runs(tmp_path)}"
        if not token.startswith(newest + ":"):
            return httpx.Response(401, json={"message": "Unauthorized"})
        return httpx.Response(200, json={"data": {}})

    kube._client = httpx.AsyncClient(
        base_url=credentials.server, transport=httpx.MockTransport(api)
    )
    try:
        await kube.request("GET", SECRETS.path("ns", "s"))
        first = runs(tmp_path)
        # The cloud revokes the token early (a rotated key): the API server says 401.
        (tmp_path / "runs").write_text(str(first + 5))
        await kube.request("GET", SECRETS.path("ns", "s"))
    finally:
        await kube.close()
    assert runs(tmp_path) == first + 6, "one more run of the plugin"
    assert seen[-2:] == [f"Bearer token-{first}", f"Bearer token-{first + 6}"]
