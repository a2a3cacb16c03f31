"""A probe cancelled mid-flight ends cancelled: the operator's shutdown (and a deleted
server's worker) cancels probes, and a cancellation that came back as a probe failure
would be written to status as ``ProbeFailed`` and keep the task running."""

from __future__ import annotations

import asyncio

import pytest

from mcp_operator.mcp.discovery import discover
from mcp_operator.mcp.errors import ProbeError
from mcp_operator.mcp.target import ProbeTarget
from mcp_operator.mcp.watch import watch_tools
from mcp_operator.net.egress import EgressPolicy
from tests.support import peers

ON_LOOPBACK = EgressPolicy(allow_loopback=True)


async def outcomes_of_probes_cancelled_along_the_way(url: str, count: int = 60) -> list[str]:
    """Start ``count`` probes and cancel the n-th after n milliseconds: every moment of a
    probe (connecting, the handshake, tools/list, closing) gets cancelled in some."""
    target = ProbeTarget(url, egress=ON_LOOPBACK)
    await discover(target)  # warm: the first probe imports and connects slowly

    async def cancelled_after(delay: float) -> str:
        task = asyncio.create_task(discover(target))
        await asyncio.sleep(delay)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return "cancelled"
        except ProbeError as error:
            return f"ProbeError: {error.reason}: {error.message}"
        return "finished"

    return await asyncio.gather(*(cancelled_after(i / 1000) for i in range(count)))


@pytest.mark.parametrize("url_fixture", ["everything_url", "time_url"])
async def test_a_cancelled_probe_ends_cancelled_never_as_a_probe_failure(
    url_fixture: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(url_fixture)
    outcomes = await outcomes_of_probes_cancelled_along_the_way(url)
    failures = [outcome for outcome in outcomes if outcome.startswith("ProbeError")]
    assert not failures, failures
    assert "cancelled" in outcomes, "some probes must have been cancelled in flight"


async def test_a_cancelled_watch_ends_cancelled(everything_url: str) -> None:
    target = ProbeTarget(everything_url, egress=ON_LOOPBACK)
    for delay in (0.0, 0.005, 0.02, 0.1, 0.5):
        task = asyncio.create_task(watch_tools(target, max_seconds=30))
        await asyncio.sleep(delay)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_the_probe_deadline_is_still_a_probe_failure() -> None:
    """The probe's own deadline cancels through anyio, which takes its cancel back: a
    timeout to report, not a cancellation of the caller."""
    with peers.hostile_server("hang") as url:
        target = ProbeTarget(url, timeout_seconds=0.5, egress=ON_LOOPBACK)
        with pytest.raises(ProbeError) as raised:
            await discover(target)
    assert raised.value.reason == "Timeout"
