"""The byte budget of request bodies in flight: how much clients may make the adapter hold.

Pure bookkeeping, no HTTP: the front asks what a request would cost (its
``Content-Length``; a body of unknown length costs the most a body may be),
reserves that before reading the body and releases it once the request is
answered. A body over the per-request limit is refused outright (413); a
body that fits the limit but not what is left of the budget is refused for
now (503 with ``Retry-After``). Together with the release of each decoded
body as soon as its line is written to the child (``core``), this bounds the
memory that clients' bodies take, however many of them arrive at once.
"""

from __future__ import annotations


class BodyBudget:
    """Bytes of request bodies admitted and not yet answered, bounded."""

    __slots__ = ("in_use", "limit_bytes", "max_body_bytes", "refused")

    def __init__(self, *, limit_bytes: int, max_body_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.max_body_bytes = max_body_bytes
        self.in_use = 0
        """Bytes reserved by requests being served now."""
        self.refused = 0
        """Requests refused because the budget was spent, since start."""

    def cost(self, content_length: str | None) -> int | None:
        """What a request with this ``Content-Length`` reserves; None when it is over the limit."""
        if content_length is None or not content_length.isdigit():
            return self.max_body_bytes  # chunked or unknown: the most it may turn out to be
        length = int(content_length)
        return length if length <= self.max_body_bytes else None

    def reserve(self, size: int) -> bool:
        """Take ``size`` bytes of the budget; False (and counted) when they are not left."""
        if self.in_use + size > self.limit_bytes:
            self.refused += 1
            return False
        self.in_use += size
        return True

    def release(self, size: int) -> None:
        self.in_use -= size
