"""A stdio server started per connection by ``mcp-stdio-exec --spawn-socket`` (managed Pods).

In a managed Pod the server's program lives in the server's image, not the adapter's, so
``--child-per-session`` cannot spawn it: the server container runs ``mcp-stdio-exec
--spawn-socket=DIR/spawn.sock -- PROGRAM``, which starts one PROGRAM per connection with
its stdin and stdout on that connection (``operator/stdio-exec/spawn.go``). Each child of
the pool is then one connection: ``start`` connects, the read loop is the child's stdout,
``terminate`` closes the connection (end-of-file on the server's stdin; the helper
signals the server's process group should it not exit). There is no pid: the process is
the helper's. Owns the connection only; supervision is ``child.Supervisor``'s.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from mcp_operator.adapter.child import StreamChild

SPAWN_SOCKET = "spawn.sock"
"""The helper's socket, in the Pod's shared ``--stdio-fifo-dir``."""


def spawn_socket(directory: str) -> str:
    return os.path.join(directory, SPAWN_SOCKET)


class SocketChild(StreamChild):
    """One server process, reached through one connection to the spawn helper's socket."""

    _closed_message = "the MCP server's connection is closed"

    def __init__(
        self,
        path: str,
        *,
        max_line_bytes: int,
        on_message: Callable[[dict[str, Any]], None],
    ) -> None:
        super().__init__(f"spawn:{path}", max_line_bytes=max_line_bytes, on_message=on_message)
        self._path = path
        self._stream: asyncio.StreamWriter | None = None
        """Kept so that the stream (which closes its transport when collected) lives."""

    async def start(self) -> None:
        """Connect (raises OSError while the server container has not opened the socket)."""
        self._reader, self._stream = await asyncio.open_unix_connection(
            self._path, limit=self._max_line
        )
        self._writer = self._stream.transport
