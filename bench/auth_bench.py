"""Benchmark: what verifying a caller costs per call, offline (ours) vs TokenReview, cached or not.

One run, side by side, on the tokens of a real kube-apiserver (``mcp_operator.dev.cluster.
ControlPlane``; ``make control-plane`` builds it): a ServiceAccount, a token for a server's
audience from its ``TokenRequest``, and the issuer's keys from ``/openid/v1/jwks``. Measured:

- **offline, uncached**: ``serve.auth.verifier.Verifier.check`` of tokens it has not seen
  (signature, issuer, audience, times, claims, authorization; the keys parsed once, as they
  are per configuration);
- **offline, cached**: the same verifier again (SHA-256 of the token, a dict look-up);
- **offline, uncached, ES256** and **RS256 with our own keys**: the two algorithms the API
  server signs with (its keys here are RSA), on tokens of the same shape;
- **TokenReview, uncached**: ``POST /apis/authentication.k8s.io/v1/tokenreviews`` with the
  token and the audience, over one keep-alive connection (what kube-rbac-proxy does), the
  answer's ``authenticated`` and ``audiences`` checked;
- **TokenReview, cached**: the same cache as ours in front of it;
- **the gate, cached**: ``AuthGate.admit`` from the header value to the decision — what a
  request of the adapter pays on top of ``--auth none``.

Prints a table of µs per call (median of the batches) and writes JSON to ``bench/results/``.
``.venv/bin/python bench/auth_bench.py`` (a quiet machine; about a minute).
"""

from __future__ import annotations

import base64
import json
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.issuer import TestIssuer, access_document, write_access  # noqa: E402

from mcp_operator.dev.cluster import ControlPlane  # noqa: E402
from mcp_operator.serve.auth.access import AccessFile, parse  # noqa: E402
from mcp_operator.serve.auth.gate import AuthGate  # noqa: E402
from mcp_operator.serve.auth.tokens import TokenCache, Verified, token_hash  # noqa: E402
from mcp_operator.serve.auth.verifier import Verifier  # noqa: E402

AUDIENCE = "mcpserver.mcp-operator.dev/bench/everything"
NAMESPACE = "bench"
ACCOUNT = "agent"


UNCACHED = 100
"""Calls per batch where every call verifies a token not seen before."""
BATCHES = 5


def per_call_us(work: Callable[[], object], calls: int, batches: int = BATCHES) -> float:
    """Median over ``batches`` of the µs one call of ``work`` takes."""
    samples = []
    for _ in range(batches):
        started = time.perf_counter()
        for _ in range(calls):
            work()
        samples.append((time.perf_counter() - started) * 1e6 / calls)
    return statistics.median(samples)


class TokenReviewer:
    """TokenReview against the API server (bench only: in-cluster it would need a cluster-wide
    ``create tokenreviews`` grant for every managed server's Pod, docs/security.md)."""

    def __init__(self, http: httpx.Client) -> None:
        """``http``: a client of the API server with a credential allowed to create
        TokenReviews; one keep-alive connection, as a proxy keeps."""
        self.http = http
        self.cache = TokenCache()

    def review(self, token: str) -> str:
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                "spec": {"token": token, "audiences": [AUDIENCE]}}  # fmt: skip
        answer = self.http.post("/apis/authentication.k8s.io/v1/tokenreviews", json=body)
        answer.raise_for_status()
        status = answer.json()["status"]
        if not status.get("authenticated") or AUDIENCE not in status.get("audiences", []):
            raise RuntimeError(f"the API server did not accept the token: {status}")
        return str(status["user"]["username"])

    def cached(self, token: str, ttl: float = 60.0) -> object:
        key = token_hash(token)
        now = time.time()
        hit = self.cache.get(key, now)
        if hit is None:
            self.review(token)
            hit = Verified(None, now + ttl)  # type: ignore[arg-type]
            self.cache.put(key, hit, now)
        return hit


def admin(plane: ControlPlane, directory: Path) -> httpx.Client:
    """A client of the plane's API server as its admin (TLS verified against its CA)."""
    config = yaml.safe_load(plane.kubeconfig.read_text())
    ca = directory / "ca.crt"
    ca.write_bytes(base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]))
    return httpx.Client(base_url=plane.server, headers={"authorization": f"Bearer {plane.token}"},
                        verify=ssl.create_default_context(cafile=str(ca)), timeout=30)  # fmt: skip


def cluster_tokens(http: httpx.Client, count: int) -> tuple[list[str], dict[str, Any], str]:
    """``count`` TokenRequest tokens for AUDIENCE, the issuer's JWKS and the issuer."""
    http.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": NAMESPACE}})  # fmt: skip
    accounts = f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts"
    http.post(accounts, json={"apiVersion": "v1", "kind": "ServiceAccount",
                              "metadata": {"name": ACCOUNT}})  # fmt: skip
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
               "spec": {"audiences": [AUDIENCE], "expirationSeconds": 3600}}  # fmt: skip
    tokens = []
    for _ in range(count):
        answer = http.post(f"{accounts}/{ACCOUNT}/token", json=request)
        answer.raise_for_status()
        tokens.append(answer.json()["status"]["token"])
    issuer = http.get("/.well-known/openid-configuration").json()["issuer"]
    jwks = http.get("/openid/v1/jwks").json()
    return tokens, jwks, issuer


def each(values: list[str], work: Callable[[str], object]) -> Callable[[], object]:
    """A call of ``work`` on the next of ``values`` each time (a cache never helps)."""
    iterator = iter(values)
    return lambda: work(next(iterator))


def main() -> int:
    rows: list[tuple[str, float]] = []
    with ControlPlane() as plane, tempfile.TemporaryDirectory() as scratch:
        http = admin(plane, Path(scratch))
        fresh, jwks, issuer = cluster_tokens(http, 1 + 2 * UNCACHED * BATCHES)
        token = fresh.pop()
        document = {"audience": AUDIENCE, "issuer": issuer, "jwks": jwks,
                    "allow": {"namespaces": [NAMESPACE]}}  # fmt: skip
        config = parse(document)
        decision = Verifier(config).check(token, time.time())
        assert decision.permitted, decision
        assert decision.caller.describe() == f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"
        now = time.time()
        cold = Verifier(config)
        rows.append(("offline, uncached (kube-apiserver's RS256 tokens)",
                     per_call_us(each(fresh[: UNCACHED * BATCHES], lambda t: cold.check(t, now)),
                                 UNCACHED)))  # fmt: skip
        cached = Verifier(config)
        rows.append(("offline, cached", per_call_us(lambda: cached.check(token, now), 50_000)))
        for alg in ("RS256", "ES256"):
            own = TestIssuer(alg=alg)
            own_config = parse(access_document(own))
            own_tokens = [own.service_account_token(now=now) for _ in range(UNCACHED * BATCHES)]
            own_verifier = Verifier(own_config)
            assert own_verifier.check(own_tokens[0], now).permitted
            rows.append((f"offline, uncached ({alg}, our keys, Pod-bound tokens)",
                         per_call_us(each(own_tokens, lambda t, v=own_verifier: v.check(t, now)),
                                     UNCACHED)))  # fmt: skip
        reviewer = TokenReviewer(http)
        assert reviewer.review(token) == f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"
        unseen = fresh[UNCACHED * BATCHES :]
        rows.append(("TokenReview, uncached (one keep-alive connection)",
                     per_call_us(each(unseen, reviewer.review), UNCACHED)))  # fmt: skip
        rows.append(("TokenReview, cached", per_call_us(lambda: reviewer.cached(token), 50_000)))
        with tempfile.TemporaryDirectory() as tmp:
            path = write_access(Path(tmp) / "access.json", document)
            gate = AuthGate("kubernetes", AccessFile(str(path), clock=time.monotonic))
            headers = {b"authorization": f"Bearer {token}"}

            async def send(message: Any) -> None:
                raise AssertionError("refused")

            scope: dict[str, Any] = {}

            def admit() -> object:
                coroutine = gate.admit(scope, headers, send)
                try:
                    coroutine.send(None)
                except StopIteration as done:
                    return done.value
                raise AssertionError("the cached path awaited")

            assert admit() is not None
            rows.append(("the gate, cached (header to decision)", per_call_us(admit, 50_000)))
    print("| verification of one call | µs per call |")
    print("| --- | --- |")
    for name, value in rows:
        print(f"| {name} | {value:,.1f} |")
    out = REPO / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    (out / f"auth-{stamp}.json").write_text(json.dumps(dict(rows), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
