"""The session table is shared fairly among callers, over real HTTP from distinct addresses.

The adapter (``--max-sessions 4``) runs the bounds server of ``test_adapter_bounds``; the
callers are httpx clients whose sockets are bound to distinct loopback addresses
(127.0.0.2, 127.0.0.3), which the adapter counts sessions by.

- one caller's held GET streams fill the table: its own next ``initialize`` gets 503, but
  another caller's is admitted (the holder's least recently used session makes room);
- one caller's many ``initialize`` requests evict only its own sessions: another caller's
  idle session still answers.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.protocol.test_adapter import ACCEPT, INIT, Adapter, adapter, initialize
from tests.protocol.test_adapter_bounds import bounds_server  # noqa: F401 (a fixture)
from tests.support.callers import caller

pytestmark = pytest.mark.timeout(120)

FLAGS = ("--max-sessions", "4")
LISTED = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


Callers = tuple[Adapter, httpx.Client, httpx.Client]
"""The adapter (``--max-sessions 4``, in front of the bounds server) and two callers, from
127.0.0.2 and 127.0.0.3."""


@pytest.fixture
def callers(tmp_path: Path, bounds_server: Path) -> Iterator[Callers]:  # noqa: F811
    command = (sys.executable, str(bounds_server), "hold")
    with (
        adapter(command, tmp_path, *FLAGS) as running,
        caller("127.0.0.2") as first,
        caller("127.0.0.3") as second,
    ):
        yield running, first, second


def listed(url: str, client: httpx.Client, session: str) -> int:
    headers = {**ACCEPT, "mcp-session-id": session}
    return client.post(url, json=LISTED, headers=headers).status_code


def test_held_streams_of_one_caller_do_not_stop_another_callers_initialize(
    callers: Callers,
) -> None:
    running, holder, other = callers
    with contextlib.ExitStack() as streams:
        held = []
        for _ in range(4):
            session = initialize(running.url, holder)
            headers = {**ACCEPT, "accept": "text/event-stream", "mcp-session-id": session}
            streams.enter_context(holder.stream("GET", running.url, headers=headers))
            held.append(session)
        running.wait_for("/readyz", 503, timeout=5)
        own = holder.post(running.url, json=INIT, headers=ACCEPT)
        admitted = other.post(running.url, json=INIT, headers=ACCEPT)
        assert own.status_code == 503, own.text  # the holder's own share is full
        assert admitted.status_code == 200, admitted.text
        assert listed(running.url, other, admitted.headers["mcp-session-id"]) == 200
        gone = listed(running.url, holder, held[0])
        kept = [listed(running.url, holder, session) for session in held[1:]]
    assert gone == 404 and kept == [200, 200, 200]


def test_one_callers_initializes_do_not_evict_another_callers_idle_session(
    callers: Callers,
) -> None:
    running, flooder, victim = callers
    idle = initialize(running.url, victim)
    flood = [initialize(running.url, flooder) for _ in range(20)]
    still = listed(running.url, victim, idle)
    first = listed(running.url, flooder, flood[0])
    last = listed(running.url, flooder, flood[-1])
    limits = running.health("/readyz").json()["limits"]
    assert still == 200 and first == 404 and last == 200
    assert limits["sessionsEvicted"] == 17  # the flooder's own sessions, 20 - 3 kept
