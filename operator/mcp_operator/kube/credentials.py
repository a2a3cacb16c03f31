"""Who the operator is to the API server: the server's address, its TLS, and the credentials.

Owns reading them once at start-up -- a Pod's service account, or the kubeconfig
(``KUBECONFIG``, the current context, merged by kubectl's rules) -- into
:class:`Credentials`, choosing the source that renews each kind
(:mod:`mcp_operator.kube.tokens`, :mod:`mcp_operator.kube.exec_plugin`), and handing the
current credential to kopf's watches (:func:`login`), so that both clients of the API
server are the same identity, renewed the same way. The kubeconfig is read here, without
the kubernetes library (README, Development, says why). Sending requests with the
credentials is :mod:`mcp_operator.kube.client`'s job.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_operator.kube.exec_plugin import ExecPlugin
from mcp_operator.kube.tls import ClientCertificate, ServerVerification, client_context
from mcp_operator.kube.tokens import (
    CredentialError,
    FileToken,
    KubeconfigUser,
    StaticToken,
    TokenSource,
    jwt_expiry,
    kubeconfig_user,
    oidc_token,
)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass
class Credentials:
    server: str
    verify: ssl.SSLContext | bool
    tokens: TokenSource
    in_cluster: bool = False
    certificate: ClientCertificate | None = None
    """The kubeconfig's client certificate (an exec plugin's is the plugin's to hand out)."""
    plugin: ExecPlugin | None = None
    """An exec plugin's credential (token, client certificate or both), renewed as it expires."""
    verification: ServerVerification | None = None
    """How the server is checked (a kubeconfig's user): for a renewed client certificate's new
    SSL context, the ``tls-server-name``, and kopf's watches (``controller.login``)."""


@dataclass(frozen=True)
class Login:
    """What another client of the same API server needs to be the operator (kopf's watches):
    the current credential, not how it is renewed. The ``repr`` never shows the token."""

    server: str
    ca_pem: str | None
    insecure: bool
    token: str | None
    certificate: ClientCertificate | None
    expires_at: datetime.datetime | None
    """When the credential expires (``None``: unknown); the other client logs in again then."""

    def __repr__(self) -> str:
        token = "<hidden>" if self.token else None
        return f"Login(server={self.server!r}, token={token}, certificate={self.certificate!r})"


async def login(credentials: Credentials, *, renew: bool) -> Login:
    """The credential to hand to another client now; ``renew``: the last one was refused
    or has expired, so a renewable one is renewed first (a static one is what it is)."""
    if renew:
        credentials.tokens.invalidate()
    verification = credentials.verification or ServerVerification()
    ca_pem = verification.ca_pem
    if credentials.in_cluster:
        ca_pem = (SERVICE_ACCOUNT_DIR / "ca.crt").read_text()  # the kubelet may have rotated it
    if credentials.plugin is not None:
        credential = await credentials.plugin.credential()
        return Login(
            credentials.server,
            ca_pem,
            verification.insecure,
            credential.token,
            credential.certificate,
            credential.expires_at,
        )
    token = await credentials.tokens.token()
    expires_at = jwt_expiry(token) if token else None
    return Login(
        credentials.server,
        ca_pem,
        verification.insecure,
        token,
        credentials.certificate,
        expires_at,
    )


def load_credentials(kubeconfig: str | None) -> Credentials:
    token_file = SERVICE_ACCOUNT_DIR / "token"
    if kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ and token_file.exists():
        host = os.environ["KUBERNETES_SERVICE_HOST"]
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if ":" in host:
            host = f"[{host}]"
        context = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT_DIR / "ca.crt"))
        return Credentials(
            server=f"https://{host}:{port}",
            verify=context,
            tokens=FileToken(token_file),
            in_cluster=True,
        )

    paths = kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    named = kubeconfig_user(paths)
    if named is not None and "exec" in named.user:
        return _exec_plugin_credentials(named)

    if named is None:
        raise CredentialError(
            f"no kubeconfig in {paths} names a current context with a user "
            "(and the operator runs outside a Pod)"
        )
    return _kubeconfig_credentials(named)


def _kubeconfig_credentials(named: KubeconfigUser) -> Credentials:
    """A user of the kubeconfig that is not an exec plugin: a token (written in, in a
    ``tokenFile``, or an ``auth-provider`` OIDC ID token, refreshed), a client certificate
    (files or data), or both; on the context's cluster, checked as it says."""
    user, cluster = named.user, named.cluster
    server = str(cluster.get("server") or "")
    if not server:
        raise CredentialError(f"the kubeconfig's cluster for user {named.name} names no server")
    if user.get("username") or user.get("password"):
        raise CredentialError(
            f"the kubeconfig's user {named.name} uses basic authentication, which the API "
            "server no longer accepts; give it a token, a client certificate or an exec plugin"
        )
    verification = ServerVerification(
        cluster_ca(cluster, named.cluster_dir or named.base_dir, named.name),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        server_name=str(cluster.get("tls-server-name") or "") or None,
    )
    certificate = user_certificate(user, named.base_dir, named.name)
    try:
        verify = client_context(verification, certificate)
    except ValueError as error:
        raise CredentialError(f"the kubeconfig's user {named.name}: {error}") from None
    tokens: TokenSource = StaticToken(str(user["token"]) if user.get("token") else None)
    if not user.get("token") and user.get("tokenFile"):
        tokens = FileToken(_relative(str(user["tokenFile"]), named.base_dir))
    if "auth-provider" in user:
        tokens = oidc_token(user["auth-provider"], named.base_dir, named.name)
    return Credentials(
        server=server.rstrip("/"),
        verify=verify,
        tokens=tokens,
        certificate=certificate,
        verification=verification,
    )


def user_certificate(
    user: Mapping[str, Any], base_dir: Path, name: str
) -> ClientCertificate | None:
    """A kubeconfig user's client certificate and key (``client-certificate-data`` and
    ``client-key-data``, base64 of PEM, or the files ``client-certificate`` and
    ``client-key``), or ``None``; errors name the user and the field, never the key."""
    parts = []
    for field in ("client-certificate", "client-key"):
        if data := user.get(f"{field}-data"):
            try:
                parts.append(base64.b64decode(str(data), validate=True).decode())
            except (binascii.Error, UnicodeDecodeError):
                raise CredentialError(
                    f"the kubeconfig's user {name} has {field}-data that is not base64 of a PEM"
                ) from None
        elif path := user.get(field):
            parts.append(_relative(str(path), base_dir).read_text())
    if not parts:
        return None
    if len(parts) != 2:
        raise CredentialError(
            f"the kubeconfig's user {name} has a client certificate or key without the other"
        )
    return ClientCertificate(parts[0], parts[1])


def _relative(path: str, base_dir: Path) -> Path:
    file = Path(path).expanduser()
    return file if file.is_absolute() else base_dir / file


def _exec_plugin_credentials(named: KubeconfigUser) -> Credentials:
    """A user that is an exec plugin, on the context's cluster."""
    cluster = named.cluster
    server = str(cluster.get("server") or "")
    if not server:
        raise CredentialError(f"the kubeconfig's cluster for user {named.name} names no server")
    ca_pem = cluster_ca(cluster, named.cluster_dir or named.base_dir, named.name)
    verification = ServerVerification(
        ca_pem,
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        server_name=str(cluster.get("tls-server-name") or "") or None,
    )
    plugin = ExecPlugin(
        named.user["exec"],
        cluster,
        user=named.name,
        base_dir=named.base_dir,
        ca_pem=ca_pem.encode() if ca_pem else None,
    )
    return Credentials(
        server=server.rstrip("/"),
        verify=client_context(verification, None),
        tokens=plugin,
        plugin=plugin,
        verification=verification,
    )


def cluster_ca(cluster: Mapping[str, Any], base_dir: Path, user: str) -> str | None:
    """The PEM of a kubeconfig cluster's CA (``certificate-authority-data``, or the file
    ``certificate-authority`` relative to the kubeconfig); ``None``: the system's."""
    if data := cluster.get("certificate-authority-data"):
        try:
            return base64.b64decode(str(data), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise CredentialError(
                f"the kubeconfig's cluster for user {user} has certificate-authority-data "
                "that is not base64 of a PEM"
            ) from None
    if path := cluster.get("certificate-authority"):
        return _relative(str(path), base_dir).read_text()
    return None
