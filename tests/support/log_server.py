"""A server that logs, for the bridge's relay of log messages.

Run as ``python tests/support/log_server.py PORT`` (Streamable HTTP on
``http://127.0.0.1:PORT/mcp``, the official SDK). It declares ``logging``; its tools:

- ``say(level, text)`` logs ``call: <text>`` on the call's own stream and ``stream: <text>``
  on the session's (the legacy GET stream; a 2026-07-28 session sends both on the call's);
- ``levels()`` answers the levels ``logging/setLevel`` set, in order, comma-separated.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer

warnings.simplefilter("ignore", DeprecationWarning)

PORT = int(sys.argv[1])
server = MCPServer("log-server")
levels: list[str] = []


@server.tool()
async def say(level: str, text: str, ctx: Context) -> str:
    """Logs ``text`` at ``level`` on the call's stream and on the session's."""
    await ctx.log(level, f"call: {text}")  # type: ignore[arg-type]
    session = ctx.request_context.session
    await session.send_log_message(level, f"stream: {text}")  # type: ignore[arg-type]
    return "said"


@server.tool()
def levels_set() -> str:
    """The levels set by ``logging/setLevel``, in order."""
    return ",".join(levels)


async def on_set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
    levels.append(str(params.level))
    return types.EmptyResult()


server._lowlevel_server.add_request_handler(
    "logging/setLevel", types.SetLevelRequestParams, on_set_level
)

if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=PORT)
