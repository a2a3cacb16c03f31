"""The bridge's session table is shared fairly among callers, over real HTTP from distinct
addresses.

The bridge counts the agent's legacy sessions per caller, by client address until callers
are authenticated (``BridgeFront``'s ``caller_key``), in the one session table of
``serve.sessions``; it never replaces a caller's own idle session (a caller at its share
waits for one of its own to expire). The callers are httpx clients whose sockets are bound
to 127.0.0.2 and 127.0.0.3.
"""

from __future__ import annotations

import httpx
import pytest

from mcp_operator.bridge.core import MAX_SESSIONS
from tests.support import wire
from tests.support.bridge_run import run_bridge
from tests.support.callers import caller

pytestmark = pytest.mark.timeout(120)

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
LISTED = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


def _initialize(url: str, client: httpx.Client) -> httpx.Response:
    return client.post(url, json=wire.initialize(), headers=ACCEPT)


def _listed(url: str, client: httpx.Client, session: str) -> int:
    return client.post(url, json=LISTED, headers={**ACCEPT, "mcp-session-id": session}).status_code


def test_one_caller_filling_the_table_does_not_keep_another_caller_out() -> None:
    with run_bridge([]) as bridge, caller("127.0.0.2") as flooder, caller("127.0.0.3") as other:
        flood = []
        for _ in range(MAX_SESSIONS):
            opened = _initialize(bridge.url, flooder)
            assert opened.status_code == 200, opened.text
            flood.append(opened.headers["mcp-session-id"])
        own = _initialize(bridge.url, flooder)
        admitted = _initialize(bridge.url, other)
        theirs = _listed(bridge.url, other, admitted.headers.get("mcp-session-id", ""))
        first = _listed(bridge.url, flooder, flood[0])
        kept = _listed(bridge.url, flooder, flood[-1])
        again = _initialize(bridge.url, flooder)
    assert own.status_code == 503, own.text  # alone, its share was the whole table
    assert admitted.status_code == 200 and theirs == 200
    assert first == 404 and kept == 200  # the flooder's least recently used made room
    assert again.status_code == 503, again.text  # its share is now the table less the other's
