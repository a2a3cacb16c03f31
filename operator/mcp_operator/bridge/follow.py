"""Following an upstream's ``notifications/tools/list_changed``, in either era.

A server that declares ``capabilities.tools.listChanged`` announces changes on a stream
the client keeps open: a handshake-era server on the session's standalone GET stream, a
2026-07-28 server on the answer to a ``subscriptions/listen`` request (the revision has no
GET stream; the listen answer is the stream, acknowledged by its first frame). The follower
keeps that stream open (with the server's headers), calls ``on_changed`` for every
``notifications/tools/list_changed`` on it, and opens it again after a pause when it ends
(the server restarted, the session was re-established, the connection dropped). Neither
stream replays what was sent while it was closed, so every re-opened stream is followed
by one ``on_changed`` (the change may have been missed). Servers that declare nothing are
left to the pool's periodic listing. Which servers get a follower, and what a change
means, is :mod:`~mcp_operator.bridge.upstreams`' job.
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
STREAM_TIMEOUT = httpx.Timeout(10.0, read=None)
"""Connecting is bounded; a quiet stream is not (changes are rare)."""


def wants_follower(upstream: Upstream) -> bool:
    """Whether the server said it announces tool list changes."""
    tools = upstream.capabilities.get("tools")
    return upstream.connected and isinstance(tools, dict) and tools.get("listChanged") is True


def is_list_changed(data: str) -> bool:
    """Whether one SSE ``data`` payload is the tool list change notification."""
    try:
        message = json.loads(data)
    except ValueError:
        return False
    return isinstance(message, dict) and message.get("method") == LIST_CHANGED


def _stream_request(upstream: Upstream, client: httpx.AsyncClient) -> httpx.Request:
    """The request whose answer carries the server's change notifications, in its era."""
    if upstream.modern:
        body, headers = upstream.listen_request()
        return client.build_request(
            "POST", upstream.url, content=body, headers=headers, timeout=STREAM_TIMEOUT
        )
    headers = {**upstream.headers, "accept": "text/event-stream"}
    if upstream.session_id is not None:
        headers["mcp-session-id"] = upstream.session_id
    if upstream.protocol_version is not None:
        headers["mcp-protocol-version"] = upstream.protocol_version
    return client.build_request("GET", upstream.url, headers=headers, timeout=STREAM_TIMEOUT)


async def _read(response: httpx.Response, on_changed: Callable[[], Awaitable[None]]) -> None:
    async for line in response.aiter_lines():
        if len(line) > MAX_LINE:
            return
        if line.startswith("data:") and is_list_changed(line[5:].strip()):
            await on_changed()


async def follow(
    upstream: Upstream,
    client: httpx.AsyncClient,
    on_changed: Callable[[], Awaitable[None]],
    reopen_seconds: float = REOPEN_SECONDS,
) -> None:
    """Follow the server's change stream until cancelled."""
    opened_before = False
    while True:
        if wants_follower(upstream):
            try:
                request = _stream_request(upstream, client)
                response = await client.send(request, stream=True)
                try:
                    if response.status_code == 200:
                        logger.debug("Following the tool list of %s", upstream.name)
                        if opened_before:
                            await on_changed()
                        opened_before = True
                        await _read(response, on_changed)
                finally:
                    await response.aclose()
            except httpx.HTTPError:
                pass
        await asyncio.sleep(reopen_seconds)
