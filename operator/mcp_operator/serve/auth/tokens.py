"""Offline verification of bearer tokens: Kubernetes ServiceAccount tokens and OIDC JWTs.

Owns the checks that make a JWT a :class:`~mcp_operator.serve.auth.caller.Caller`: the
signature against a key of the configured JWK Set (RSA and EC keys only: ``RS256``..``PS512``,
``ES256``/``ES384``; a symmetric or ``none`` key can never sign here, and each key's algorithm
is fixed by the key, not by the token's header — no algorithm confusion), the issuer, the
audience (the token's ``aud`` must contain ours), ``exp`` (required) and ``nbf``/``iat``
within :data:`LEEWAY_SECONDS`; for Kubernetes the ``kubernetes.io`` claims (namespace,
ServiceAccount name and uid, Pod name and uid when bound) and the revoked Pods.

The JWK Set is read by PyJWT's ``PyJWK`` (already in the process under the ``mcp`` SDK), the
compact JWS and its signature by this module on ``cryptography``: PyJWT's own ``decode``
spent ~20x the RSA verification itself checking base64 text a character at a time
(bench/auth_bench.py). Verified tokens are kept in a :class:`TokenCache` for their remaining
life (bounded, keyed by a SHA-256 of the token, thrown away with the configuration that
verified them).

Leaves who may call to ``policy``, fetching keys from a URL to ``jwks``, and the HTTP side
to ``gate``. No clock of its own: callers pass ``now`` (wall-clock seconds).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from jwt import PyJWK

from mcp_operator.serve.auth.caller import Caller

logger = logging.getLogger("mcp_operator.serve.auth")

LEEWAY_SECONDS = 30
"""Clock skew tolerated on ``exp``, ``nbf`` and ``iat`` (the kubelet and we share a cluster's
clocks, an OIDC issuer may not)."""

MAX_TOKEN_BYTES = 16 * 1024
"""A longer bearer value is not a token of ours (Kubernetes tokens are ~1 KiB)."""

ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384"})
"""What kube-apiserver (RS256, ES256) and OIDC issuers sign with; never HS* or none."""

SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"

REASONS = (
    "missing",
    "malformed",
    "unknown_key",
    "bad_signature",
    "expired",
    "not_yet_valid",
    "no_expiry",
    "wrong_audience",
    "wrong_issuer",
    "bad_claims",
    "revoked",
    "forbidden",
)
"""Every refusal reason, the ``reason`` label of the refusals counter (bounded)."""

_DESCRIPTIONS = {
    "missing": "no bearer token",
    "malformed": "the token is not a JWT",
    "unknown_key": "the token is signed by no key this server trusts",
    "bad_signature": "the token's signature does not verify",
    "expired": "the token has expired",
    "not_yet_valid": "the token is not valid yet",
    "no_expiry": "the token has no expiry",
    "wrong_audience": "the token is not for this server",
    "wrong_issuer": "the token's issuer is not trusted",
    "bad_claims": "the token lacks the claims of a ServiceAccount token",
    "revoked": "the token's Pod is gone",
}


class TokenRefused(Exception):
    """A token that cannot be accepted; ``reason`` is one of :data:`REASONS`."""

    def __init__(self, reason: str) -> None:
        super().__init__(_DESCRIPTIONS.get(reason, reason))
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Verified:
    """A token that verified: who, until when (``exp``) it may be trusted, and whether the
    configuration that verified it permits the caller (403 when not)."""

    caller: Caller
    expires: float
    permitted: bool = False


class KeySet:
    """The usable keys of a JWK Set, by ``kid`` (keys of other types are skipped)."""

    def __init__(self, jwks: Mapping[str, Any] | None) -> None:
        self.by_kid: dict[str, PyJWK] = {}
        self.unnamed: list[PyJWK] = []
        self.skipped = 0
        for raw in (jwks or {}).get("keys", ()) or ():
            key = _usable(raw)
            if key is None:
                self.skipped += 1
            elif key.key_id:
                self.by_kid.setdefault(key.key_id, key)
            else:
                self.unnamed.append(key)

    def __len__(self) -> int:
        return len(self.by_kid) + len(self.unnamed)

    def candidates(self, kid: Any) -> list[PyJWK]:
        """The keys that may have signed a token whose header names ``kid``."""
        if isinstance(kid, str) and kid:
            key = self.by_kid.get(kid)
            return [key] if key is not None else list(self.unnamed)
        return [*self.by_kid.values(), *self.unnamed]


def _usable(raw: Any) -> PyJWK | None:
    """A public RSA or EC key of the allowed algorithms, else None (never raises)."""
    if not isinstance(raw, dict) or raw.get("kty") not in ("RSA", "EC"):
        return None
    if "d" in raw:  # a private key published by mistake: refuse to use it at all
        return None
    use = raw.get("use")
    if use is not None and use != "sig":
        return None
    try:
        key = PyJWK(raw)
    except Exception:  # a hostile JWKS: whatever PyJWT or cryptography raise on it
        return None
    return key if key.algorithm_name in ALGORITHMS else None


def token_hash(token: str) -> bytes:
    """The cache key of a token (the token itself is never kept)."""
    return hashlib.sha256(token.encode("latin-1", "replace")).digest()


class Issuer:
    """Verification of the JWTs of one issuer for one audience."""

    def __init__(self, issuer: str, audience: str, keys: KeySet) -> None:
        self.issuer = issuer
        self.audience = audience
        self.keys = keys

    def decode(self, token: Jws, now: float) -> dict[str, Any]:
        """The verified claims of ``token`` (read by :func:`read`), or :class:`TokenRefused`."""
        candidates = self.keys.candidates(token.header.get("kid"))
        if not candidates:
            raise TokenRefused("unknown_key")
        alg = token.header.get("alg")
        refusal = TokenRefused("unknown_key")
        for key in candidates:
            if alg != key.algorithm_name:
                continue
            if _verifies(key, token):
                break
            refusal = TokenRefused("bad_signature")
        else:
            raise refusal
        claims = token.claims
        if claims.get("iss") != self.issuer:
            raise TokenRefused("wrong_issuer")
        audience = claims.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience
        if not isinstance(audiences, list) or self.audience not in audiences:
            raise TokenRefused("wrong_audience")
        return _check_times(claims, now)


_HASHES: dict[str, Callable[[], hashes.HashAlgorithm]] = {
    "256": hashes.SHA256,
    "384": hashes.SHA384,
    "512": hashes.SHA512,
}
_EC_SIZES = {"ES256": 32, "ES384": 48}


def _verifies(key: PyJWK, token: Jws) -> bool:
    """Whether ``token``'s signature verifies with ``key`` under the key's own algorithm."""
    name = key.algorithm_name
    digest = _HASHES[name[2:]]()
    public = key.key
    try:
        if name.startswith("RS") and isinstance(public, rsa.RSAPublicKey):
            public.verify(token.signature, token.signing_input, padding.PKCS1v15(), digest)
        elif name.startswith("PS") and isinstance(public, rsa.RSAPublicKey):
            pss = padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size)
            public.verify(token.signature, token.signing_input, pss, digest)
        elif name.startswith("ES") and isinstance(public, ec.EllipticCurvePublicKey):
            size = _EC_SIZES[name]
            if len(token.signature) != 2 * size or public.curve.key_size != size * 8:
                return False
            r = int.from_bytes(token.signature[:size], "big")
            s = int.from_bytes(token.signature[size:], "big")
            der = encode_dss_signature(r, s)
            public.verify(der, token.signing_input, ec.ECDSA(digest))
        else:
            return False
    except (InvalidSignature, ValueError):
        return False
    return True


def _check_times(claims: dict[str, Any], now: float) -> dict[str, Any]:
    """``exp`` (required), ``nbf`` and ``iat`` against ``now``, with the leeway."""
    exp = claims.get("exp")
    if not isinstance(exp, int | float) or isinstance(exp, bool):
        raise TokenRefused("no_expiry")
    if exp + LEEWAY_SECONDS <= now:
        raise TokenRefused("expired")
    for name in ("nbf", "iat"):
        value = claims.get(name)
        if isinstance(value, int | float) and value - LEEWAY_SECONDS > now:
            raise TokenRefused("not_yet_valid")
    return claims


@dataclass(frozen=True, slots=True)
class Jws:
    """A compact JWS read but not verified: its header, claims, signed bytes and signature."""

    header: dict[str, Any]
    claims: dict[str, Any]
    signing_input: bytes
    signature: bytes


_SEGMENT = re.compile(r"[A-Za-z0-9_-]*")


def _segment(text: str) -> bytes:
    if _SEGMENT.fullmatch(text) is None or len(text) % 4 == 1:
        raise TokenRefused("malformed")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def read(token: str) -> Jws:
    """The parts of a compact JWS (strict base64url, JSON objects), or :class:`TokenRefused`
    ``malformed``. Nothing in it is trusted until :meth:`Issuer.decode` verified it."""
    if len(token) > MAX_TOKEN_BYTES or token.count(".") != 2:
        raise TokenRefused("malformed")
    head, body, signature = token.split(".")
    try:
        header = json.loads(_segment(head))
        claims = json.loads(_segment(body))
    except (ValueError, RecursionError):
        raise TokenRefused("malformed") from None
    if not isinstance(header, dict) or not isinstance(claims, dict) or "crit" in header:
        raise TokenRefused("malformed")
    return Jws(header, claims, f"{head}.{body}".encode("ascii"), _segment(signature))


def service_account_caller(claims: Mapping[str, Any], revoked: frozenset[str]) -> Caller:
    """The ServiceAccount (and Pod) a verified Kubernetes token names, or
    :class:`TokenRefused` (``bad_claims``, ``revoked``)."""
    kube = claims.get("kubernetes.io")
    if not isinstance(kube, dict):
        raise TokenRefused("bad_claims")
    namespace = kube.get("namespace")
    account = kube.get("serviceaccount")
    if not isinstance(namespace, str) or not namespace or not isinstance(account, dict):
        raise TokenRefused("bad_claims")
    name = account.get("name")
    if not isinstance(name, str) or not name:
        raise TokenRefused("bad_claims")
    if claims.get("sub") != f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}":
        raise TokenRefused("bad_claims")
    pod = kube.get("pod")
    pod_name = pod_uid = None
    if isinstance(pod, dict):
        pod_name, pod_uid = pod.get("name"), pod.get("uid")
        if not isinstance(pod_name, str) or not isinstance(pod_uid, str):
            raise TokenRefused("bad_claims")
        if pod_uid in revoked:
            raise TokenRefused("revoked")
    elif pod is not None:
        raise TokenRefused("bad_claims")
    return Caller(
        kind="serviceaccount",
        namespace=namespace,
        service_account=name,
        pod=pod_name,
        pod_uid=pod_uid,
        subject=claims["sub"],
        issuer=claims.get("iss"),
    )


def oidc_caller(claims: Mapping[str, Any]) -> Caller:
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject or len(subject) > 512:
        raise TokenRefused("bad_claims")
    return Caller(kind="oidc", subject=subject, issuer=claims.get("iss"))


class TokenCache:
    """Verified tokens by :func:`token_hash`, each until its ``exp`` (never past it), at most
    ``max_entries`` (the oldest go first). One cache per configuration generation: the
    verifier that owns it is replaced when the configuration changes."""

    def __init__(self, max_entries: int = 4096) -> None:
        self._entries: dict[bytes, Verified] = {}
        self._max = max_entries

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: bytes, now: float) -> Verified | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expires <= now:
            del self._entries[key]
            return None
        return entry

    def put(self, key: bytes, entry: Verified, now: float) -> None:
        entries = self._entries
        if len(entries) >= self._max:
            for stale in [k for k, v in entries.items() if v.expires <= now]:
                del entries[stale]
            while len(entries) >= self._max:
                del entries[next(iter(entries))]
        entries[key] = entry
