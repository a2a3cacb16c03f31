"""The compiled bridge's rate limits, retries and circuit breaker, held to the Python bridge's.

The rate limit is held to its home test (``test_bridge_policies.py``), run again here against
the binary (the autouse fixture swaps the program ``tests.support.bridge_run`` starts, as
``test_dataplane_bridge.py`` does). Retries and the breaker have no home protocol test: the
tests below run against both bridges (``program``) in front of a scripted keep-alive server
(``test_probe_wire.py``'s) whose ``tools/call`` fails as long as the test says (the connection
dropped mid-call, as a Pod killed does, or a gateway's 503), and assert the same observable
behaviour: what the agent gets, how often the call reached the server, the audit line.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from mcp import Client

from tests.protocol.test_bridge import managed_url
from tests.protocol.test_bridge_failures import scripted
from tests.protocol.test_bridge_policies import (
    test_a_burst_above_the_rate_limit_is_refused_with_retry_after,
)
from tests.protocol.test_probe_wire import INITIALIZED, Answer, Seen, Start, json_answer, result
from tests.support import needs
from tests.support.bridge_run import bridge_of, server_entry
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.timeout(180),
    needs.mark(needs.node_missing()),
    pytest.mark.usefixtures("compiled_bridge"),
]

# The fixtures and the tests of the home modules that run here again (pytest collects them).
__all__ = [
    "managed_url",
    "scripted",
    "test_a_burst_above_the_rate_limit_is_refused_with_retry_after",
]


LOOKUP = {
    "name": "lookup",
    "inputSchema": {"type": "object"},
    "annotations": {"readOnlyHint": True},
}


@dataclass
class Failing:
    """A legacy server with one read-only tool, ``lookup``, whose calls fail (``how``: the
    connection dropped, or an HTTP 503) the first ``failures`` times, then succeed."""

    failures: int
    how: str = "drop"
    calls: int = 0

    def __call__(self, seen: Seen) -> Answer:
        if seen.verb == "DELETE":
            return 200, {}, b""
        if seen.method == "initialize":
            return json_answer(result(seen, INITIALIZED), **{"mcp-session-id": "s-1"})
        if seen.method == "notifications/initialized":
            return 202, {}, b""
        if seen.method == "tools/list":
            return json_answer(result(seen, {"tools": [LOOKUP]}))
        if seen.method == "tools/call":
            self.calls += 1
            if self.calls <= self.failures:
                if self.how == "503":
                    return 503, {"content-type": "text/plain"}, b"upstream busy"
                raise ConnectionResetError("killed mid-call")  # the fixture hangs up
            text = f"found on call {self.calls}"
            return json_answer(result(seen, {"content": [{"type": "text", "text": text}]}))
        error = {"code": -32601, "message": "no"}
        return json_answer({"jsonrpc": "2.0", "id": 0, "error": error})


def _structured(answer: Any) -> dict[str, Any]:
    assert answer.is_error, answer
    structured: dict[str, Any] = answer.structured_content
    return structured


RETRY = {"maxAttempts": 3, "initialBackoffMs": 50, "maxBackoffMs": 100}


@pytest.mark.parametrize("how", ["drop", "503"])
async def test_a_read_only_call_that_fails_transiently_is_retried_until_it_succeeds(
    program: str, scripted: Start, how: str
) -> None:
    script = Failing(failures=2, how=how)
    upstream = await scripted(script)
    entry = server_entry("lib", upstream.url, policy={"retry": RETRY})
    async with bridge_of([entry]) as bridge:
        async with Client(bridge.url, mode="legacy") as agent:
            answer = await agent.call_tool("lib_lookup", {})
        lines = eventually("the audit line", bridge.audit_lines, 10, until=len)
    assert not answer.is_error, answer
    assert answer.content[0].text == "found on call 3"  # type: ignore[union-attr]
    assert script.calls == 3
    assert (lines[-1]["outcome"], lines[-1]["attempts"]) == ("ok", 3)


async def test_retries_end_after_max_attempts_with_the_structured_error(
    program: str, scripted: Start
) -> None:
    script = Failing(failures=99)
    upstream = await scripted(script)
    entry = server_entry("lib", upstream.url, policy={"retry": RETRY})
    async with bridge_of([entry]) as bridge:
        async with Client(bridge.url, mode="legacy") as agent:
            answer = await agent.call_tool("lib_lookup", {})
        lines = eventually("the audit line", bridge.audit_lines, 10, until=len)
    structured = _structured(answer)
    assert structured["code"] == "upstream_unavailable"
    assert structured["attempts"] == 3
    assert "could not be reached (tried 3 times)" in structured["hint"]
    assert "did not retry" not in structured["hint"]
    assert script.calls == 3
    assert (lines[-1]["outcome"], lines[-1]["attempts"]) == ("upstream_unavailable", 3)


async def test_retries_stay_within_the_calls_deadline(program: str, scripted: Start) -> None:
    script = Failing(failures=99)
    upstream = await scripted(script)
    # A wait drawn from [0, 60 s] after each failed attempt: almost never within the 1 s
    # deadline, and a wait that would pass it is not waited (the call ends at once).
    retry = {"maxAttempts": 5, "initialBackoffMs": 60000, "maxBackoffMs": 60000}
    entry = server_entry("lib", upstream.url, policy={"retry": retry, "timeoutSeconds": 1})
    async with bridge_of([entry]) as bridge, Client(bridge.url, mode="legacy") as agent:
        started = asyncio.get_running_loop().time()
        answer = await agent.call_tool("lib_lookup", {})
        took = asyncio.get_running_loop().time() - started
    assert _structured(answer)["code"] == "upstream_unavailable"
    assert took < 5.0, f"the call took {took:.1f} s"
    assert script.calls == _structured(answer)["attempts"]


async def test_the_circuit_opens_after_consecutive_failures_and_closes_on_a_good_trial(
    program: str, scripted: Start
) -> None:
    script = Failing(failures=2)
    upstream = await scripted(script)
    policy = {
        "retry": {"maxAttempts": 1},
        "circuitBreaker": {"failureThreshold": 2, "openSeconds": 2},
    }
    entry = server_entry("lib", upstream.url, policy=policy)
    async with bridge_of([entry]) as bridge:
        async with Client(bridge.url, mode="legacy") as agent:
            first = _structured(await agent.call_tool("lib_lookup", {}))
            second = _structured(await agent.call_tool("lib_lookup", {}))
            refused = _structured(await agent.call_tool("lib_lookup", {}))
            calls_while_open = script.calls
            await asyncio.sleep(2.2)
            trial = await agent.call_tool("lib_lookup", {})
            after = await agent.call_tool("lib_lookup", {})
        lines = eventually("five audit lines", bridge.audit_lines, 10, until=lambda x: len(x) >= 5)
    assert first["code"] == "upstream_unavailable" and first["retryAfterSeconds"] == 0
    assert "will not call this server" not in first["hint"]
    assert second["code"] == "upstream_unavailable" and second["retryAfterSeconds"] == 2
    assert "The bridge will not call this server for 2 s." in second["hint"]
    assert refused["code"] == "circuit_open"
    assert refused["server"] == "default/lib"
    assert 1 <= refused["retryAfterSeconds"] <= 2
    assert f"will try again in {refused['retryAfterSeconds']} s" in refused["hint"]
    assert calls_while_open == 2, "the refused call was not sent"
    assert not trial.is_error and not after.is_error
    assert script.calls == 4
    outcomes = [(line["outcome"], line["attempts"]) for line in lines[-5:]]
    assert outcomes == [
        ("upstream_unavailable", 1),
        ("upstream_unavailable", 1),
        ("circuit_open", 0),
        ("ok", 1),
        ("ok", 1),
    ]
