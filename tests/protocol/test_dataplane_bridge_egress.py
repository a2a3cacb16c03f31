"""Both bridges judge every upstream connection by the egress policy (``BRIDGE_EGRESS``).

The same test runs against the Python bridge and the compiled one (parametrized), with three
servers: one at the cloud metadata address (``169.254.169.254``), one at the unspecified
address ``0.0.0.0`` (which Linux would connect to the local host: a listening socket that
nobody accepts from stands in for the victim there, so ``connected`` tells whether anything
reached it), and a good one (server-everything on loopback, which the bridge may reach).
The two refused servers are unavailable (down in ``/readyz``, their failure logged; the
compiled bridge's reason is the egress refusal, ``refused to connect to 169.254.169.254 is a
cloud metadata address``, the Python bridge's says only that it could not connect), their
tools are not listed, nothing connects to the victim, and the good server's tools are listed
and called.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from mcp import Client

from tests.protocol.test_egress import connected, victim
from tests.support import needs
from tests.support.bridge_run import run_bridge, server_entry
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.timeout(120),
    needs.mark(needs.node_missing()),
    pytest.mark.usefixtures("compiled_bridge"),
]


def _text(result: Any) -> str:
    return result.content[0].text  # type: ignore[no-any-return]


async def test_metadata_and_unspecified_servers_are_refused_and_a_good_one_works(
    program: str, everything_url: str
) -> None:
    with victim() as (port, listener):
        servers = [
            server_entry("meta", "http://169.254.169.254:9/mcp"),
            server_entry("zero", f"http://0.0.0.0:{port}/mcp"),
            server_entry("good", everything_url),
        ]
        running = run_bridge(servers)
        bridge = await asyncio.to_thread(running.__enter__)
        try:
            async with Client(bridge.url, mode="legacy") as agent:
                names = {tool.name for tool in (await agent.list_tools()).tools}
                echoed = await agent.call_tool("good_echo", {"message": "still here"})

            def refusals() -> str:
                return bridge.log()

            log = await asyncio.to_thread(
                eventually,
                "both refusals logged",
                refusals,
                20,
                until=lambda t: "default/meta" in t and "default/zero" in t,
            )
            await asyncio.sleep(1)  # the compiled bridge tries again each second: let it
            ready = await asyncio.to_thread(httpx.get, f"{bridge.health}/readyz")
            state = ready.json()["servers"]
            reached = connected(listener)
        finally:
            await asyncio.to_thread(running.__exit__, None, None, None)
    assert "good_echo" in names, names
    assert not any(n.startswith(("meta_", "zero_")) for n in names), names
    assert not echoed.is_error and _text(echoed) == "Echo: still here", echoed
    assert state["default/good"]["up"] is True, state
    assert state["default/meta"]["up"] is False and state["default/zero"]["up"] is False, state
    for key, words in (
        ("default/meta", "refused to connect to 169.254.169.254 is a cloud metadata address"),
        ("default/zero", "refused to connect to 0.0.0.0 is the unspecified address"),
    ):
        lines = [line for line in log.splitlines() if key in line]
        assert lines, log
        if program == "compiled":  # the Python bridge says only "could not connect to <key>"
            assert any(words in line for line in lines), lines
    assert not reached, "a connection reached the refused address"
