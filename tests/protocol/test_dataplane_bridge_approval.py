"""The compiled bridge's approval of held calls, held to the Python bridge's assertions.

The five approval tests of ``test_bridge_policies.py`` run here again, unchanged, against
``tests.support.dataplane``'s binary (the autouse fixture swaps the program
``tests.support.bridge_run.run_bridge`` starts, as ``test_dataplane_bridge.py`` does). None
of them relies on the Python bridge's defect (a) below: the webhook test's agent declares no
elicitation, and the agent tests configure no webhook, so none needed adapting.

The tests written here run against both bridges (``program``). Two of them hold the compiled
bridge to what the Python bridge gets wrong, and are expected to fail against it
(``xfail(strict=True)``, so that they are seen to catch the defect):

- (a) a run that names an approval webhook: an agent that declared elicitation is not asked,
  the webhook (set to refuse) is, and its refusal wins;
- (b) the question shows the arguments whole: the decisive part of an argument 2,500
  characters long is in it (the Python bridge cut it after 2,000 characters); arguments too
  long to show whole are not asked about at all, and the refusal says why (compiled only).

Defect (c), an answer from another session or one sent before the question, is held by the
home tests ``test_another_session_cannot_approve_a_sessions_held_call`` and
``test_a_2026_agent_cannot_approve_with_an_answer_sent_before_it_was_asked``.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, types

from tests.protocol.test_bridge_policies import (
    IDENTITY,
    Approvals,
    _pins,
    _structured,
    approving_bridge,
    test_a_2026_agent_cannot_approve_with_an_answer_sent_before_it_was_asked,
    test_a_destructive_tool_waits_for_the_webhook_which_approves_refuses_and_times_out,
    test_an_agent_that_declared_elicitation_approves_once_and_refuses_once,
    test_an_agent_that_does_not_answer_within_the_runs_wait_gets_approval_timeout,
    test_another_session_cannot_approve_a_sessions_held_call,
)
from tests.support import peers
from tests.support.bridge_choice import choose, started
from tests.support.bridge_run import run_bridge, server_entry
from tests.support.waiting import eventually

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("compiled_bridge")]

# The fixture and the tests of the home module that run here again (pytest collects them).
__all__ = [
    "approving_bridge",
    "test_a_2026_agent_cannot_approve_with_an_answer_sent_before_it_was_asked",
    "test_a_destructive_tool_waits_for_the_webhook_which_approves_refuses_and_times_out",
    "test_an_agent_that_declared_elicitation_approves_once_and_refuses_once",
    "test_an_agent_that_does_not_answer_within_the_runs_wait_gets_approval_timeout",
    "test_another_session_cannot_approve_a_sessions_held_call",
]

KEY = b"the-approval-key"
PYTHON_DEFECT = pytest.mark.xfail(strict=True, reason="a defect of the Python bridge")


@pytest.fixture(params=[pytest.param("python", marks=PYTHON_DEFECT), "compiled"])
def fixed_in(request: pytest.FixtureRequest) -> Iterator[str]:
    """Both bridges, for a test of a defect the Python bridge has: it must fail there."""
    yield from choose(request)


async def _destructive(url: str) -> dict[str, Any]:
    pins = await _pins(url)
    return server_entry("rug", url, toolDigests=pins, policy={"approveDestructive": True})


async def test_a_run_with_a_webhook_asks_only_the_webhook_not_the_agent(
    tmp_path: Path, fixed_in: str
) -> None:
    """Defect (a): the agent declared elicitation and would accept; the webhook refuses."""
    (tmp_path / "key").write_bytes(KEY)
    asked: list[str] = []

    async def accept(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    with peers.rug_pull_server() as url, Approvals(KEY, ["refuse:bob"]) as approvals:
        entry = await _destructive(url)
        webhook = {"url": approvals.url, "timeoutSeconds": 5, "secretFile": str(tmp_path / "key")}
        extra = {"identity": IDENTITY, "approval": {"webhook": webhook}}
        with run_bridge([entry], extra_config=extra) as bridge:
            started(bridge, fixed_in)
            async with Client(bridge.url, elicitation_callback=accept) as client:
                refused = await client.call_tool("rug_wipe", {"path": "/srv"})
            (line,) = eventually("the audit line", bridge.audit_lines, 10, until=len)
    assert asked == []  # the agent was not asked
    assert _structured(refused)["code"] == "approval_denied"
    assert "refused by bob" in _structured(refused)["hint"]
    assert len(approvals.seen) == 1 and approvals.seen[0]["arguments"] == {"path": "/srv"}
    assert line["policy"]["approval"]["by"] == "bob"


async def test_the_question_shows_an_argument_whole_past_2000_characters(fixed_in: str) -> None:
    """Defect (b): the decisive end of a long path is in the question the agent sees."""
    asked: list[str] = []

    async def decline(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="decline")

    path = "/tmp/" + "a" * 2500 + "/../../etc/passwd"
    with peers.rug_pull_server() as url:
        entry = await _destructive(url)
        with run_bridge([entry], extra_config={"identity": IDENTITY}) as bridge:
            started(bridge, fixed_in)
            async with Client(bridge.url, elicitation_callback=decline) as client:
                refused = await client.call_tool("rug_wipe", {"path": path})
    assert _structured(refused)["code"] == "approval_denied"
    assert len(asked) == 1 and json.dumps(path) in asked[0], asked[0][-200:]


async def test_arguments_too_long_to_show_whole_are_refused_without_asking() -> None:
    """The compiled bridge's bound of the question (16,384 characters of arguments): past it,
    nobody is asked, and the hint says why and what would do."""
    asked: list[str] = []

    async def accept(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    with peers.rug_pull_server() as url:
        entry = await _destructive(url)
        with run_bridge([entry], extra_config={"identity": IDENTITY}) as bridge:
            async with Client(bridge.url, elicitation_callback=accept) as client:
                refused = _structured(await client.call_tool("rug_wipe", {"path": "/" * 20000}))
            (line,) = eventually("the audit line", bridge.audit_lines, 10, until=len)
    assert asked == []
    assert refused["code"] == "approval_denied" and refused["approval"] == "unavailable"
    assert "too long to show in full" in refused["hint"] and "webhook" in refused["hint"]
    assert line["policy"] == {"approval": {"decision": "unavailable"}}


class SlowApprover:
    """An approval webhook that approves every call after ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["content-length"]))
                time.sleep(delay)
                answer = b'{"approved": true, "by": "carol"}'
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/approve"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


async def test_the_calls_timeout_starts_when_the_person_has_answered(
    tmp_path: Path, program: str
) -> None:
    """The server's timeout is 1 s and the person takes 1.5 s: the call is still sent, with
    its whole second, and the audit line counts the wait in its duration."""
    (tmp_path / "key").write_bytes(KEY)
    approver = SlowApprover(1.5)
    try:
        with peers.rug_pull_server() as url:
            pins = await _pins(url)
            policy = {"requireApproval": ["wipe"], "timeoutSeconds": 1}
            entry = server_entry("rug", url, toolDigests=pins, policy=policy)
            key = str(tmp_path / "key")
            webhook = {"url": approver.url, "timeoutSeconds": 5, "secretFile": key}
            with run_bridge([entry], extra_config={"approval": {"webhook": webhook}}) as bridge:
                started(bridge, program)
                async with Client(bridge.url) as client:
                    sent = await client.call_tool("rug_wipe", {"path": "/tmp/slow"})
                (line,) = eventually("the audit line", bridge.audit_lines, 10, until=len)
    finally:
        approver.close()
    text = sent.content[0]
    assert not sent.is_error and isinstance(text, types.TextContent)
    assert text.text == "wiped /tmp/slow"
    assert line["outcome"] == "ok" and line["durationMs"] >= 1400
    assert line["policy"]["approval"]["decision"] == "approved"
    assert line["policy"]["approval"]["by"] == "carol"


async def test_a_rules_approve_holds_the_call_for_the_webhook_with_its_reason(
    tmp_path: Path, program: str
) -> None:
    """A rule's ``approve`` holds the call as ``requireApproval`` does: the webhook is asked
    (with the rule named), its refusal wins, and a call the rule does not match is sent."""
    (tmp_path / "key").write_bytes(KEY)
    rule = {"match": "has(arguments.path) && arguments.path.startsWith('/srv')",
            "action": "approve", "reason": "wipes under /srv are reviewed"}  # fmt: skip
    with peers.rug_pull_server() as url, Approvals(KEY, ["refuse:bob"]) as approvals:
        pins = await _pins(url)
        entry = server_entry("rug", url, toolDigests=pins, policy={"rules": [rule]})
        webhook = {"url": approvals.url, "timeoutSeconds": 5, "secretFile": str(tmp_path / "key")}
        extra = {"identity": IDENTITY, "approval": {"webhook": webhook}}
        with run_bridge([entry], extra_config=extra) as bridge:
            started(bridge, program)
            async with Client(bridge.url) as client:
                refused = await client.call_tool("rug_wipe", {"path": "/srv/data"})
                sent = await client.call_tool("rug_wipe", {"path": "/tmp/x"})
            lines = eventually(
                "two audit lines", bridge.audit_lines, 10, until=lambda x: len(x) == 2
            )
    assert _structured(refused)["code"] == "approval_denied", refused
    assert "refused by bob" in _structured(refused)["hint"]
    assert len(approvals.seen) == 1 and approvals.seen[0]["arguments"] == {"path": "/srv/data"}
    assert not sent.is_error, sent
    assert [line["outcome"] for line in lines] == ["approval_denied", "ok"]
    assert lines[0]["policy"]["approval"]["by"] == "bob"
