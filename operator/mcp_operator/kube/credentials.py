"""Who the operator is to the API server, as the ``kubernetes`` package resolves it.

Owns asking the kept client -- the ``kubernetes`` package's in-cluster loader (a Pod's
service account) or its kubeconfig loader (``KUBECONFIG``, merged by kubectl's rules:
tokens, ``tokenFile``, client certificates, exec plugins, OIDC ``auth-provider`` refresh,
``proxy-url``, ``tls-server-name``) -- and holding its answer as one :class:`Credential`:
server, CA, token, client certificate, and when it expires. :class:`Credentials` asks the
client again when that time is 30 s away or the API server answered 401, one load at a time;
:mod:`mcp_operator.kube.client` sends requests with it and ``controller.handlers`` hands the
same credential to kopf's watches (kopf's ``login_via_client`` reads the same loader), so both
clients of the API server are one identity. docs/architecture.md ("The API server's
credentials: which client") says why this client and what it lacks.

Where the library falls short, this module does the rest, each said where it is done: loads run
in a thread with a time limit, and a plugin that outlives it is stopped (the library runs
plugins synchronously, without one);
``interactiveMode: Always`` and an OIDC issuer without a CA are refused before the library sees
them; the PEM files it writes live in a private directory only while one load reads them back.
Tokens and keys never reach a log line, an exception or a ``repr``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import jwt
from cryptography import x509
from kubernetes import client as kubernetes_client
from kubernetes.config import ConfigException, incluster_config, kube_config

from mcp_operator.kube import exec_plugins
from mcp_operator.kube.tls import ClientCertificate, ServerVerification

logger = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
EXPIRY_SKEW = datetime.timedelta(seconds=30)
"""Ask again this long before a credential's stated expiry, so that no request carries a dead
one (the library's own margin is 5 minutes and renews tokens only)."""
SERVICE_ACCOUNT_REREAD = datetime.timedelta(seconds=60)
"""How long a Pod's token is used before it is read again: the kubelet rotates the file."""
LOAD_TIMEOUT_SECONDS = 60.0
"""How long a caller waits for one load (an exec plugin, an OIDC refresh): the library sets no
limit. A plugin that outlives it is stopped (:mod:`mcp_operator.kube.exec_plugins`) and the
caller gets an error."""

_ONE_LOAD = threading.Lock()
"""The library keeps the files it writes in one process-wide table, cleared after each load
(below): two loads at once would remove each other's files."""


class CredentialError(RuntimeError):
    """A credential could not be obtained (the message says from where, never a secret)."""


Loaded = TypeVar("Loaded")


async def in_time(load: Callable[[], Loaded], whose: str) -> Loaded:
    """``load()`` in a thread, given up after :data:`LOAD_TIMEOUT_SECONDS`; an exec plugin it
    started is then stopped, so that its thread ends and the next load is not held behind it."""
    before = exec_plugins.children()
    try:
        return await asyncio.wait_for(asyncio.to_thread(load), LOAD_TIMEOUT_SECONDS)
    except TimeoutError:
        exec_plugins.stop_since(before)
        raise CredentialError(
            f"the credential of {whose} did not come within {LOAD_TIMEOUT_SECONDS:.0f} s "
            "(an exec plugin or an OIDC issuer that hangs)"
        ) from None


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def jwt_claims(token: str) -> dict[str, Any]:
    """A JWT's claims, unverified (PyJWT reads them; ``{}``: not a JWT).

    Only for what the holder of a token may read in it (when it expires, whose it is): the
    API server, not this client, decides whether the token is good."""
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.InvalidTokenError:
        return {}
    return claims if isinstance(claims, dict) else {}


def jwt_expiry(token: str) -> datetime.datetime | None:
    """The ``exp`` claim of a JWT (``None``: not a JWT, or no ``exp``)."""
    try:
        return datetime.datetime.fromtimestamp(int(jwt_claims(token)["exp"]), datetime.UTC)
    except (ValueError, KeyError, TypeError, OverflowError, OSError):
        return None


@dataclass(frozen=True)
class Credential:
    """The operator's identity as the client resolved it once; the ``repr`` never shows the
    token or the key."""

    server: str
    ca_pem: str | None = None
    insecure: bool = False
    server_name: str | None = None
    """The kubeconfig's ``tls-server-name``: checked and sent as SNI instead of the URL's host."""
    proxy: str | None = None
    """The kubeconfig's ``proxy-url`` (the environment's proxies are httpx's to read)."""
    token: str | None = None
    certificate: ClientCertificate | None = None
    expires_at: datetime.datetime | None = None
    """When to ask the client again (``None``: only after a 401)."""
    user: str = "service account"
    """Whose credential it is, for log lines and errors: the kubeconfig's user name."""
    from_plugin: bool = False
    in_cluster: bool = False

    def __repr__(self) -> str:
        token = "<hidden>" if self.token else None
        return f"Credential(server={self.server!r}, user={self.user!r}, token={token}, " + (
            f"certificate={self.certificate!r}, expires_at={self.expires_at!r})"
        )

    @property
    def verification(self) -> ServerVerification:
        return ServerVerification(self.ca_pem, self.insecure, self.server_name)

    def describe(self) -> str:
        """Which credential this is, for an error about it (no secret in it)."""
        if self.token and self.certificate:
            what = "token and client certificate"
        else:
            what = "client certificate" if self.certificate else "token"
        who = f"kubeconfig user {self.user}" if not self.in_cluster else self.user
        source = " from its exec plugin" if self.from_plugin else ""
        expiry = f", expiring {self.expires_at.isoformat()}" if self.expires_at else ""
        return f"{what} of {who}{source}{expiry}"


class Credentials:
    """The current :class:`Credential`, asked of ``resolve`` again when it is about to expire
    or was refused; a credential just obtained is used once as it is (asking again at once
    would get the same answer: the API server decides, and its 401 renews it once)."""

    def __init__(
        self,
        credential: Credential,
        resolve: Callable[[], Credential] | None = None,
        *,
        reread: datetime.timedelta | None = None,
        now: Callable[[], datetime.datetime] = utc_now,
    ) -> None:
        self._credential = credential
        self._resolve = resolve
        self._reread = reread
        """Ask again after this long even before expiry (a token file the kubelet rotates)."""
        self._now = now
        self._obtained_at = now()
        self._unused = True
        self._lock = asyncio.Lock()
        self.loads = 1
        """How many times the client was asked (tests and logs)."""

    @property
    def server(self) -> str:
        return self._credential.server

    @property
    def in_cluster(self) -> bool:
        return self._credential.in_cluster

    def cached(self) -> Credential:
        """The credential as last obtained, without asking again (for synchronous callers)."""
        return self._credential

    async def current(self) -> Credential:
        """The credential to send now: asked of the client again first when it has expired."""
        credential, now = self._credential, self._now()
        expires_at = credential.expires_at
        expiring = expires_at is not None and now + EXPIRY_SKEW >= expires_at
        due = self._reread is not None and now - self._obtained_at >= self._reread
        if self._unused or not (expiring or due):
            self._unused = False
            return credential
        return await self.renew(credential)

    async def renew(self, refused: Credential | None = None) -> Credential:
        """Ask the client again (``refused``: the credential that expired or got a 401; a
        request that waited while another renewed it gets that one without a second load)."""
        if self._resolve is None:
            return self._credential
        async with self._lock:
            if refused is not None and self._credential is not refused:
                return self._credential
            credential = await in_time(self._resolve, self._credential.user)
            self._credential, self._unused = credential, True
            self._obtained_at = self._now()
            self.loads += 1
        return credential


def load_credentials(
    kubeconfig: str | None, *, now: Callable[[], datetime.datetime] = utc_now
) -> Credentials:
    """In-cluster credentials when running in a Pod (and no kubeconfig is named), else the
    kubeconfig's current context (``KUBECONFIG``, else ``~/.kube/config``); loaded once now."""
    token_file = SERVICE_ACCOUNT_DIR / "token"
    if kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ and token_file.exists():
        return Credentials(
            service_account(), service_account, reread=SERVICE_ACCOUNT_REREAD, now=now
        )
    paths = kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    merged = kube_config.KubeConfigMerger(paths)  # type: ignore[no-untyped-call]
    if merged.config is None:
        raise CredentialError(
            f"no kubeconfig in {paths} names a current context with a user "
            "(and the operator runs outside a Pod)"
        )

    def resolve() -> Credential:
        # The same merged document each time: an OIDC refresh writes the new tokens into it.
        return from_kubeconfig(merged.config, paths)

    return Credentials(resolve(), resolve, now=now)


def service_account() -> Credential:
    """A Pod's service account, read by the library's in-cluster loader."""
    loader = incluster_config.InClusterConfigLoader(  # type: ignore[no-untyped-call]
        token_filename=str(SERVICE_ACCOUNT_DIR / "token"),
        cert_filename=str(SERVICE_ACCOUNT_DIR / "ca.crt"),
        try_refresh_token=False,  # read again by Credentials, off the event loop
    )
    configuration = kubernetes_client.Configuration()
    try:
        loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
    except ConfigException as error:
        raise CredentialError(f"the Pod's service account: {error}") from None
    return _credential(configuration, user="service account", in_cluster=True)


def from_kubeconfig(document: Any, paths: str) -> Credential:
    """One load of the current context of a merged kubeconfig (``KubeConfigMerger.config``)."""
    with _ONE_LOAD, tempfile.TemporaryDirectory(prefix="mcp-operator-kubeconfig-") as private:
        try:
            # config_base_path=None: relative paths are relative to the file that named them.
            loader = kube_config.KubeConfigLoader(  # type: ignore[no-untyped-call]
                config_dict=document, config_base_path=None, temp_file_path=private
            )
            name = str(loader.current_context["context"].get("user") or "")
            user = _user_entry(document.value, name)
            if user is None:
                raise CredentialError(
                    f"no kubeconfig in {paths} names a current context with a user "
                    "(and the operator runs outside a Pod)"
                )
            _refuse(user, name)
            configuration = kubernetes_client.Configuration()
            loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
            credential = _credential(configuration, user=name, from_plugin="exec" in user)
        except ConfigException as error:
            raise CredentialError(f"the kubeconfig in {paths}: {error}") from None
        except CredentialError:
            raise
        except Exception as error:
            # A file it names is missing, an OIDC issuer did not answer: the library's own
            # messages may quote what it was sending, so only the kind of failure is told.
            raise CredentialError(
                f"the kubeconfig in {paths} gave no credential: {type(error).__name__}"
            ) from None
        finally:
            # The library caches the PEMs it wrote, keyed by their content, until exit.
            kube_config._cleanup_temp_files()  # type: ignore[no-untyped-call]
    if "exec" in user and not (credential.token or credential.certificate):
        raise CredentialError(
            f"the exec plugin of kubeconfig user {name} gave no credential "
            "(its error is logged above)"
        )
    expiry = [getattr(loader, "expiry", None), credential.expires_at]
    known = [stamp for stamp in expiry if isinstance(stamp, datetime.datetime)]
    credential = _replace_expiry(credential, min(known) if known else None)
    if credential.from_plugin:
        logger.info(
            "Obtained a %s for kubeconfig user %s from its exec plugin (expires %s)",
            "client certificate" if credential.certificate else "token",
            name,
            credential.expires_at.isoformat() if credential.expires_at else "never",
        )
    return credential


def _user_entry(document: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    for node in document.get("users") or ():
        item = getattr(node, "value", node)  # the merger keeps each file's items as nodes
        if item.get("name") == name:
            entry = item.get("user") or {}
            return entry if isinstance(entry, Mapping) else None
    return None


def _refuse(user: Mapping[str, Any], name: str) -> None:
    """What the library would do wrongly for an operator: refused before it runs."""
    if user.get("username") or user.get("password"):
        raise CredentialError(
            f"the kubeconfig's user {name} uses basic authentication, which the API "
            "server no longer accepts; give it a token, a client certificate or an exec plugin"
        )
    plugin = user.get("exec") or {}
    if plugin.get("interactiveMode") == "Always":
        # The library ignores interactiveMode; the operator never has a terminal.
        raise CredentialError(
            f"the exec plugin of kubeconfig user {name} has interactiveMode Always: it needs a "
            "terminal, which the operator never has; use a non-interactive login (a service "
            "principal, workload identity) or interactiveMode IfAvailable"
        )
    provider = user.get("auth-provider") or {}
    if provider and provider.get("name") != "oidc":
        raise CredentialError(
            f"the kubeconfig's user {name} uses auth-provider {provider.get('name')!r}; only "
            "oidc is supported (the others are exec plugins now, such as "
            "gke-gcloud-auth-plugin and kubelogin)"
        )
    config = provider.get("config") or {}
    if provider and not (
        config.get("idp-certificate-authority-data") or config.get("idp-certificate-authority")
    ):
        # Without one the library refreshes the ID token without verifying the issuer's TLS.
        raise CredentialError(
            f"the kubeconfig's user {name} uses auth-provider oidc without "
            "idp-certificate-authority(-data), so its refresh would not verify the issuer; "
            "add the issuer's CA or use an exec plugin such as kubelogin"
        )


def _credential(
    configuration: Any, *, user: str, in_cluster: bool = False, from_plugin: bool = False
) -> Credential:
    """What the library put into its ``Configuration``, read back into memory (the files it
    names are temporary or the kubeconfig's own)."""
    header = str(configuration.api_key.get("BearerToken") or "")
    scheme, _, token = header.partition(" ")
    if scheme and not token:
        scheme, token = "bearer", scheme
    certificate = None
    if configuration.cert_file and configuration.key_file:
        certificate = ClientCertificate(
            Path(configuration.cert_file).read_text(), Path(configuration.key_file).read_text()
        )
    expires_at = jwt_expiry(token) if token else None
    if certificate is not None:
        not_after = _not_after(certificate)
        expires_at = min(filter(None, (expires_at, not_after)), default=None)
    return Credential(
        server=str(configuration.host).rstrip("/"),
        ca_pem=Path(configuration.ssl_ca_cert).read_text() if configuration.ssl_ca_cert else None,
        insecure=not configuration.verify_ssl,
        server_name=configuration.tls_server_name or None,
        proxy=configuration.proxy or None,
        token=token or None,
        certificate=certificate,
        expires_at=expires_at,
        user=user,
        from_plugin=from_plugin,
        in_cluster=in_cluster,
    )


def _not_after(certificate: ClientCertificate) -> datetime.datetime | None:
    try:
        return x509.load_pem_x509_certificate(
            certificate.certificate_pem.encode()
        ).not_valid_after_utc
    except ValueError:
        return None  # the TLS handshake will say what is wrong with it


def _replace_expiry(credential: Credential, expires_at: datetime.datetime | None) -> Credential:
    return dataclasses.replace(credential, expires_at=expires_at)
