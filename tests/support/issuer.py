"""A token issuer of the tests' own: keys generated here, tokens shaped like kube-apiserver's.

:class:`TestIssuer` holds an RSA (RS256) or EC P-256 (ES256) key, publishes it as a JWK Set
and signs ServiceAccount tokens (the ``kubernetes.io`` claims of a projected, Pod-bound token)
or plain OIDC access tokens. ``access_config`` writes the adapter's access configuration.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

ISSUER = "https://kubernetes.default.svc.cluster.local"
AUDIENCE = "mcpserver.mcp-operator.dev/tools/everything"


class TestIssuer:
    __test__ = False  # not a test class

    def __init__(self, issuer: str = ISSUER, *, alg: str = "RS256", kid: str | None = None):
        self.issuer = issuer
        self.alg = alg
        self.kid = kid or uuid.uuid4().hex[:16]
        if alg == "ES256":
            self.key: Any = ec.generate_private_key(ec.SECP256R1())
            jwk = json.loads(ECAlgorithm.to_jwk(self.key.public_key()))
        else:
            self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            jwk = json.loads(RSAAlgorithm.to_jwk(self.key.public_key()))
        self.jwk = {**jwk, "kid": self.kid, "use": "sig", "alg": alg}

    def jwks(self) -> dict[str, Any]:
        return {"keys": [self.jwk]}

    def sign(self, claims: dict[str, Any], *, headers: dict[str, Any] | None = None) -> str:
        return jwt.encode(
            claims, self.key, algorithm=self.alg, headers={"kid": self.kid, **(headers or {})}
        )

    def service_account_token(
        self,
        namespace: str = "team",
        name: str = "agent",
        *,
        audience: str | list[str] = AUDIENCE,
        pod: str | None = "run-1",
        pod_uid: str = "0b5e8d6c-0000-4000-8000-000000000001",
        now: float | None = None,
        lifetime: float = 600,
        **extra: Any,
    ) -> str:
        issued = int(time.time() if now is None else now)
        kube: dict[str, Any] = {
            "namespace": namespace,
            "serviceaccount": {"name": name, "uid": str(uuid.uuid4())},
        }
        if pod is not None:
            kube["pod"] = {"name": pod, "uid": pod_uid}
        claims: dict[str, Any] = {
            "aud": [audience] if isinstance(audience, str) else audience,
            "exp": issued + int(lifetime),
            "iat": issued,
            "nbf": issued,
            "iss": self.issuer,
            "sub": f"system:serviceaccount:{namespace}:{name}",
            "kubernetes.io": kube,
            "jti": str(uuid.uuid4()),
        }
        claims.update(extra)
        return self.sign({k: v for k, v in claims.items() if v is not None})

    def oidc_token(
        self, subject: str, audience: str, *, now: float | None = None, lifetime: float = 300
    ) -> str:
        issued = int(time.time() if now is None else now)
        claims = {"iss": self.issuer, "sub": subject, "aud": audience,
                  "iat": issued, "exp": issued + int(lifetime)}  # fmt: skip
        return self.sign(claims)


def access_document(
    issuer: TestIssuer,
    *,
    audience: str = AUDIENCE,
    namespaces: list[str] | None = None,
    service_accounts: list[str] | None = None,
    operators: list[str] | None = None,
    revoked: list[str] | None = None,
    oidc: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "audience": audience,
        "issuer": issuer.issuer,
        "jwks": issuer.jwks(),
        "allow": {
            "namespaces": ["team"] if namespaces is None else namespaces,
            "serviceAccounts": service_accounts,
            "operators": operators or ["system:serviceaccount:mcp-operator:mcp-operator"],
        },
        "revokedPods": revoked or [],
        "oidc": oidc,
    }


def write_access(path: Path, document: dict[str, Any]) -> Path:
    """Write ``document`` the way the kubelet updates a ConfigMap: a new file, renamed over."""
    temporary = path.with_name(path.name + ".new")
    temporary.write_text(json.dumps(document))
    temporary.replace(path)
    return path
