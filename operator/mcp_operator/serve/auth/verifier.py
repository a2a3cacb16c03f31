"""One configuration's verifier: a bearer token in, a verified and authorized caller out.

Owns the order of the checks and their cache: the token's unverified ``iss`` picks the issuer
to check it against (the cluster's ServiceAccount issuer, or in OIDC mode the OIDC issuer);
``tokens`` verifies it; ``policy`` decides whether the caller may call; the outcome of a token
that verified is cached with the decision until its ``exp``. A :class:`Verifier` is built per
configuration generation, so a changed file (new keys, a revoked Pod, a narrowed allow list)
starts with an empty cache. No clock of its own: ``now`` is wall-clock seconds.
"""

from __future__ import annotations

from mcp_operator.serve.auth.access import AccessConfig
from mcp_operator.serve.auth.policy import permitted
from mcp_operator.serve.auth.tokens import (
    Issuer,
    KeySet,
    TokenCache,
    TokenRefused,
    Verified,
    oidc_caller,
    read,
    service_account_caller,
    token_hash,
)

Decision = Verified
"""A verified caller and whether it may call (403 when not)."""


class Verifier:
    """Verifies and authorizes tokens against one :class:`AccessConfig`."""

    def __init__(
        self,
        config: AccessConfig,
        *,
        oidc: bool = False,
        oidc_keys: KeySet | None = None,
        cache_entries: int = 4096,
    ) -> None:
        """``oidc``: accept the OIDC issuer's tokens too (``--auth oidc``), with
        ``oidc_keys`` (the configured ``jwks``, or what ``jwks`` fetched from ``jwksURL``)."""
        self.config = config
        self._cache = TokenCache(cache_entries)
        self._kube = (
            Issuer(config.issuer, config.audience, KeySet(config.jwks))
            if config.issuer is not None
            else None
        )
        settings = config.oidc if oidc else None
        self._oidc = (
            Issuer(settings.issuer, settings.audience, oidc_keys or KeySet(settings.jwks))
            if settings is not None
            else None
        )

    @property
    def oidc_issuer(self) -> Issuer | None:
        return self._oidc

    def cached(self) -> int:
        return len(self._cache)

    def check(self, token: str, now: float) -> Decision:
        """The decision for ``token``, or :class:`TokenRefused` with the reason."""
        key = token_hash(token)
        hit = self._cache.get(key, now)
        if hit is not None:
            return hit
        jws = read(token)
        issuer = jws.claims.get("iss")
        if self._kube is not None and issuer == self._kube.issuer:
            claims = self._kube.decode(jws, now)
            caller = service_account_caller(claims, self.config.revoked_pods)
        elif self._oidc is not None and issuer == self._oidc.issuer:
            claims = self._oidc.decode(jws, now)
            caller = oidc_caller(claims)
        else:
            raise TokenRefused("wrong_issuer")
        decision = Verified(caller, float(claims["exp"]), permitted(caller, self.config))
        self._cache.put(key, decision, now)
        return decision
