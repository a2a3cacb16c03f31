"""One bounded POST on the shared pool: for callers that are not MCP sessions (the bridge's
approval webhook).

:func:`post` sends a body and reads at most ``max_bytes`` of the answer on a
:class:`~mcp_operator.net.pool.Http1Pool` (its egress policy judges the address, TLS still
verifies the name); a longer answer is an error, not a cut one. Deadlines are the caller's.
"""

from __future__ import annotations

from collections.abc import Mapping

from mcp_operator.net.pool import Http1Pool


class AnswerTooLarge(Exception):
    """The answer was longer than the caller allows."""


async def post(
    pool: Http1Pool, url: str, headers: Mapping[str, str], body: bytes, *, max_bytes: int
) -> tuple[int, bytes]:
    """``(status, body)`` of one POST; :class:`AnswerTooLarge` past ``max_bytes``."""
    response = await pool.request("POST", url, headers, body)
    received = bytearray()
    try:
        async for chunk in response.aiter_bytes():
            received += chunk
            if len(received) > max_bytes:
                raise AnswerTooLarge(f"the answer is longer than {max_bytes} bytes")
    finally:
        await response.aclose()
    return response.status_code, bytes(received)
