"""Listeners for ``notifications/tools/list_changed``: one per server, bounded in number.

A server that advertises ``tools.listChanged`` may get a listener that holds
one connection and calls back when the server announces a new tool list (the
fleet then wakes its worker). At most ``max_listeners`` run at once; the other
servers are re-probed on their timer only. The MCP side of listening is
:func:`mcp_operator.mcp.watch.watch_tools`; when to listen is the fleet's call.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable

from mcp_operator.controller.settings import ListenerSettings
from mcp_operator.mcp.errors import ProbeError
from mcp_operator.mcp.target import ProbeTarget
from mcp_operator.mcp.watch import watch_tools

logger = logging.getLogger(__name__)


class Listeners:
    """The running listeners, by server uid."""

    def __init__(self, settings: ListenerSettings) -> None:
        self.settings = settings
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def listen(
        self,
        uid: str,
        target: ProbeTarget,
        *,
        max_seconds: float,
        name: str,
        on_change: Callable[[], None],
    ) -> None:
        """Start listening to a server unless a listener runs for it (or too many run)."""
        if uid in self._tasks or len(self._tasks) >= self.settings.max_listeners:
            return
        watch = functools.partial(watch_tools, target, max_seconds=max_seconds)
        self._tasks[uid] = asyncio.create_task(self._listen(uid, watch, name, on_change))

    def stop(self, uid: str) -> None:
        """Stop listening to a server (its target or credentials may have changed)."""
        task = self._tasks.pop(uid, None)
        if task is not None:
            task.cancel()

    async def stop_all(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def __len__(self) -> int:
        return len(self._tasks)

    async def _listen(
        self,
        uid: str,
        watch: Callable[[], Awaitable[bool]],
        name: str,
        on_change: Callable[[], None],
    ) -> None:
        try:
            if await watch():
                logger.info("MCPServer %s announced a new tool list", name)
                on_change()
        except ProbeError as error:
            logger.debug("Stopped listening to MCPServer %s: %s", name, error)
        finally:
            if self._tasks.get(uid) is asyncio.current_task():
                del self._tasks[uid]
