"""Bearer tokens for the API client, kept fresh: where each kind of credential comes from.

Owns every way the operator's identity becomes an ``Authorization`` header,
and when each is renewed:

- :class:`StaticToken`: a token written in the kubeconfig; never changes;
- :class:`FileToken`: a Pod's projected service-account token, which the kubelet
  rotates: re-read now and then;
- :class:`ExecToken`: a kubeconfig user that is an exec plugin (EKS
  ``aws eks get-token``, GKE ``gke-gcloud-auth-plugin``, AKS ``kubelogin``, any
  ``client.authentication.k8s.io`` plugin): the plugin is run, its
  ``ExecCredential`` read, and run again shortly before the token expires or
  when the API server answers 401 (as client-go does);
- :class:`ReloadedToken`: a kubeconfig ``auth-provider`` (OIDC): the kubeconfig
  is loaded again by the kubernetes library, which refreshes an expired ID
  token with its refresh token, when the token's own ``exp`` has passed or on 401.

Parsing an ``ExecCredential`` and deciding freshness are pure (the caller passes
``now``); running the plugin is the only I/O besides file reads. Where the
tokens go (headers, retries) is :mod:`mcp_operator.kube.client`'s business.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

logger = logging.getLogger(__name__)

TOKEN_REREAD_SECONDS = 60.0
EXPIRY_SKEW = datetime.timedelta(seconds=30)
"""Renew this long before a token's stated expiry, so that no request carries a dead one."""
EXEC_TIMEOUT_SECONDS = 60.0
EXEC_API_VERSIONS = (
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
)


class CredentialError(RuntimeError):
    """A credential could not be obtained (the message says from where, never a secret)."""


class TokenSource(Protocol):
    async def token(self) -> str | None:
        """The current token, renewed first when it has expired."""
        ...

    def cached(self) -> str | None:
        """The token as last obtained, without renewing (for synchronous callers)."""
        ...

    def invalidate(self) -> bool:
        """The API server refused the token (401): drop it. True when the next
        :meth:`token` gets a new one, so that retrying the request makes sense."""
        ...


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class StaticToken:
    def __init__(self, token: str | None) -> None:
        self._token = token

    async def token(self) -> str | None:
        return self._token

    def cached(self) -> str | None:
        return self._token

    def invalidate(self) -> bool:
        return False


class FileToken:
    """A token file the kubelet rotates (projected service-account token)."""

    def __init__(self, path: Path, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._monotonic = monotonic
        self._token: str | None = None
        self._read_at = 0.0

    async def token(self) -> str | None:
        return self.cached()

    def cached(self) -> str | None:
        if self._token is None or self._monotonic() - self._read_at > TOKEN_REREAD_SECONDS:
            self._token = self.path.read_text().strip()
            self._read_at = self._monotonic()
        return self._token

    def invalidate(self) -> bool:
        self._token = None  # the kubelet may have rotated it since
        return True


# -- exec plugins -------------------------------------------------------------------------


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


def still_fresh(
    expires_at: datetime.datetime | None, now: datetime.datetime, skew: datetime.timedelta
) -> bool:
    """Whether a token that expires at ``expires_at`` may still be sent at ``now``."""
    return expires_at is None or now + skew < expires_at


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
        now: Callable[[], datetime.datetime] = _utc_now,
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


# -- auth-provider (OIDC) -----------------------------------------------------------------


def jwt_expiry(token: str) -> datetime.datetime | None:
    """The ``exp`` claim of a JWT (``None``: not a JWT, or no ``exp``)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        padded = parts[1] + "=" * (-len(parts[1]) % 4)
        claims = json.loads(base64.urlsafe_b64decode(padded))
        return datetime.datetime.fromtimestamp(int(claims["exp"]), datetime.UTC)
    except (ValueError, KeyError, TypeError):
        return None


class ReloadedToken:
    """A token that loading the kubeconfig again renews (an ``auth-provider`` such as OIDC,
    which the kubernetes library refreshes with its refresh token when loading)."""

    def __init__(
        self,
        load: Callable[[], str | None],
        token: str | None,
        *,
        now: Callable[[], datetime.datetime] = _utc_now,
    ) -> None:
        self._load = load
        self._token = token
        self._now = now
        self._lock = asyncio.Lock()

    async def token(self) -> str | None:
        if self._token is not None and still_fresh(
            jwt_expiry(self._token), self._now(), EXPIRY_SKEW
        ):
            return self._token
        async with self._lock:
            if self._token is None or not still_fresh(
                jwt_expiry(self._token), self._now(), EXPIRY_SKEW
            ):
                self._token = await asyncio.to_thread(self._load)
        return self._token

    def cached(self) -> str | None:
        return self._token

    def invalidate(self) -> bool:
        self._token = None
        return True


# -- which user the kubeconfig names --------------------------------------------------------


@dataclass(frozen=True)
class KubeconfigUser:
    """The current context's user and cluster entries, and the directory of the file that
    named the user (relative plugin paths are resolved against it)."""

    user: Mapping[str, Any]
    cluster: Mapping[str, Any]
    base_dir: Path


def kubeconfig_user(paths: str) -> KubeconfigUser | None:
    """The current context's user of the kubeconfig files in ``paths`` (``:``-separated),
    merged by kubectl's rule: the first file that sets a name or the current context wins."""
    users: dict[str, tuple[Mapping[str, Any], Path]] = {}
    clusters: dict[str, Mapping[str, Any]] = {}
    contexts: dict[str, Mapping[str, Any]] = {}
    current = None
    import yaml

    for entry in paths.split(os.pathsep):
        path = Path(entry).expanduser()
        if not entry or not path.is_file():
            continue
        document = yaml.safe_load(path.read_text()) or {}
        current = current or document.get("current-context")
        for item in document.get("users") or ():
            users.setdefault(item.get("name"), (item.get("user") or {}, path.parent))
        for item in document.get("clusters") or ():
            clusters.setdefault(item.get("name"), item.get("cluster") or {})
        for item in document.get("contexts") or ():
            contexts.setdefault(item.get("name"), item.get("context") or {})
    context = contexts.get(current or "")
    if context is None or context.get("user") not in users:
        return None
    user, base_dir = users[context["user"]]
    return KubeconfigUser(user, clusters.get(str(context.get("cluster")), {}), base_dir)
