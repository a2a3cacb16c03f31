"""The ``tools/list_changed`` watch: wait until a server says that its tool list changed.

Only the waiting lives here; when to watch and what to do on a change is the
caller's (the MCPServer fleet re-probes). A Streamable HTTP server (either era) is watched
on the change stream of the one MCP session
(:meth:`~mcp_operator.mcp.session_changes.SessionChanges.changes`, the bridge's follower
reads the same); the legacy HTTP+SSE transport keeps the SDK's client,
which speaks it (:func:`~mcp_operator.mcp.client.connect`). Error translation comes from
:mod:`~mcp_operator.mcp.errors`.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx2
from mcp.client.subscriptions import ToolsListChanged
from mcp_types import ToolListChangedNotification
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_operator.mcp.client import connect, probe_state
from mcp_operator.mcp.errors import ProbeState, reraise_cancellation, scrub
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.pages import Keep
from mcp_operator.mcp.streamable import streamable
from mcp_operator.mcp.target import ProbeTarget, check_target
from mcp_operator.mcp.translation import translate


async def watch_tools(target: ProbeTarget, *, max_seconds: float) -> bool:
    """Wait until the server announces that its tool list changed.

    Returns ``True`` on ``notifications/tools/list_changed`` (legacy era, on the
    session's GET stream; 2026-07-28, on the answer to ``subscriptions/listen``);
    ``False`` when ``max_seconds`` pass first, the server ends the stream or offers none.
    The connection is opened within ``target.timeout_seconds``; after that only
    ``max_seconds`` bound it, so a caller re-opens it now and then.

    Raises:
        ProbeError: the connection or the handshake failed.
    """
    check_target(target)
    state = probe_state(target)
    try:
        if target.transport == "streamable-http":
            return await _watch_session(target, state, max_seconds)
        return await _watch_sdk(target, state, max_seconds)
    except Exception as error:  # boundary: every failure becomes one ProbeError
        reraise_cancellation()
        raise scrub(translate(error, state), target.headers) from None


async def _watch_session(target: ProbeTarget, state: ProbeState, max_seconds: float) -> bool:
    connected = False
    with anyio.move_on_after(target.timeout_seconds) as scope:
        async with streamable(target, state, Keep()) as client:
            connected = True
            scope.deadline = anyio.current_time() + max_seconds
            state.phase = "listening for tool list changes"
            try:
                async for changed in client.session.changes():
                    if changed:
                        return True
            except McpFailure as failure:
                if failure.status is None:
                    raise
                await anyio.sleep_forever()  # no stream offered: as quiet as one (the SDK's way)
            return False
    if not connected:
        raise TimeoutError
    return False


async def _watch_sdk(target: ProbeTarget, state: ProbeState, max_seconds: float) -> bool:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            changed.set()

    connected = False
    # One scope for the whole session (the SDK's task groups must not outlive an inner
    # one): first the probe's timeout for connecting, then ``max_seconds`` of listening.
    with anyio.move_on_after(target.timeout_seconds) as scope:
        async with AsyncExitStack() as stack:
            client = await connect(
                stack,
                target,
                state,
                message_handler=on_message,
                http_timeout=httpx2.Timeout(target.timeout_seconds, read=None),
            )
            connected = True
            scope.deadline = anyio.current_time() + max_seconds
            state.phase = "listening for tool list changes"
            if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                async with client.listen(tools_list_changed=True) as subscription:
                    async for event in subscription:
                        if isinstance(event, ToolsListChanged):
                            return True
                return False
            await changed.wait()
            return True
    if not connected:
        raise TimeoutError
    return False
