"""Whether the current task was asked to stop, even if a library swallowed the
``CancelledError`` (anyio's closed streams, an SDK's task group): the one check the probe,
the watch and the controller's worker share."""

from __future__ import annotations

import asyncio


def cancelling() -> bool:
    """Whether the current task was asked to stop (even if the ``CancelledError`` got lost)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
