"""An OIDC issuer's signing keys fetched from its ``jwksURL``: bounded, cached, refetched.

Owns the one HTTP request of inbound authentication: ``GET jwksURL`` on the house's HTTP/1.1
pool (``net.pool``), through an egress policy (cloud metadata addresses always refused;
private addresses allowed by default — an issuer inside the cluster — loopback only when the
caller's policy says so), within :data:`FETCH_TIMEOUT_SECONDS` and :data:`MAX_JWKS_BYTES`.
The keys are kept for :data:`REFRESH_SECONDS`; a token naming a ``kid`` the keys do not
hold (the issuer rotated) asks for a refetch, granted at most every
:data:`MIN_REFETCH_SECONDS` so that tokens with made-up ``kid`` values cannot make the
adapter hammer the issuer. A failed fetch keeps the last good keys and is logged.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

from mcp_operator.net.egress import EgressPolicy
from mcp_operator.net.http1 import Http1Error
from mcp_operator.net.pool import Http1Pool
from mcp_operator.serve.auth.tokens import KeySet

logger = logging.getLogger("mcp_operator.serve.auth")

MAX_JWKS_BYTES = 256 * 1024
FETCH_TIMEOUT_SECONDS = 5.0
REFRESH_SECONDS = 300.0
MIN_REFETCH_SECONDS = 30.0

DEFAULT_EGRESS = EgressPolicy(allow_private=True)


class JwksFetcher:
    """The keys at one URL, fetched when first needed and kept fresh."""

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], float],
        egress: EgressPolicy = DEFAULT_EGRESS,
        pool: Http1Pool | None = None,
    ) -> None:
        self.url = url
        self.keys = KeySet(None)
        self.fetches = 0
        self.failures = 0
        self._clock = clock
        self._pool = pool or Http1Pool(egress=egress, max_connections=2)
        self._fetched_at: float | None = None
        self._lock = asyncio.Lock()

    def stale(self) -> bool:
        return self._fetched_at is None or self._clock() - self._fetched_at >= REFRESH_SECONDS

    async def refresh(self, *, unknown_kid: bool = False) -> bool:
        """Fetch the keys when none are held, when they are stale, or (``unknown_kid``) when
        the last fetch is :data:`MIN_REFETCH_SECONDS` old. True when new keys were taken."""
        async with self._lock:
            fetched = self._fetched_at
            now = self._clock()
            due = fetched is None or now - fetched >= REFRESH_SECONDS
            if unknown_kid and fetched is not None and now - fetched >= MIN_REFETCH_SECONDS:
                due = True
            if not due:
                return False
            self._fetched_at = now
            self.fetches += 1
            try:
                async with asyncio.timeout(FETCH_TIMEOUT_SECONDS):
                    keys = await self._fetch()
            except (TimeoutError, Http1Error, OSError, ValueError) as error:
                self.failures += 1
                logger.warning("Failed to fetch the OIDC keys from %s: %s", self.url, error)
                return False
            self.keys = keys
            return True

    async def _fetch(self) -> KeySet:
        answer = await self._pool.request("GET", self.url, {"accept": "application/json"})
        try:
            if answer.status_code != 200:
                raise ValueError(f"HTTP {answer.status_code}")
            chunks: list[bytes] = []
            size = 0
            async for chunk in answer.aiter_bytes():
                size += len(chunk)
                if size > MAX_JWKS_BYTES:
                    raise ValueError(f"the key set is larger than {MAX_JWKS_BYTES} bytes")
                chunks.append(chunk)
        except BaseException:
            answer.discard()
            raise
        document = json.loads(b"".join(chunks))
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise ValueError("the answer is not a JWK Set")
        keys = KeySet(document)
        if not len(keys):
            raise ValueError("the key set holds no usable RSA or EC signing key")
        return keys

    async def aclose(self) -> None:
        await self._pool.aclose()
