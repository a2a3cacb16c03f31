"""The operator's identity on the data path: its own audience-bound tokens, and the cluster's
ServiceAccount issuer that managed servers verify every caller's token against.

- :class:`OwnTokens`: tokens of the operator's own ServiceAccount (and only that one: the
  RBAC rule that allows ``create serviceaccounts/token`` names it by ``resourceNames``), one
  per audience, from the TokenRequest API, kept until shortly before they expire. The probe
  presents them to managed servers (audience
  :func:`~mcp_operator.api.access.token_audience`).
- :class:`IssuerKeys`: the issuer URL and JSON Web Key Set the API server publishes
  (``/.well-known/openid-configuration`` and ``/openid/v1/jwks``), cached and fetched again
  every ``refresh_seconds`` (the operator writes them into each managed server's access
  ConfigMap, so a rotated signing key reaches the servers on the next reconcile).
- :func:`own_identity`: which ServiceAccount the operator is, from ``--identity`` or from its
  in-cluster token's subject.

Tokens are never logged and never part of a message.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mcp_operator.kube.credentials import CredentialError, jwt_claims, jwt_expiry, utc_now

logger = logging.getLogger(__name__)

TOKEN_SECONDS = 600
"""Lifetime asked for the operator's own tokens (the API server's minimum)."""
RENEW_BEFORE = datetime.timedelta(seconds=120)
"""A cached token is replaced this long before it expires."""
ISSUER_REFRESH_SECONDS = 300.0
"""The issuer's keys are fetched again at least this often."""
IN_CLUSTER_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


class Requester(Protocol):
    """What :class:`OwnTokens` and :class:`IssuerKeys` need of the API client."""

    async def request(self, method: str, path: str, *, body: Any = None) -> Any: ...


@dataclass(frozen=True)
class ServiceAccountRef:
    """A ServiceAccount, ``namespace/name``."""

    namespace: str
    name: str

    @property
    def username(self) -> str:
        """The username its tokens authenticate as."""
        return f"system:serviceaccount:{self.namespace}:{self.name}"

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def parse(cls, text: str) -> ServiceAccountRef:
        namespace, slash, name = text.partition("/")
        if not slash or not namespace or not name or "/" in name:
            raise ValueError(f"{text!r} is not namespace/name of a ServiceAccount")
        return cls(namespace, name)


def own_identity(
    setting: str | None, token_file: Path = IN_CLUSTER_TOKEN
) -> ServiceAccountRef | None:
    """The operator's ServiceAccount: ``setting`` (``--identity namespace/name``) when given,
    else the subject of its in-cluster token (``None`` outside a Pod without the setting)."""
    if setting:
        return ServiceAccountRef.parse(setting)
    try:
        token = token_file.read_text().strip()
    except OSError:
        return None
    subject = str(jwt_claims(token).get("sub") or "")
    parts = subject.split(":")
    if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"]:
        return ServiceAccountRef(parts[2], parts[3])
    return None


class OwnTokens:
    """Audience-bound tokens of the operator's own ServiceAccount, one per audience."""

    def __init__(
        self,
        kube: Requester,
        identity: ServiceAccountRef,
        *,
        seconds: int = TOKEN_SECONDS,
        now: Callable[[], datetime.datetime] = utc_now,
    ) -> None:
        self.kube = kube
        self.identity = identity
        self.seconds = seconds
        self._now = now
        self._tokens: dict[str, tuple[str, datetime.datetime]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def __repr__(self) -> str:
        return f"OwnTokens(identity={str(self.identity)!r}, audiences={len(self._tokens)})"

    async def token(self, audience: str) -> str:
        """A token for ``audience``: the cached one, or a new one when it is near its end.

        Raises:
            CredentialError: the API server did not issue one (the message says why).
        """
        lock = self._locks.setdefault(audience, asyncio.Lock())
        async with lock:
            cached = self._tokens.get(audience)
            if cached is not None and self._now() + RENEW_BEFORE < cached[1]:
                return cached[0]
            token, expires = await self._request(audience)
            self._tokens[audience] = (token, expires)
            return token

    def forget(self, audience: str) -> bool:
        """Drop the cached token of ``audience`` (a server refused it); True when there
        was one, so that the next :meth:`token` is a new one."""
        return self._tokens.pop(audience, None) is not None

    async def _request(self, audience: str) -> tuple[str, datetime.datetime]:
        path = (
            f"/api/v1/namespaces/{self.identity.namespace}/serviceaccounts/"
            f"{self.identity.name}/token"
        )
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"audiences": [audience], "expirationSeconds": self.seconds},
        }
        try:
            answer = await self.kube.request("POST", path, body=body)
        except Exception as error:
            raise CredentialError(
                f"the API server issued no token of ServiceAccount {self.identity} for "
                f"audience {audience} ({type(error).__name__}: {error})"[:512]
            ) from None
        status = (answer or {}).get("status") or {}
        token = status.get("token")
        if not isinstance(token, str) or not token:
            raise CredentialError(
                f"the TokenRequest of ServiceAccount {self.identity} returned no token"
            )
        expires = _timestamp(status.get("expirationTimestamp")) or jwt_expiry(token)
        if expires is None:
            expires = self._now() + datetime.timedelta(seconds=self.seconds)
        return token, expires


def _timestamp(text: Any) -> datetime.datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass(frozen=True)
class Issuer:
    """The cluster's ServiceAccount token issuer: its ``iss`` and its public keys."""

    issuer: str
    jwks: Mapping[str, Any]


class IssuerKeys:
    """The API server's ServiceAccount issuer and keys, cached for ``refresh_seconds``."""

    def __init__(
        self,
        kube: Requester,
        *,
        refresh_seconds: float = ISSUER_REFRESH_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.refresh_seconds = refresh_seconds
        self._monotonic = monotonic
        self._current: Issuer | None = None
        self._fetched_at = 0.0
        self._lock = asyncio.Lock()

    async def current(self) -> Issuer:
        """The issuer and keys (fetched when due).

        Raises:
            CredentialError: neither now nor before could they be read.
        """
        async with self._lock:
            due = self._monotonic() - self._fetched_at >= self.refresh_seconds
            if self._current is not None and not due:
                return self._current
            try:
                self._current = await self._fetch()
                self._fetched_at = self._monotonic()
            except CredentialError:
                if self._current is None:
                    raise
                logger.warning("Kept the last ServiceAccount issuer keys: could not read them")
            return self._current

    async def _fetch(self) -> Issuer:
        try:
            discovery = await self.kube.request("GET", "/.well-known/openid-configuration")
            jwks = await self.kube.request("GET", "/openid/v1/jwks")
        except Exception as error:
            raise CredentialError(
                "could not read the ServiceAccount issuer from the API server "
                f"({type(error).__name__}: {error})"[:512]
            ) from None
        issuer = (discovery or {}).get("issuer")
        keys = (jwks or {}).get("keys")
        if not isinstance(issuer, str) or not issuer or not isinstance(keys, list):
            raise CredentialError("the API server's ServiceAccount issuer documents are not usable")
        return Issuer(issuer, {"keys": keys})
