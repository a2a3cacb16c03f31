"""Following an upstream's ``notifications/tools/list_changed``: its legacy GET stream.

A handshake-era server that declares ``capabilities.tools.listChanged`` sends the
notification on the session's standalone GET stream. The follower keeps that stream open
(with the session id and the server's headers), calls ``on_changed`` for every
``notifications/tools/list_changed`` on it, and opens it again after a pause when it ends
(the server restarted, the session was re-established, the connection dropped). Servers that
declare nothing, and 2026-07-28 servers, are left to the pool's periodic listing. Which
servers get a follower, and what a change means, is :mod:`~mcp_operator.bridge.upstreams`'
job.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable

import httpx

from mcp_operator.bridge.upstream import Upstream

logger = logging.getLogger(__name__)

LIST_CHANGED = "notifications/tools/list_changed"
REOPEN_SECONDS = 2.0
MAX_LINE = 1024 * 1024


def wants_follower(upstream: Upstream) -> bool:
    """Whether the server said it announces tool list changes on a legacy session."""
    tools = upstream.capabilities.get("tools")
    return (
        upstream.connected
        and not upstream.modern
        and isinstance(tools, dict)
        and tools.get("listChanged") is True
    )


def is_list_changed(data: str) -> bool:
    """Whether one SSE ``data`` payload is the tool list change notification."""
    try:
        message = json.loads(data)
    except ValueError:
        return False
    return isinstance(message, dict) and message.get("method") == LIST_CHANGED


async def follow(
    upstream: Upstream,
    client: httpx.AsyncClient,
    on_changed: Callable[[], Awaitable[None]],
    reopen_seconds: float = REOPEN_SECONDS,
) -> None:
    """Follow the server's GET stream until cancelled."""
    while True:
        session = upstream.session_id
        if wants_follower(upstream):
            headers = {**upstream.headers, "accept": "text/event-stream"}
            if session is not None:
                headers["mcp-session-id"] = session
            if upstream.protocol_version is not None:
                headers["mcp-protocol-version"] = upstream.protocol_version
            try:
                async with client.stream("GET", upstream.url, headers=headers, timeout=None) as s:
                    if s.status_code == 200:
                        logger.debug("Following the tool list of %s", upstream.name)
                        async for line in s.aiter_lines():
                            if len(line) > MAX_LINE:
                                break
                            if line.startswith("data:") and is_list_changed(line[5:].strip()):
                                await on_changed()
            except httpx.HTTPError:
                pass
        await asyncio.sleep(reopen_seconds)
