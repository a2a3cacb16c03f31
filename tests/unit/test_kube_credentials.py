"""Who the operator is, as the ``kubernetes`` package resolves it (``kube.credentials``): what
``KubeClient`` and kopf's watches get from each kind of kubeconfig user and from a Pod's
service account, when the client is asked again (expiry, a 401), and what is refused before
the library would do it wrongly. Exec plugins are real programs; the clock is virtual."""

from __future__ import annotations

import asyncio
import base64
import datetime
import logging
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt as pyjwt
import kopf
import pytest
import yaml
from kubernetes.config import kube_config

from mcp_operator.controller.handlers import authenticate
from mcp_operator.kube import KubeClient, KubeError
from mcp_operator.kube import credentials as credentials_module
from mcp_operator.kube.credentials import (
    EXPIRY_SKEW,
    Credential,
    CredentialError,
    Credentials,
    load_credentials,
)
from mcp_operator.kube.resources import SECRETS
from mcp_operator.kube.tls import CertificateTransport
from tests.support.certificates import Authority, issue, new_authority

NOW = datetime.datetime.now(datetime.UTC).replace(microsecond=0)

PLUGIN = """\
#!{python}
import datetime, json, os, pathlib, sys
runs = pathlib.Path(os.environ["RUNS_FILE"])
count = int(runs.read_text()) + 1 if runs.exists() else 1
runs.write_text(str(count))
if os.environ.get("WAIT_FOR"):  # until the test's event loop has made this file
    waited = pathlib.Path(os.environ["WAIT_FOR"])
    for _ in range(100):
        if waited.exists():
            break
        __import__("time").sleep(0.1)
    else:
        sys.exit(4)
if os.environ.get("HANG_FILE"):  # a shell child that holds the output open, as a login waits
    import subprocess
    hang = subprocess.Popen(["sleep", "600"])
    pathlib.Path(os.environ["HANG_FILE"]).write_text(f"{{os.getpid()}} {{hang.pid}}")
    hang.wait()
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


@pytest.fixture(scope="module")
def authority() -> Authority:
    return new_authority()


@pytest.fixture(autouse=True)
def private_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Where the library's temporary files would go: empty after every load."""
    directory = tmp_path / "tmp"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    yield directory
    assert not any(directory.iterdir()), "no PEM left behind"
    assert not kube_config._temp_files, "nor kept in the library's table"


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


def exec_spec(tmp_path: Path, **env: str) -> dict[str, Any]:
    path = tmp_path / "bin" / "get-token"
    path.parent.mkdir(exist_ok=True)
    path.write_text(PLUGIN.format(python=sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    variables = {"RUNS_FILE": str(tmp_path / "runs"), **env}
    return {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": str(path),
        "args": ["arg"],
        "env": [{"name": k, "value": v} for k, v in variables.items()],
        "provideClusterInfo": True,
        "interactiveMode": "Never",
    }


def runs(tmp_path: Path) -> int:
    return int((tmp_path / "runs").read_text())


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime.datetime:
        return self.now


async def test_a_token_user_is_what_the_client_and_kopf_get_with_ca_sni_and_proxy(
    tmp_path: Path, authority: Authority
) -> None:
    path = kubeconfig(
        tmp_path,
        {"token": "t0ken"},
        **{
            "certificate-authority-data": b64(authority.certificate_pem),
            "tls-server-name": "api.internal",
            "proxy-url": "http://proxy.example:3128",
        },
    )
    credentials = load_credentials(str(path))
    current = credentials.cached()
    assert (current.server, current.token, current.ca_pem) == (
        "https://k8s:6443",
        "t0ken",
        authority.certificate_pem,
    )
    assert (current.server_name, current.proxy, current.user) == (
        "api.internal",
        "http://proxy.example:3128",
        "me",
    )
    assert not credentials.in_cluster and "t0ken" not in repr(current)
    info = await authenticate(memo=kopf.Memo(login_credentials=credentials))
    assert (info.server, info.token, info.scheme, info.ca_data, info.proxy_url) == (
        "https://k8s:6443",
        "t0ken",
        "Bearer",
        authority.certificate_pem,
        "http://proxy.example:3128",
    )


@pytest.mark.parametrize("as_data", [False, True])
async def test_a_client_certificate_is_read_into_memory_and_handed_to_both_clients(
    tmp_path: Path, authority: Authority, as_data: bool
) -> None:
    not_after = NOW + datetime.timedelta(hours=1)
    certificate, key = issue(
        authority, "operator", not_before=NOW - datetime.timedelta(hours=1), not_after=not_after
    )
    (tmp_path / "me.crt").write_text(certificate)
    (tmp_path / "me.key").write_text(key)
    (tmp_path / "ca.crt").write_text(authority.certificate_pem)
    user = (
        {"client-certificate-data": b64(certificate), "client-key-data": b64(key)}
        if as_data
        else {"client-certificate": "me.crt", "client-key": "me.key"}
    )
    path = kubeconfig(tmp_path, user, **{"certificate-authority": "ca.crt"})
    credentials = load_credentials(str(path))
    current = credentials.cached()
    assert current.certificate is not None and current.certificate.key_pem == key
    assert current.expires_at == not_after, "asked again before the certificate expires"
    assert "PRIVATE KEY" not in repr(current)
    kube = KubeClient(credentials)
    assert isinstance(kube._transport, CertificateTransport), "renewed: new connections"
    await kube.close()
    info = await authenticate(memo=kopf.Memo(login_credentials=credentials))
    assert info.certificate_data == certificate and info.private_key_data == key
    assert info.token is None and info.ca_data == authority.certificate_pem


async def test_a_token_file_is_read_relative_to_the_kubeconfig_and_again_when_renewed(
    tmp_path: Path,
) -> None:
    (tmp_path / "token").write_text("from-file")
    credentials = load_credentials(str(kubeconfig(tmp_path, {"tokenFile": "token"})))
    assert (await credentials.current()).token == "from-file"
    (tmp_path / "token").write_text("rotated")
    assert (await credentials.renew()).token == "rotated"


@pytest.mark.parametrize(
    ("user", "complaint"),
    [
        ({"username": "admin", "password": "pw"}, "basic authentication"),
        ({"auth-provider": {"name": "gcp"}}, "only oidc"),
        (
            {"auth-provider": {"name": "oidc", "config": {"id-token": "x", "client-id": "k"}}},
            "would not verify the issuer",
        ),
        ({"exec": {"command": "login", "interactiveMode": "Always"}}, "needs a terminal"),
    ],
)
def test_a_user_the_library_would_serve_wrongly_is_refused_naming_the_user(
    tmp_path: Path, user: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(CredentialError, match=complaint) as raised:
        load_credentials(str(kubeconfig(tmp_path, user)))
    assert "user me" in str(raised.value) and "pw" not in str(raised.value)


def test_a_token_file_that_is_missing_is_an_error_naming_the_kubeconfig(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, {"tokenFile": "absent"})
    with pytest.raises(CredentialError, match="gave no credential: FileNotFoundError"):
        load_credentials(str(path))


def test_a_kubeconfig_without_a_current_user_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump({"clusters": [], "users": [], "contexts": []}))
    with pytest.raises(CredentialError, match="kubeconfig"):
        load_credentials(str(path))


async def test_an_exec_plugins_token_is_used_until_shortly_before_it_expires(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    clock = Clock()
    path = kubeconfig(tmp_path, {"exec": exec_spec(tmp_path)})
    credentials = load_credentials(str(path), now=clock)
    current = await credentials.current()
    # Run once with its args, told the cluster (provideClusterInfo), never interactive.
    assert current.token == "token-1:arg:https://k8s:6443/" and runs(tmp_path) == 1
    assert current.expires_at is not None and current.from_plugin
    assert "Obtained a token for kubeconfig user me from its exec plugin" in caplog.text
    assert "token-1" not in caplog.text
    clock.now = current.expires_at - EXPIRY_SKEW - datetime.timedelta(seconds=1)
    assert (await credentials.current()) is current and runs(tmp_path) == 1
    clock.now += datetime.timedelta(seconds=2)
    assert (await credentials.current()).token.startswith("token-2:")  # type: ignore[union-attr]
    assert runs(tmp_path) == 2


async def test_the_first_load_runs_off_the_event_loop_and_kopf_logs_in_with_it(
    tmp_path: Path,
) -> None:
    """The plugin waits for a file the event loop writes while the client loads: a load on
    the loop would wait for itself and fail. kopf's login then takes the client's credential
    as it is, without running the plugin again."""
    go = tmp_path / "go"
    path = kubeconfig(tmp_path, {"exec": exec_spec(tmp_path, WAIT_FOR=str(go))})
    opening = asyncio.create_task(KubeClient.open(str(path)))
    await asyncio.sleep(0)  # the load starts
    go.write_text("")
    kube = await asyncio.wait_for(opening, 20)
    assert kube.credentials.cached().token == "token-1:arg:https://k8s:6443/"
    info = await authenticate(memo=kopf.Memo(kube=kube))
    assert info.token == "token-1:arg:https://k8s:6443/" and runs(tmp_path) == 1
    await kube.close()


async def test_a_credential_that_comes_expired_is_sent_once_before_asking_again() -> None:
    """Asking again at once would get the same answer: the API server decides (its 401 renews
    the credential once); after that use, the expiry rules again."""
    clock, handed = Clock(), [0]

    def resolve() -> Credential:
        handed[0] += 1
        return Credential("https://k8s", token=f"t{handed[0]}", expires_at=NOW)

    credentials = Credentials(resolve(), resolve, now=clock)
    assert (await credentials.current()).token == "t1"
    assert (await credentials.current()).token == "t2"
    assert (await credentials.current()).token == "t2", "a fresh answer is used once as it is"
    assert credentials.loads == 2


async def test_after_a_401_the_client_is_asked_again_and_the_request_retried_once(
    tmp_path: Path,
) -> None:
    credentials = load_credentials(str(kubeconfig(tmp_path, {"exec": exec_spec(tmp_path)})))
    kube = KubeClient(credentials)
    seen: list[str] = []
    revoked = [False]

    def api(request: httpx.Request) -> httpx.Response:
        token = request.headers.get("authorization", "")
        seen.append(token.split(":")[0])
        if revoked[0] or not token.startswith(f"Bearer token-{runs(tmp_path)}:"):
            return httpx.Response(401, json={"message": "Unauthorized"})
        return httpx.Response(200, json={"data": {}})

    kube._client = httpx.AsyncClient(base_url=kube.server, transport=httpx.MockTransport(api))
    try:
        await kube.request("GET", SECRETS.path("ns", "s"))
        first = runs(tmp_path)
        # The cloud revokes the token early (a rotated key): the API server says 401.
        (tmp_path / "runs").write_text(str(first + 5))
        await kube.request("GET", SECRETS.path("ns", "s"))
        assert runs(tmp_path) == first + 6, "one more run of the plugin"
        assert seen[-2:] == [f"Bearer token-{first}", f"Bearer token-{first + 6}"]
        # Refused again after the renewal: an error naming the user, never the token.
        revoked[0] = True
        with pytest.raises(KubeError) as raised:
            await kube.request("GET", SECRETS.path("ns", "s"))
    finally:
        await kube.close()
    assert raised.value.status == 401
    assert "token of kubeconfig user me from its exec plugin" in str(raised.value)
    assert runs(tmp_path) == first + 7 and "token-" not in str(raised.value)


async def test_a_plugin_that_hangs_is_stopped_and_the_next_load_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The library waits for a plugin without a limit, holding the one-load lock: given up
    after the limit, the plugin and its own child are stopped, and the next load succeeds."""
    monkeypatch.setattr(credentials_module, "LOAD_TIMEOUT_SECONDS", 2.0)
    hang = tmp_path / "hang"
    path = kubeconfig(tmp_path, {"exec": exec_spec(tmp_path, HANG_FILE=str(hang))})
    with pytest.raises(CredentialError, match="did not come within 2 s") as raised:
        await KubeClient.open(str(path))
    assert "the kubeconfig" in str(raised.value)
    pids = [int(pid) for pid in hang.read_text().split()]
    for _ in range(100):  # SIGKILLed: gone once their parents reaped them (or they are zombies)
        if not any(alive(pid) for pid in pids):
            break
        await asyncio.sleep(0.05)
    assert not any(alive(pid) for pid in pids), "the plugin and its child were stopped"
    hang.unlink()
    path = kubeconfig(tmp_path, {"exec": exec_spec(tmp_path)})
    kube = await asyncio.wait_for(KubeClient.open(str(path)), 10)
    assert kube.credentials.cached().token.startswith("token-")  # type: ignore[union-attr]
    await kube.close()


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed and not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rfind(")") + 2] != "Z"


def test_a_failing_plugin_is_an_error_naming_the_user(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, {"exec": exec_spec(tmp_path, PLUGIN_FAILS="1")})
    with pytest.raises(CredentialError, match="exec plugin of kubeconfig user me gave no"):
        load_credentials(str(path))


async def test_a_pods_service_account_is_read_again_every_minute_and_kopf_told_its_expiry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, authority: Authority
) -> None:
    account = tmp_path / "serviceaccount"
    account.mkdir()
    expires = NOW + datetime.timedelta(hours=1)
    token = pyjwt.encode(
        {"exp": int(expires.timestamp())},
        "the kubelet signing key, never seen here",
        algorithm="HS256",
    )
    (account / "token").write_text(token)
    (account / "ca.crt").write_text(authority.certificate_pem)
    monkeypatch.setattr(credentials_module, "SERVICE_ACCOUNT_DIR", account)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    clock = Clock()
    credentials = load_credentials(None, now=clock)
    current = await credentials.current()
    assert credentials.in_cluster and current.server == "https://[fd00::1]:443"
    assert (current.token, current.ca_pem, current.expires_at) == (
        token,
        authority.certificate_pem,
        expires,
    )
    (account / "token").write_text("rotated")
    assert (await credentials.current()).token == token
    clock.now += datetime.timedelta(seconds=61)
    assert (await credentials.current()).token == "rotated", "the kubelet rotated it"
    info = await authenticate(memo=kopf.Memo(login_credentials=credentials))
    assert info.token == "rotated" and info.ca_data == authority.certificate_pem
