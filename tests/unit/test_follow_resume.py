"""The change-stream follower lists again after every open, unless the stream was resumed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from mcp_operator.mcp.session_changes import follow


class FakeSession:
    """A session whose change stream opens and ends at once, ``opens`` times."""

    name = "fake"
    announces_changes = True
    announces_notices = True

    def __init__(self, resumed: list[bool]) -> None:
        self._resumed = resumed
        self.stream_resumed = False
        self.opened = 0

    async def changes(self) -> AsyncGenerator[bool, None]:
        if self.opened >= len(self._resumed):
            await asyncio.Event().wait()  # the last stream stays open
        self.stream_resumed = self._resumed[self.opened]
        self.opened += 1
        yield False


async def relists(resumed: list[bool]) -> int:
    session = FakeSession(resumed)
    count = 0

    async def on_changed() -> None:
        nonlocal count
        count += 1

    task = asyncio.create_task(follow(session, on_changed, reopen_seconds=0))  # type: ignore[arg-type]
    while session.opened < len(resumed):  # noqa: ASYNC110 - a fake without events
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    task.cancel()
    return count


async def test_every_open_that_was_not_resumed_is_followed_by_a_listing() -> None:
    # The first open too: a change announced between the last listing and the open is lost.
    assert await relists([False, False, False]) == 3


async def test_a_resumed_stream_replays_what_it_missed_so_nothing_is_listed_again() -> None:
    assert await relists([False, True, True]) == 1
    assert await relists([False, True, False]) == 2
