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

from mcp_operator.adapter.child import ChildProcess, ChildUnavailableError

SPAWN_SOCKET = "spawn.sock"
"""The helper's socket, in the Pod's shared ``--stdio-fifo-dir``."""
_BUFFER_LIMIT = 16 * 1024 * 1024
"""Most bytes queued for a server that does not read (as for a pipe, ``child``)."""


def spawn_socket(directory: str) -> str:
    return os.path.join(directory, SPAWN_SOCKET)


class SocketChild(ChildProcess):
    """One server process, reached through one connection to the spawn helper's socket."""

    def __init__(
        self,
        path: str,
        *,
        max_line_bytes: int,
        on_message: Callable[[dict[str, Any]], None],
    ) -> None:
        super().__init__(
            (f"spawn:{path}",), env={}, max_line_bytes=max_line_bytes, on_message=on_message
        )
        self._path = path
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    @property
    def pid(self) -> int | None:
        return None

    @property
    def running(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def start(self) -> None:
        """Connect (raises OSError while the server container has not opened the socket)."""
        self._reader, self._writer = await asyncio.open_unix_connection(
            self._path, limit=self._max_line
        )

    def _stdout(self) -> asyncio.StreamReader:
        assert self._reader is not None
        return self._reader

    def write_nowait(self, line: bytes) -> None:
        writer = self._writer
        if writer is None or writer.is_closing():
            raise ChildUnavailableError("the MCP server's connection is closed")
        if writer.transport.get_write_buffer_size() > _BUFFER_LIMIT:
            raise ChildUnavailableError("the MCP server is not reading its stdin")
        writer.write(line)

    async def write(self, line: bytes) -> None:
        self.write_nowait(line)

    async def wait(self) -> int:
        return 0

    async def terminate(self, grace: float) -> None:
        if self._writer is not None:
            self._writer.close()
