"""The ``tools/list_changed`` watch: wait until a server says that its tool list changed.

Only the waiting lives here; when to watch and what to do on a change is the
caller's (the MCPServer fleet re-probes). Every server (either era, either transport) is
watched on the change stream of the probe's one MCP session
(:meth:`~mcp_operator.mcp.session_changes.SessionChanges.changes`; the bridge's follower
reads the same). Error translation comes from :mod:`~mcp_operator.mcp.errors`.
"""

from __future__ import annotations

import anyio

from mcp_operator.mcp.errors import ProbeState, reraise_cancellation, scrub
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.pages import Keep
from mcp_operator.mcp.probe_bodies import probe_state
from mcp_operator.mcp.probe_client import probe_client
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
        return await _watch_session(target, state, max_seconds)
    except Exception as error:  # boundary: every failure becomes one ProbeError
        reraise_cancellation()
        raise scrub(translate(error, state), target.headers) from None


async def _watch_session(target: ProbeTarget, state: ProbeState, max_seconds: float) -> bool:
    connected = False
    with anyio.move_on_after(target.timeout_seconds) as scope:
        async with probe_client(target, state, Keep()) as client:
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
