"""Kubeconfig exec plugins (``client.authentication.k8s.io``): run, read, renew.

Owns a kubeconfig user that is an exec plugin (EKS ``aws eks get-token``, GKE
``gke-gcloud-auth-plugin``, AKS ``kubelogin``, any ``client.authentication.k8s.io``
plugin): the plugin is run with what the kubeconfig asks for (``args``, ``env``,
``KUBERNETES_EXEC_INFO`` with the cluster when ``provideClusterInfo`` is set, never
a terminal, which ``interactiveMode: Always`` refuses), its ``ExecCredential`` is
read -- a bearer token, or a client certificate and key, or both -- and the plugin
is run again shortly before the credential expires or when the API server answers
401 (as client-go does). Parsing is pure (the caller passes ``now`` for freshness);
running the plugin is the only I/O. What the credential is used for (the
``Authorization`` header, the TLS handshake) is :mod:`mcp_operator.kube.client`'s
and :mod:`mcp_operator.kube.tls`'s business. Keys and tokens never reach a log
line, an exception or a ``repr``.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_operator.kube.tls import ClientCertificate
from mcp_operator.kube.tokens import EXPIRY_SKEW, CredentialError, still_fresh, utc_now

logger = logging.getLogger(__name__)

EXEC_TIMEOUT_SECONDS = 60.0
EXEC_API_VERSIONS = (
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
)
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
CLUSTER_INFO_FIELDS = (
    "server",
    "tls-server-name",
    "insecure-skip-tls-verify",
    "certificate-authority-data",
    "proxy-url",
    "disable-compression",
)
"""The kubeconfig cluster's fields that client-go passes to a plugin (``provideClusterInfo``)."""
CLUSTER_CONFIG_EXTENSION = "client.authentication.k8s.io/exec"
"""A cluster extension of this name is passed to the plugin as ``cluster.config``."""


@dataclass(frozen=True)
class ExecCredential:
    """What a plugin printed: a token, a client certificate, or both; and when they expire
    (``None``: unknown)."""

    token: str | None
    certificate: ClientCertificate | None
    expires_at: datetime.datetime | None

    def __repr__(self) -> str:  # never show the token or the key
        token = "<hidden>" if self.token else None
        return (
            f"ExecCredential(token={token}, certificate={self.certificate!r}, "
            f"expires_at={self.expires_at!r})"
        )

    @property
    def kind(self) -> str:
        """What it holds, in words for log lines and errors."""
        if self.token and self.certificate:
            return "token and client certificate"
        return "client certificate" if self.certificate else "token"


def parse_exec_credential(
    text: str, command: str, api_version: str | None = None
) -> ExecCredential:
    """An ``ExecCredential`` (v1 or v1beta1) printed by ``command``; when ``api_version`` is
    given (the kubeconfig's), the plugin must answer in that version (as client-go checks)."""
    try:
        document = json.loads(text)
    except ValueError:
        raise CredentialError(f"exec plugin {command} printed no JSON") from None
    if not isinstance(document, dict) or document.get("kind") != "ExecCredential":
        raise CredentialError(f"exec plugin {command} printed no ExecCredential")
    printed = document.get("apiVersion")
    if printed not in EXEC_API_VERSIONS:
        raise CredentialError(
            f"exec plugin {command} printed apiVersion {printed!r}, "
            f"not one of {', '.join(EXEC_API_VERSIONS)}"
        )
    if api_version is not None and printed != api_version:
        raise CredentialError(
            f"exec plugin {command} printed apiVersion {printed}, but the kubeconfig asks "
            f"for {api_version}"
        )
    status = document.get("status")
    if not isinstance(status, dict):
        status = {}
    token = status.get("token") or None
    if token is not None and not isinstance(token, str):
        raise CredentialError(f"exec plugin {command} returned a status.token that is no string")
    certificate = _certificate(status, command)
    if token is None and certificate is None:
        raise CredentialError(
            f"exec plugin {command} returned neither status.token nor "
            "status.clientCertificateData with status.clientKeyData"
        )
    expires_at = None
    if stamp := status.get("expirationTimestamp"):
        try:
            expires_at = datetime.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
        except ValueError:
            raise CredentialError(
                f"exec plugin {command} returned an invalid expirationTimestamp {stamp!r}"
            ) from None
        if expires_at.tzinfo is None:
            expires_at = expires_at.replace(tzinfo=datetime.UTC)
    return ExecCredential(token, certificate, expires_at)


def _certificate(status: Mapping[str, Any], command: str) -> ClientCertificate | None:
    """The PEM pair of a status, checked for shape only (errors never quote the data)."""
    certificate, key = status.get("clientCertificateData"), status.get("clientKeyData")
    if not certificate and not key:
        return None
    if not certificate or not key:
        present, missing = (
            ("clientCertificateData", "clientKeyData")
            if certificate
            else ("clientKeyData", "clientCertificateData")
        )
        raise CredentialError(
            f"exec plugin {command} returned status.{present} without status.{missing}"
        )
    for field, value, marker in (
        ("clientCertificateData", certificate, "-----BEGIN CERTIFICATE-----"),
        ("clientKeyData", key, "PRIVATE KEY-----"),
    ):
        if not isinstance(value, str) or marker not in value:
            raise CredentialError(f"exec plugin {command} returned a status.{field} in no PEM")
    return ClientCertificate(certificate, key)


def exec_info(
    spec: Mapping[str, Any], cluster: Mapping[str, Any], ca_pem: bytes | None = None
) -> str:
    """``KUBERNETES_EXEC_INFO``: what the plugin is told about the call (never interactive:
    the operator has no terminal), and the cluster when ``provideClusterInfo`` asks for it.
    ``ca_pem`` is the cluster's CA when the kubeconfig names a file rather than data."""
    api_version = str(spec.get("apiVersion") or EXEC_API_VERSIONS[0])
    info: dict[str, Any] = {"interactive": False}
    if spec.get("provideClusterInfo"):
        given = {key: cluster[key] for key in CLUSTER_INFO_FIELDS if cluster.get(key) is not None}
        if "certificate-authority-data" not in given and ca_pem:
            given["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
        for extension in cluster.get("extensions") or ():
            if extension.get("name") == CLUSTER_CONFIG_EXTENSION:
                given["config"] = extension.get("extension")
        info["cluster"] = given
    return json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "spec": info})


def interactive_mode(spec: Mapping[str, Any], command: str) -> str:
    """The plugin's ``interactiveMode``, refused when it needs the terminal the operator
    never has (client-go fails the same way without one)."""
    mode = str(spec.get("interactiveMode") or "IfAvailable")
    if mode not in INTERACTIVE_MODES:
        raise CredentialError(
            f"exec plugin {command} has interactiveMode {mode!r}, not one of "
            f"{', '.join(INTERACTIVE_MODES)}"
        )
    if mode == "Always":
        raise CredentialError(
            f"exec plugin {command} has interactiveMode Always: it needs a terminal, which the "
            "operator never has; use a non-interactive login (a service principal, workload "
            "identity) or interactiveMode IfAvailable"
        )
    return mode


class ExecPlugin:
    """The credential of a kubeconfig exec plugin (a token, a client certificate or both),
    renewed before it expires and after a 401; ``user`` is the kubeconfig's name for it."""

    def __init__(
        self,
        spec: Mapping[str, Any],
        cluster: Mapping[str, Any],
        *,
        user: str = "",
        base_dir: Path | None = None,
        ca_pem: bytes | None = None,
        now: Callable[[], datetime.datetime] = utc_now,
    ) -> None:
        command = spec.get("command")
        if not isinstance(command, str) or not command:
            raise CredentialError(f"the exec plugin of kubeconfig user {user} names no command")
        if base_dir is not None and os.sep in command and not os.path.isabs(command):
            command = str(base_dir / command)  # relative to the kubeconfig, as kubectl does
        self.command = command
        self.user = user
        self.args = [str(arg) for arg in spec.get("args") or ()]
        self.env = {str(e["name"]): str(e["value"]) for e in spec.get("env") or ()}
        self.api_version = str(spec["apiVersion"]) if spec.get("apiVersion") else None
        self.install_hint = str(spec.get("installHint") or "").strip()
        interactive_mode(spec, command)
        self.info = exec_info(spec, cluster, ca_pem)
        self._now = now
        self._credential: ExecCredential | None = None
        self._lock = asyncio.Lock()
        self.runs = 0
        """How many times the plugin ran (tests and logs)."""

    def describe(self) -> str:
        """Which credential this is, for an error about it (no secret in it)."""
        credential = self._credential
        what = credential.kind if credential is not None else "credential"
        expiry = ""
        if credential is not None and credential.expires_at is not None:
            expiry = f", expiring {credential.expires_at.isoformat()}"
        return f"{what} of kubeconfig user {self.user} from exec plugin {self.command}{expiry}"

    async def credential(self) -> ExecCredential:
        """The current credential, from a new run of the plugin when it has expired."""
        credential = self._credential
        if credential is not None and still_fresh(credential.expires_at, self._now(), EXPIRY_SKEW):
            return credential
        async with self._lock:  # one run at a time, however many requests wait for it
            credential = self._credential
            if credential is None or not still_fresh(
                credential.expires_at, self._now(), EXPIRY_SKEW
            ):
                credential = self._credential = await self._run()
        return credential

    async def token(self) -> str | None:
        return (await self.credential()).token

    def cached(self) -> str | None:
        return self._credential.token if self._credential is not None else None

    def cached_certificate(self) -> ClientCertificate | None:
        """The client certificate as last obtained (:meth:`token` renews it)."""
        return self._credential.certificate if self._credential is not None else None

    def invalidate(self) -> bool:
        self._credential = None
        return True

    async def _run(self) -> ExecCredential:
        environment = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": self.info}
        try:
            process = await asyncio.create_subprocess_exec(
                self.command,
                *self.args,
                env=environment,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as error:
            hint = f" ({self.install_hint})" if self.install_hint else ""
            raise CredentialError(
                f"exec plugin {self.command} of kubeconfig user {self.user} could not start: "
                f"{error.strerror or error}{hint}"
            ) from None
        try:
            out, err = await asyncio.wait_for(process.communicate(), EXEC_TIMEOUT_SECONDS)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise CredentialError(
                f"exec plugin {self.command} of kubeconfig user {self.user} did not answer "
                f"within {EXEC_TIMEOUT_SECONDS:.0f} s"
            ) from None
        self.runs += 1
        if process.returncode != 0:
            last = err.decode(errors="replace").strip().splitlines()[-1:] or [""]
            raise CredentialError(
                f"exec plugin {self.command} of kubeconfig user {self.user} exited with code "
                f"{process.returncode}: {last[0]}"
            )
        credential = parse_exec_credential(
            out.decode(errors="replace"), self.command, self.api_version
        )
        logger.info(
            "Obtained a %s for kubeconfig user %s from exec plugin %s (expires %s)",
            credential.kind,
            self.user,
            self.command,
            credential.expires_at.isoformat() if credential.expires_at else "never",
        )
        return credential
