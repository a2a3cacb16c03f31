"""Bearer tokens for the API client, kept fresh: where each kind of credential comes from.

Owns every way the operator's identity becomes an ``Authorization`` header,
and when each is renewed:

- :class:`StaticToken`: a token written in the kubeconfig; never changes;
- :class:`FileToken`: a Pod's projected service-account token, which the kubelet
  rotates: re-read now and then;
- an exec plugin (EKS ``aws eks get-token``, ...): :mod:`mcp_operator.kube.exec_plugin`;
- :class:`OidcToken`: a kubeconfig ``auth-provider`` (OIDC): its ID token, refreshed
  with its refresh token at the issuer's token endpoint (OpenID Connect discovery)
  when the token's own ``exp`` has passed or on 401, as client-go's OIDC provider
  does (the refreshed tokens are kept in memory; the kubeconfig file is not written).

Deciding freshness is pure (the caller passes ``now``); file reads and the OIDC
refresh are the only I/O. Where the
tokens go (headers, retries) is :mod:`mcp_operator.kube.client`'s business.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import logging
import os
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx
import jwt

logger = logging.getLogger(__name__)

TOKEN_REREAD_SECONDS = 60.0
EXPIRY_SKEW = datetime.timedelta(seconds=30)
"""Renew this long before a token's stated expiry, so that no request carries a dead one."""


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


def utc_now() -> datetime.datetime:
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


def still_fresh(
    expires_at: datetime.datetime | None, now: datetime.datetime, skew: datetime.timedelta
) -> bool:
    """Whether a credential that expires at ``expires_at`` may still be sent at ``now``."""
    return expires_at is None or now + skew < expires_at


# -- auth-provider (OIDC) -----------------------------------------------------------------


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


OIDC_TIMEOUT_SECONDS = 10.0


class OidcToken:
    """An ``auth-provider`` named ``oidc``: its ID token, refreshed when it has expired."""

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        user: str,
        ca_pem: str | None,
        now: Callable[[], datetime.datetime] = utc_now,
    ) -> None:
        self._id_token: str | None = str(config.get("id-token") or "") or None
        self._refresh_token = str(config.get("refresh-token") or "") or None
        self._client_id = str(config.get("client-id") or "")
        self._client_secret = str(config.get("client-secret") or "")
        self._issuer = str(config.get("idp-issuer-url") or "").rstrip("/")
        self._user = user
        self._ca_pem = ca_pem
        self._now = now
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:  # never show a token or the client secret
        return f"OidcToken(user={self._user!r}, issuer={self._issuer!r})"

    async def token(self) -> str | None:
        if self._fresh():
            return self._id_token
        async with self._lock:
            if not self._fresh():
                await self._refresh()
        return self._id_token

    def cached(self) -> str | None:
        return self._id_token

    def invalidate(self) -> bool:
        if self._refresh_token is None:
            return False
        self._id_token = None
        return True

    def _fresh(self) -> bool:
        return self._id_token is not None and still_fresh(
            jwt_expiry(self._id_token), self._now(), EXPIRY_SKEW
        )

    async def _refresh(self) -> None:
        where = f"the OIDC issuer {self._issuer or '(none)'} of kubeconfig user {self._user}"
        if self._refresh_token is None or not self._issuer:
            raise CredentialError(
                f"the ID token of kubeconfig user {self._user} has expired and the "
                "auth-provider has no refresh-token and idp-issuer-url to renew it"
            )
        verify = ssl.create_default_context(cadata=self._ca_pem)
        try:
            async with httpx.AsyncClient(verify=verify, timeout=OIDC_TIMEOUT_SECONDS) as client:
                discovery = await client.get(f"{self._issuer}/.well-known/openid-configuration")
                discovery.raise_for_status()
                endpoint = str(discovery.json()["token_endpoint"])
                answer = await client.post(
                    endpoint,
                    data={
                        "grant_type": "refresh_token",
                        "refresh_token": self._refresh_token,
                        "client_id": self._client_id,
                        "client_secret": self._client_secret,
                    },
                )
                answer.raise_for_status()
                tokens = answer.json()
                id_token = str(tokens["id_token"])
        except httpx.HTTPStatusError as error:
            raise CredentialError(
                f"refreshing the ID token at {where} failed: HTTP {error.response.status_code}"
            ) from None
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as error:
            raise CredentialError(
                f"refreshing the ID token at {where} failed: {type(error).__name__}"
            ) from None
        self._id_token = id_token
        self._refresh_token = str(tokens.get("refresh_token") or self._refresh_token)
        logger.info("Refreshed the ID token of kubeconfig user %s at %s", self._user, self._issuer)


def oidc_token(provider: Mapping[str, Any], base_dir: Path, user: str) -> OidcToken:
    """The token source of a kubeconfig ``auth-provider`` (only ``oidc``: client-go
    dropped the others, whose clusters now use exec plugins)."""
    name = provider.get("name")
    if name != "oidc":
        raise CredentialError(
            f"the kubeconfig's user {user} uses auth-provider {name!r}; only oidc is "
            "supported (the others are exec plugins now, such as gke-gcloud-auth-plugin "
            "and kubelogin)"
        )
    config: Mapping[str, Any] = provider.get("config") or {}
    ca_pem: str | None = None
    if data := config.get("idp-certificate-authority-data"):
        try:
            ca_pem = base64.b64decode(str(data), validate=True).decode()
        except (ValueError, UnicodeDecodeError):
            raise CredentialError(
                f"the kubeconfig's user {user} has idp-certificate-authority-data that is "
                "not base64 of a PEM"
            ) from None
    elif path := config.get("idp-certificate-authority"):
        file = Path(str(path)).expanduser()
        ca_pem = (file if file.is_absolute() else base_dir / file).read_text()
    return OidcToken(config, user=user, ca_pem=ca_pem)


# -- which user the kubeconfig names --------------------------------------------------------


@dataclass(frozen=True)
class KubeconfigUser:
    """The current context's user (its name and entry) and cluster entry, and the
    directories of the files that named them (relative paths are resolved against them)."""

    user: Mapping[str, Any]
    cluster: Mapping[str, Any]
    base_dir: Path
    name: str = ""
    cluster_dir: Path | None = None


def kubeconfig_user(paths: str) -> KubeconfigUser | None:
    """The current context's user of the kubeconfig files in ``paths`` (``:``-separated),
    merged by kubectl's rule: the first file that sets a name or the current context wins."""
    users: dict[str, tuple[Mapping[str, Any], Path]] = {}
    clusters: dict[str, tuple[Mapping[str, Any], Path]] = {}
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
            clusters.setdefault(item.get("name"), (item.get("cluster") or {}, path.parent))
        for item in document.get("contexts") or ():
            contexts.setdefault(item.get("name"), item.get("context") or {})
    context = contexts.get(current or "")
    if context is None or context.get("user") not in users:
        return None
    user, base_dir = users[context["user"]]
    cluster, cluster_dir = clusters.get(str(context.get("cluster")), ({}, None))
    return KubeconfigUser(user, cluster, base_dir, str(context["user"]), cluster_dir)
