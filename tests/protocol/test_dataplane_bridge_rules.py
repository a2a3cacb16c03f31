"""The compiled bridge's authorization rules, held to the Python bridge's assertions.

The home test of ``test_bridge_policies.py`` that the compiled bridge serves runs here again
against ``tests.support.dataplane``'s binary (the autouse fixture swaps the program
``tests.support.bridge_run.run_bridge`` starts, as ``test_dataplane_bridge.py`` does). The
tests written here run against both bridges (``program``) and assert the same observable
behaviour: a tool denied whatever the arguments is left out of ``tools/list`` and refused
with ``policy_denied``, a rule that cannot be evaluated fails closed, and a rule reads a
tool's annotations only when the tool has its pin.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from tests.protocol.test_bridge_policies import (
    IDENTITY,
    _pins,
    managed_url,
    test_rules_decide_by_service_account_and_arguments_on_server_everything,
)
from tests.support import needs
from tests.support.bridge_choice import started
from tests.support.bridge_run import run_bridge, server_entry
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.timeout(180),
    needs.mark(needs.node_missing()),
    pytest.mark.usefixtures("compiled_bridge"),
]

# The fixture and the test of the home module that run here again (pytest collects them).
__all__ = [
    "managed_url",
    "test_rules_decide_by_service_account_and_arguments_on_server_everything",
]

MARKER = "sekrit-9f41"


def _structured(result: Any) -> dict[str, Any]:
    assert result.is_error, result
    structured: dict[str, Any] = result.structured_content
    return structured


async def test_a_tool_denied_whatever_the_arguments_is_not_listed_and_refused(
    managed_url: str, program: str
) -> None:
    rules = [
        {"match": "tool.name == 'get-env'", "action": "deny", "reason": "no environment"},
        # Reads the arguments before it denies: the tool stays listed, each call decided.
        {"match": "tool.name == 'echo' && arguments.message == 'stop'", "action": "deny"},
        {"match": "tool.name == 'echo'", "action": "deny"},
        {"match": "tool.name == 'get-sum'", "action": "deny", "layer": "run"},
    ]
    entry = server_entry("ev", managed_url, policy={"rules": rules})
    with run_bridge([entry], extra_config={"identity": IDENTITY}) as bridge:
        started(bridge, program)
        async with Client(bridge.url) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            env = _structured(await client.call_tool("ev_get-env", {}))
            summed = _structured(await client.call_tool("ev_get-sum", {"a": 1, "b": 2}))
            echoed = _structured(await client.call_tool("ev_echo", {"message": MARKER}))
        assert "ev_get-env" not in names and "ev_get-sum" not in names
        assert "ev_echo" in names
        assert env["code"] == "policy_denied" and env["rule"] == "server rule 0"
        assert env["action"] == "deny"
        assert env["hint"] == (
            "no environment (the server rule 0 of the policy refused ev_get-env; the call was "
            "not sent). Calling again with the same arguments will be refused the same way."
        )
        assert summed["code"] == "policy_denied" and summed["rule"] == "run rule 0"
        assert summed["hint"].startswith("a policy rule does not allow this call (the run rule 0")
        assert echoed["code"] == "policy_denied" and echoed["rule"] == "server rule 2"
        lines = eventually("three audit lines", bridge.audit_lines, 10, until=len)
        policies = [line.get("policy") for line in lines]
        assert {"rule": "run rule 0", "action": "deny"} in policies
        assert all(line["outcome"] == "policy_denied" for line in lines)
        assert MARKER not in bridge.log()


async def test_a_rule_that_cannot_be_evaluated_fails_closed(managed_url: str, program: str) -> None:
    rules = [
        # Without a pin a tool has no annotations: for get-env this deny cannot be evaluated
        # and reads no arguments, so it holds whatever the arguments: not listed.
        {"match": "tool.name == 'get-env' && tool.annotations.readOnlyHint == true",
         "action": "deny"},
        # arguments.path is not in echo's arguments: this deny counts as matching.
        {"match": "tool.name == 'echo' && arguments.path.startsWith('/etc')", "action": "deny",
         "reason": "no system paths"},
        # An allow that cannot be evaluated does not match: the deny after it decides.
        {"match": "arguments.a + 'x' == 'y'", "action": "allow"},
        {"match": "tool.name == 'get-sum'", "action": "deny", "reason": "sums are off"},
    ]  # fmt: skip
    entry = server_entry("ev", managed_url, policy={"rules": rules})
    with run_bridge([entry], extra_config={"identity": IDENTITY}) as bridge:
        started(bridge, program)
        async with Client(bridge.url) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            echoed = _structured(await client.call_tool("ev_echo", {"message": MARKER}))
            summed = _structured(await client.call_tool("ev_get-sum", {"a": 1, "b": 2}))
        assert "ev_echo" in names and "ev_get-sum" in names
        assert "ev_get-env" not in names
        assert echoed["code"] == "policy_denied" and echoed["rule"] == "server rule 1"
        assert echoed["hint"].startswith("no system paths (the server rule 1")
        assert summed["code"] == "policy_denied" and summed["rule"] == "server rule 3"
        assert summed["hint"].startswith("sums are off")
        eventually("two audit lines", bridge.audit_lines, 10, until=len)
        assert MARKER not in bridge.log()


async def test_a_rule_reads_the_annotations_only_of_a_pinned_definition(
    managed_url: str, program: str
) -> None:
    with run_bridge([server_entry("ev", managed_url)]) as bridge:
        async with Client(bridge.url) as client:
            tools = (await client.list_tools()).tools
    echo = next(t for t in tools if t.name == "ev_echo")
    assert echo.annotations is not None and echo.annotations.read_only_hint is True
    everything = {t.name for t in tools}
    rules = [{"match": "tool.annotations == {}", "action": "deny", "reason": "review it"}]
    pins = await _pins(managed_url)
    but_echo = {name: digest for name, digest in pins.items() if name != "echo"}
    for digests, shown in [
        (None, set()),  # no pins: no annotations are trusted
        (pins, everything),
        (but_echo, everything - {"ev_echo"}),  # echo has no pin: its annotations are not read
    ]:
        extra = {} if digests is None else {"toolDigests": digests}
        entry = server_entry("ev", managed_url, policy={"rules": rules}, **extra)
        with run_bridge([entry]) as bridge:
            started(bridge, program)
            async with Client(bridge.url) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                echoed = await client.call_tool("ev_echo", {"message": "hi"})
        assert names == shown, digests
        if "ev_echo" in shown:
            assert not echoed.is_error
        else:
            refused = _structured(echoed)
            assert refused["code"] == "policy_denied" and refused["hint"].startswith("review it")
