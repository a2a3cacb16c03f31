"""Kubeconfig exec plugins (``client.authentication.k8s.io``): run, read, renew.

Owns a kubeconfig user that is an exec plugin (EKS ``aws eks get-token``, GKE
``gke-gcloud-auth-plugin``, AKS ``kubelogin``, any ``client.authentication.k8s.io``
plugin): the plugin is run, its ``ExecCredential`` read, and run again shortly
before the credential expires or when the API server answers 401 (as client-go
does). Parsing is pure (the caller passes ``now`` for freshness); running the
plugin is the only I/O. What the credential is used for (headers, TLS) is
:mod:`mcp_operator.kube.client`'s business.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_operator.kube.tokens import EXPIRY_SKEW, CredentialError, still_fresh, utc_now

logger = logging.getLogger(__name__)

EXEC_TIMEOUT_SECONDS = 60.0
EXEC_API_VERSIONS = (
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
)


@dataclass(frozen=True)
class ExecCredential:
    """What a plugin printed: the token and when it expires (``None``: unknown)."""

    token: str
    expires_at: datetime.datetime | None

    def __repr__(self) -> str:  # never show the token
        return f"ExecCredential(token=<hidden>, expires_at={self.expires_at!r})"


def parse_exec_credential(text: str, command: str) -> ExecCredential:
    """An ``ExecCredential`` (v1 or v1beta1) printed by ``command``."""
    try:
        document = json.loads(text)
    except ValueError:
        raise CredentialError(f"exec plugin {command} printed no JSON") from None
    if not isinstance(document, dict) or document.get("kind") != "ExecCredential":
        raise CredentialError(f"exec plugin {command} printed no ExecCredential")
    if document.get("apiVersion") not in EXEC_API_VERSIONS:
        raise CredentialError(
            f"exec plugin {command} printed apiVersion {document.get('apiVersion')!r}, "
            f"not one of {', '.join(EXEC_API_VERSIONS)}"
        )
    status = document.get("status") or {}
    token = status.get("token")
    if not isinstance(token, str) or not token:
        # Client certificates from a plugin are not supported; every managed cloud's
        # plugin hands out a token.
        raise CredentialError(f"exec plugin {command} returned no status.token")
    expires_at = None
    if stamp := status.get("expirationTimestamp"):
        try:
            expires_at = datetime.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
        except ValueError:
            raise CredentialError(
                f"exec plugin {command} returned an invalid expirationTimestamp {stamp!r}"
            ) from None
    return ExecCredential(token, expires_at)


def exec_info(spec: Mapping[str, Any], cluster: Mapping[str, Any]) -> str:
    """``KUBERNETES_EXEC_INFO``: what the plugin is told about the call (and the cluster, when
    ``provideClusterInfo`` asks for it)."""
    api_version = str(spec.get("apiVersion") or EXEC_API_VERSIONS[0])
    info: dict[str, Any] = {"interactive": False}
    if spec.get("provideClusterInfo"):
        info["cluster"] = {
            key: value
            for key, value in {
                "server": cluster.get("server"),
                "certificate-authority-data": cluster.get("certificate-authority-data"),
                "insecure-skip-tls-verify": cluster.get("insecure-skip-tls-verify"),
                "tls-server-name": cluster.get("tls-server-name"),
            }.items()
            if value is not None
        }
    return json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "spec": info})


class ExecToken:
    """A token from a kubeconfig exec plugin, renewed before it expires and after a 401."""

    def __init__(
        self,
        spec: Mapping[str, Any],
        cluster: Mapping[str, Any],
        *,
        base_dir: Path | None = None,
        now: Callable[[], datetime.datetime] = utc_now,
    ) -> None:
        command = spec.get("command")
        if not isinstance(command, str) or not command:
            raise CredentialError("the kubeconfig's exec plugin names no command")
        if base_dir is not None and os.sep in command and not os.path.isabs(command):
            command = str(base_dir / command)  # relative to the kubeconfig, as kubectl does
        self.command = command
        self.args = [str(arg) for arg in spec.get("args") or ()]
        self.env = {str(e["name"]): str(e["value"]) for e in spec.get("env") or ()}
        self.info = exec_info(spec, cluster)
        self._now = now
        self._credential: ExecCredential | None = None
        self._lock = asyncio.Lock()
        self.runs = 0
        """How many times the plugin ran (tests and logs)."""

    async def token(self) -> str | None:
        credential = self._credential
        if credential is not None and still_fresh(credential.expires_at, self._now(), EXPIRY_SKEW):
            return credential.token
        async with self._lock:  # one run at a time, however many requests wait for it
            credential = self._credential
            if credential is None or not still_fresh(
                credential.expires_at, self._now(), EXPIRY_SKEW
            ):
                credential = self._credential = await self._run()
        return credential.token

    def cached(self) -> str | None:
        return self._credential.token if self._credential is not None else None

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
            raise CredentialError(f"exec plugin {self.command} could not start: {error}") from None
        try:
            out, err = await asyncio.wait_for(process.communicate(), EXEC_TIMEOUT_SECONDS)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise CredentialError(
                f"exec plugin {self.command} did not answer within {EXEC_TIMEOUT_SECONDS:.0f} s"
            ) from None
        self.runs += 1
        if process.returncode != 0:
            last = err.decode(errors="replace").strip().splitlines()[-1:] or [""]
            raise CredentialError(
                f"exec plugin {self.command} exited with code {process.returncode}: {last[0]}"
            )
        credential = parse_exec_credential(out.decode(errors="replace"), self.command)
        logger.info(
            "Obtained a token from exec plugin %s (expires %s)",
            self.command,
            credential.expires_at.isoformat() if credential.expires_at else "never",
        )
        return credential
