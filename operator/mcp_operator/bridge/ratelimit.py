"""Rate limits in the bridge: a token bucket per limit and tool, on the pipeline's clock.

A server's effective policy lists its rate limits, the server's (``spec.policy.rateLimits``)
and the run's (``spec.bridge.policy.rateLimits``): ``{tools: globs, perMinute, burst}``. A
limit applies to a tool when one of its globs matches the tool's original or exposed name,
and each tool it applies to has a bucket of its own (``burst`` tokens, ``perMinute`` added a
minute, spread evenly). A call needs a token from every bucket that applies; when one is
empty the call is refused (``rate_limited``, with ``retryAfterMs``: when the emptiest bucket
has a token again) and no bucket is charged.

The buckets are this bridge's, so they count this run's calls: the limits of a server over
all its callers, or over a server's replicas, are not the bridge's job (the server's own, or
a gateway's in front of it). A bucket keeps its tokens across configuration reloads while its
limit stays the same. No clock of its own: the caller passes ``now`` (monotonic seconds).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from mcp_operator.api.bridge import UpstreamServer
from mcp_operator.api.bridge_policy import RateLimit
from mcp_operator.bridge.catalog import CatalogEntry
from mcp_operator.bridge.errors import ToolError
from mcp_operator.mcp.naming import matches


@dataclass
class TokenBucket:
    """``capacity`` tokens at most, refilled at ``rate`` tokens a second."""

    capacity: float
    rate: float
    tokens: float
    updated: float

    def refill(self, now: float) -> None:
        elapsed = max(0.0, now - self.updated)
        self.tokens = min(self.capacity, self.tokens + elapsed * self.rate)
        self.updated = now

    def wait(self, now: float) -> float:
        """Seconds until a token is there (0: one is there now)."""
        self.refill(now)
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.rate


BucketKey = tuple[str, str, int, int, int, tuple[str, ...]]
"""(exposed name, layer, position, perMinute, burst, globs): a changed limit is a new bucket."""


class RateLimiter:
    """Every bucket of one bridge."""

    def __init__(self) -> None:
        self.buckets: dict[BucketKey, TokenBucket] = {}

    def _limits(
        self, server: UpstreamServer, entry: CatalogEntry
    ) -> Iterable[tuple[BucketKey, RateLimit]]:
        positions = {"server": 0, "run": 0}
        for limit in server.policy.rate_limits:
            position = positions[limit.layer]
            positions[limit.layer] += 1
            if matches(limit.tools, entry.original_name) or matches(
                limit.tools, entry.exposed_name
            ):
                burst = limit.burst or limit.per_minute
                key = (
                    entry.exposed_name,
                    limit.layer,
                    position,
                    limit.per_minute,
                    burst,
                    tuple(limit.tools),
                )
                yield key, limit

    def take(self, server: UpstreamServer, entry: CatalogEntry, now: float) -> float:
        """Take a token from every bucket of the tool: 0.0, or the seconds to wait (nothing
        taken)."""
        buckets: list[TokenBucket] = []
        for key, limit in self._limits(server, entry):
            bucket = self.buckets.get(key)
            if bucket is None:
                capacity = float(key[4])
                bucket = TokenBucket(capacity, limit.per_minute / 60.0, capacity, now)
                self.buckets[key] = bucket
            buckets.append(bucket)
        wait = max((bucket.wait(now) for bucket in buckets), default=0.0)
        if wait > 0.0:
            return wait
        for bucket in buckets:
            bucket.tokens -= 1.0
        return 0.0

    def forget_others(self, names: Iterable[str]) -> None:
        """Drop the buckets of tools that are no longer in the catalog."""
        kept = set(names)
        self.buckets = {key: b for key, b in self.buckets.items() if key[0] in kept}


def limited(exposed_name: str, server: str, wait_seconds: float) -> ToolError:
    """``rate_limited``: when to call again."""
    retry_ms = max(1, math.ceil(wait_seconds * 1000))
    return ToolError(
        "rate_limited",
        f"{exposed_name} was called more often than this run's rate limit allows; the call "
        f"was not sent. Call it again in {retry_ms} ms or later (retryAfterMs), and spread "
        "further calls out.",
        {"server": server, "retryAfterMs": retry_ms},
    )
