"""A late message of one session never reaches another: the adapter attributes without guessing.

The adapter runs ``tests/support/late_server.py``: during a ``wait`` call it sends, without a
progress token, a log message and a ``sampling/createMessage`` request that belong to an
earlier ``late`` call. Official SDK clients (legacy sessions) record what reaches them.

- with session A present, B's ``wait`` (the only call open) gets neither: the request is
  refused to the child and the log dropped, both counted in ``/metrics``; A gets nothing
  either, though it set a log level;
- with one session alone, both reach it: the rule delivers what it can attribute.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client

from tests.protocol.test_adapter import Adapter, adapter
from tests.support.late_server import SECRET_LOG, SECRET_PROMPT

pytestmark = pytest.mark.timeout(120)

SERVER = Path(__file__).resolve().parents[1] / "support" / "late_server.py"


@pytest.fixture
def late(tmp_path: Path) -> Iterator[Adapter]:
    with adapter([sys.executable, str(SERVER)], tmp_path) as running:
        yield running


class Recorder:
    """Sampling and logging callbacks that keep what reached this client."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.seen: list[str] = []

    async def sample(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        content = params.messages[0].content
        self.seen.append(content.text if isinstance(content, types.TextContent) else "?")
        reply = types.TextContent(text=f"{self.name} answered")
        return types.CreateMessageResult(role="assistant", content=reply, model="test")

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.seen.append(str(params.data))

    def client(self, url: str) -> Client:
        return Client(
            url,
            mode="legacy",
            sampling_callback=self.sample,
            logging_callback=self.log,
            log_level="debug",
        )


def text_of(result: Any) -> str:
    content = result.content[0]
    assert isinstance(content, types.TextContent), result
    return content.text


def unattributed(adapter: Adapter) -> dict[str, float]:
    counts: dict[str, float] = {}
    for line in httpx.get(adapter.base + "/metrics", timeout=5).text.splitlines():
        if line.startswith("mcp_adapter_unattributed_messages_total{"):
            kind = line.split('kind="', 1)[1].split('"', 1)[0]
            counts[kind] = float(line.rsplit(" ", 1)[1])
    return counts


async def test_session_b_receives_nothing_of_session_a(late: Adapter) -> None:
    a, b = Recorder("alice"), Recorder("bob")
    async with a.client(late.url) as alice, b.client(late.url) as bob:
        assert text_of(await alice.call_tool("late", {})) == "done"
        waited = await bob.call_tool("wait", {})
    assert text_of(waited) == "refused"  # the child's request came back as an error
    assert b.seen == [] and a.seen == []
    assert SECRET_PROMPT not in str(waited) and SECRET_LOG not in str(waited)
    assert unattributed(late) == {"log": 1.0, "request": 1.0}


async def test_the_only_session_gets_its_own_late_messages(late: Adapter) -> None:
    alone = Recorder("alice")
    async with alone.client(late.url) as alice:
        assert text_of(await alice.call_tool("late", {})) == "done"
        waited = await alice.call_tool("wait", {})
    assert text_of(waited) == "alice answered"
    assert sorted(alone.seen) == sorted([SECRET_LOG, SECRET_PROMPT])
    assert unattributed(late) == {"log": 0.0, "request": 0.0}
