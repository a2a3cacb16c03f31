"""Benchmark: what OAuth to a server costs the bridge — token requests and added latency.

1. **Token requests per 1,000 calls**: the bridge (``mcp-operator bridge``, a real process)
   in front of the SDK's protected server, its tokens from our authorization server
   (``tests/support/oauth_peers.py``), 1,000 ``tools/call`` from 10 concurrent SDK clients;
   the authorization server counts the token requests. With tokens of 3,600 s (expected: 1),
   and of 5 s for a run of about 15 s (expected: at most one per token lifetime, minus the
   refresh margin). Both grants: client credentials, and token exchange of the run's token.
2. **Added p50 of a call with a cached token** against static headers: one
   :class:`~mcp_operator.mcp.session.McpSession` each, the same local HTTP peer answering
   (in this process, so nothing else varies), calls one at a time, the two interleaved in
   rounds; plus the cost of the credentials' hot path alone (``headers()``). Target: under
   20 µs.

``.venv/bin/python bench/oauth_bench.py``. The JSON of a run goes to ``bench/results/``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import jwt  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: E402
from mcp.client import Client  # noqa: E402
from tests.support.bridge_run import run_bridge, server_entry  # noqa: E402
from tests.support.http_peer import Behaviour, Request, http_peer  # noqa: E402
from tests.support.oauth_peers import oauth_peers  # noqa: E402

from mcp_operator.mcp.oauth import (  # noqa: E402
    Client as OAuthClient,
)
from mcp_operator.mcp.oauth import ClientCredentialsGrant, OAuthCredentials  # noqa: E402
from mcp_operator.mcp.session import McpSession  # noqa: E402
from mcp_operator.mcp.tokens import TokenEndpoint  # noqa: E402
from mcp_operator.net.egress import EgressPolicy  # noqa: E402
from mcp_operator.net.pool import Http1Pool  # noqa: E402

SECRET = "bench-secret"
SUBJECT_AUDIENCE = "https://as.example/exchange"


# -- 1. token requests ---------------------------------------------------------------------------


async def calls_through_bridge(url: str, calls: int, clients: int, seconds: float | None) -> int:
    """``calls`` echo calls from ``clients`` SDK clients (spread over ``seconds`` if given)."""
    done = 0

    async def one_client(share: int) -> None:
        nonlocal done
        async with Client(url, mode="auto") as client:  # type: ignore[arg-type]
            for i in range(share):
                result = await client.call_tool("secure_echo", {"text": str(i)})
                assert not result.is_error, result
                done += 1
                if seconds is not None:
                    await asyncio.sleep(seconds * clients / calls)

    await asyncio.gather(*(one_client(calls // clients) for _ in range(clients)))
    return done


def token_requests(lifetime: int, grant: str, seconds: float | None) -> dict[str, Any]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    with tempfile.TemporaryDirectory() as tmp:
        jwks = Path(tmp) / "jwks.json"
        jwks.write_text(json.dumps({"keys": [{**public, "kid": "sa", "alg": "RS256"}]}))
        secret = Path(tmp) / "secret"
        secret.write_text(SECRET)
        token_file = Path(tmp) / "token"
        now = int(time.time())
        claims = {"sub": "system:serviceaccount:bench:agent", "aud": SUBJECT_AUDIENCE}
        token_file.write_text(
            jwt.encode({**claims, "iat": now, "exp": now + 3600}, key, "RS256", {"kid": "sa"})
        )
        with oauth_peers(
            clients={"bench": SECRET},
            lifetime=lifetime,
            subject_jwks=jwks,
            subject_audience=SUBJECT_AUDIENCE,
        ) as peers:
            common = {"tokenURL": peers.token_url, "resource": peers.mcp_url}
            common["scopes"] = ["mcp:tools"]  # type: ignore[assignment]
            if grant == "client_credentials":
                auth = {
                    "oauth2ClientCredentials": {
                        **common,
                        "clientID": "bench",
                        "clientSecretFile": str(secret),
                    }
                }
            else:
                auth = {"tokenExchange": {**common, "subjectTokenFile": str(token_file)}}
            before = peers.stats()[grant]
            started = time.monotonic()  # the bridge's first listing takes a token too
            with run_bridge([server_entry("secure", peers.mcp_url, auth=auth)]) as bridge:
                done = asyncio.run(calls_through_bridge(bridge.url, 1000, 10, seconds))
                elapsed = time.monotonic() - started
                after = peers.stats()[grant]
    return {
        "grant": grant,
        "lifetimeSeconds": lifetime,
        "calls": done,
        "seconds": round(elapsed, 1),
        "tokenRequests": after - before,  # the first listing's included
        "atMost": 1 + int(elapsed // (lifetime * 0.9)),  # one per lifetime less its margin
    }


# -- 2. added latency ----------------------------------------------------------------------------


def answer(request: Request) -> tuple[int, dict[str, str], bytes]:
    if request.path == "/token":
        body = {"access_token": "bench-token", "token_type": "Bearer", "expires_in": 3600}
        return 200, {"content-type": "application/json"}, json.dumps(body).encode()
    message = json.loads(request.body)
    if "id" not in message:
        return 202, {}, b""
    if message["method"] == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "peer", "version": "1"},
        }
    else:
        result = {"content": [{"type": "text", "text": "ok"}]}
    body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
    return 200, {"content-type": "application/json"}, body


async def latency(rounds: int, per_round: int) -> dict[str, Any]:
    loopback = EgressPolicy(allow_loopback=True)
    async with http_peer(Behaviour(respond=answer)) as peer:
        pool = Http1Pool(egress=loopback)
        base = f"http://127.0.0.1:{peer.port}"

        async def secret() -> str:
            return SECRET

        credentials = OAuthCredentials(
            TokenEndpoint(f"{base}/token", egress=loopback, pool=pool),
            ClientCredentialsGrant(resource=f"{base}/mcp"),
            OAuthClient("bench", secret),
        )
        info = {"name": "bench", "version": "1"}
        static = McpSession(
            f"{base}/mcp",
            pool,
            headers={"Authorization": "Bearer bench-token"},
            client_info=info,
            protocol_hint="2025-11-25",
        )
        oauth = McpSession(
            f"{base}/mcp",
            pool,
            credentials=credentials,
            client_info=info,
            protocol_hint="2025-11-25",
        )
        samples: dict[str, list[float]] = {"static": [], "oauth": []}
        for session in (static, oauth):
            await session.connect()
        params = {"name": "echo", "arguments": {"text": "x"}}
        for _ in range(rounds):
            for name, session in (("static", static), ("oauth", oauth)):
                for _ in range(per_round):
                    started = time.perf_counter()
                    await session.request("tools/call", params)
                    samples[name].append(time.perf_counter() - started)
            peer.requests.clear()
        hot = []
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(100_000):
                await credentials.headers()
            hot.append((time.perf_counter() - started) / 100_000)
        await pool.aclose()
    p50 = {name: statistics.median(values) * 1e6 for name, values in samples.items()}
    return {
        "calls": {name: len(values) for name, values in samples.items()},
        "p50Microseconds": {name: round(value, 1) for name, value in p50.items()},
        "addedP50Microseconds": round(p50["oauth"] - p50["static"], 1),
        "headersMicroseconds": round(min(hot) * 1e6, 3),
        "tokenRequests": credentials.requests,
    }


def main() -> None:
    results: dict[str, Any] = {"tokens": [], "latency": None}
    for lifetime, grant, seconds in (
        (3600, "client_credentials", None),
        (3600, "token_exchange", None),
        (5, "client_credentials", 15.0),
    ):
        row = token_requests(lifetime, grant, seconds)
        print(json.dumps(row), flush=True)
        results["tokens"].append(row)
    results["latency"] = asyncio.run(latency(rounds=10, per_round=1000))
    print(json.dumps(results["latency"]), flush=True)
    out = REPO / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / f"oauth-{time.strftime('%Y%m%dT%H%M%S')}.json").write_text(json.dumps(results))


if __name__ == "__main__":
    main()
