"""Bearer tokens for the API client, kept fresh: where each kind of credential comes from.

Owns every way the operator's identity becomes an ``Authorization`` header,
and when each is renewed:

- :class:`StaticToken`: a token written in the kubeconfig; never changes;
- :class:`FileToken`: a Pod's projected service-account token, which the kubelet
  rotates: re-read now and then;
- an exec plugin (EKS ``aws eks get-token``, ...): :mod:`mcp_operator.kube.exec_plugin`;
- :class:`ReloadedToken`: a kubeconfig ``auth-provider`` (OIDC): the kubeconfig
  is loaded again by the kubernetes library, which refreshes an expired ID
  token with its refresh token, when the token's own ``exp`` has passed or on 401.

Deciding freshness is pure (the caller passes ``now``); file reads and loading the
kubeconfig again are the only I/O. Where the
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
        now: Callable[[], datetime.datetime] = utc_now,
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
