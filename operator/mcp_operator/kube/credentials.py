"""Who the operator is to the API server: the server's address, its TLS, and the credentials.

Owns reading them once at start-up -- a Pod's service account, or the kubeconfig
(``KUBECONFIG``, the current context) -- into :class:`Credentials`, choosing the
source that renews each kind (:mod:`mcp_operator.kube.tokens`,
:mod:`mcp_operator.kube.exec_plugin`). Sending requests with them is
:mod:`mcp_operator.kube.client`'s job.
"""

from __future__ import annotations

import base64
import binascii
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_operator.kube.exec_plugin import ExecPlugin
from mcp_operator.kube.tls import ServerVerification, client_context
from mcp_operator.kube.tokens import (
    CredentialError,
    FileToken,
    KubeconfigUser,
    ReloadedToken,
    StaticToken,
    TokenSource,
    kubeconfig_user,
)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass
class Credentials:
    server: str
    verify: ssl.SSLContext | bool
    tokens: TokenSource
    in_cluster: bool = False
    cert: tuple[str, str] | None = None
    plugin: ExecPlugin | None = None
    """An exec plugin's credential (token, client certificate or both), renewed as it expires."""
    verification: ServerVerification | None = None
    """How to check the server when a renewed client certificate needs a new SSL context."""


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
        # Read without the kubernetes library, which would run the plugin itself (once more,
        # at start-up) and write a certificate it handed out to files of its own.
        return _exec_plugin_credentials(named)

    from kubernetes import client, config

    def load() -> client.Configuration:
        configuration = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)  # type: ignore[no-untyped-call]
        return configuration

    configuration = load()
    verify: ssl.SSLContext | bool = True
    if not configuration.verify_ssl:
        verify = False
    elif configuration.ssl_ca_cert:
        verify = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    cert = None
    if configuration.cert_file and configuration.key_file:
        cert = (configuration.cert_file, configuration.key_file)
        if isinstance(verify, ssl.SSLContext):
            verify.load_cert_chain(*cert)
        else:
            context = ssl.create_default_context()
            context.load_cert_chain(*cert)
            if verify is False:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            verify = context

    def bearer(configuration: client.Configuration) -> str | None:
        api_key = configuration.api_key
        token: str | None = api_key.get("authorization") or api_key.get("BearerToken")
        return token[len("Bearer ") :] if token and token.startswith("Bearer ") else token

    # Tokens that expire are renewed (kopf's own client does the same for its watches).
    tokens: TokenSource = StaticToken(bearer(configuration))
    if named is not None and "auth-provider" in named.user:
        tokens = ReloadedToken(lambda: bearer(load()), bearer(configuration))
    return Credentials(server=configuration.host, verify=verify, tokens=tokens, cert=cert)


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
        file = Path(str(path)).expanduser()
        return (file if file.is_absolute() else base_dir / file).read_text()
    return None
