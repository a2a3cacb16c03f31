"""Policies on the real node: one AgentRun's agent meets approval, rules, pins, a rate limit
and a fixed argument, through its bridge, against a server it cannot change the rules of.

The server is the official SDK's, on this machine at the node's bridge address, registered as
an external MCPServer; so is the approval webhook (the test's own, which checks the HMAC
signature, approves the first held call and refuses the second). The MCPServer's rules allow
``search_*`` only for the ``researcher`` ServiceAccount (the run's) and deny a query that
names a password; ``docs`` has a fixed ``space``; ``ping`` has a burst of 2. The run holds
``wipe`` for approval. The agent (the SDK's client) calls each, then calls ``change`` (the
server rewrites ``lookup``'s description and announces it): ``lookup`` is refused with
``definition_changed`` until the operator has re-pinned it and the bridge reloaded, and the
MCPServer's ``ToolsChanged`` condition and Event name the change.

A second run of the same server has no webhook: its agent declared elicitation, so the
bridge asks the agent itself, which approves, refuses, approves after longer than the call's
own timeout (which starts once approved) and answers too late, in both eras.
The server's ``wiped`` tells the test (directly, not through a bridge) which calls ran.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from mcp import Client

from tests.e2e.test_secret_hygiene import OPT_IN, secret
from tests.support import needs, objects, peers, pods
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.objects import condition, eventually, get, python_agent, ready

pytestmark = [pytest.mark.e2e, needs.mark(needs.image_tools_missing())]

HMAC_KEY = "appr0val-k3y"

PRELUDE = r"""
import asyncio, json, os, time
from mcp import Client, types

def brief(result):
    out = {"error": bool(result.is_error)}
    if result.structured_content:
        out.update(result.structured_content)  # code, hint and the facts
    out["text"] = " ".join(getattr(c, "text", "") for c in result.content)[:300]
    return out
"""

AGENT = (
    PRELUDE
    + r"""
async def main():
    out = {}
    async with Client(os.environ["MCP_BRIDGE_URL"], mode="auto", cache=None) as client:
        listed = await client.list_tools()
        out["tools"] = {t.name: t.input_schema for t in listed.tools}
        call = client.call_tool
        out["wipe1"] = brief(await call("pol_wipe", {"path": "/drafts/a"}))
        out["wipe2"] = brief(await call("pol_wipe", {"path": "/etc"}))
        out["search"] = brief(await call("pol_search_docs", {"query": "kopf"}))
        out["search_password"] = brief(await call("pol_search_docs", {"query": "root password"}))
        fixed = {"query": "x", "space": "secret"}
        out["search_space"] = brief(await call("pol_search_docs", fixed))
        out["pings"] = [brief(await call("pol_ping", {})) for _ in range(3)]
        out["lookup1"] = brief(await call("pol_lookup", {"word": "a"}))
        out["change"] = brief(await call("pol_change", {}))
        start = time.monotonic()
        while time.monotonic() - start < 30:  # the bridge re-lists on list_changed
            names = {t.name for t in (await client.list_tools()).tools}
            if "pol_lookup" not in names:
                break
            await asyncio.sleep(0.2)
        out["hidden_after_s"] = round(time.monotonic() - start, 1)
        out["after"] = []
        while time.monotonic() - start < 150:
            result = brief(await call("pol_lookup", {"word": "b"}))
            if not out["after"] or out["after"][-1] != result:
                out["after"].append(result)
            if not result["error"]:
                break
            await asyncio.sleep(2)
        out["repinned_after_s"] = round(time.monotonic() - start, 1)
    print("AGENT-RESULT " + json.dumps(out), flush=True)

asyncio.run(main())
"""
)


ASKED_TIMEOUT_SECONDS = 3
CALL_TIMEOUT_SECONDS = 2
SLOW_SECONDS = 2.5  # longer than the call's timeout, within the run's wait
MODES = ("legacy", "2026-07-28")

ASKED_AGENT = (
    PRELUDE
    + r"""
async def main():
    out = {}
    for mode in ("legacy", "2026-07-28"):
        answers, seen = ["accept", "decline", "slow", "late"], []

        async def elicit(context, params):
            answer = answers.pop(0)
            seen.append({"message": params.message, "schema": params.requested_schema})
            if answer == "decline":
                return types.ElicitResult(action="decline")
            if answer == "slow":  # longer than the call's timeout, within the run's wait
                await asyncio.sleep(2.5)  # SLOW_SECONDS
            if answer == "late":  # the human answers after the run's wait
                await asyncio.sleep(5)
            return types.ElicitResult(action="accept", content={"approve": True})

        url = os.environ["MCP_BRIDGE_URL"]
        calls = {}
        async with Client(url, mode=mode, cache=None, elicitation_callback=elicit) as client:
            for answer in ("accept", "decline", "slow", "late"):
                start = time.monotonic()
                result = await client.call_tool("pol_wipe", {"path": f"/{mode}/{answer}"})
                calls[answer] = brief(result) | {"took_s": round(time.monotonic() - start, 1)}
            calls["lookup"] = brief(await client.call_tool("pol_lookup", {"word": "w"}))
        out[mode] = {"calls": calls, "seen": seen}
    print("AGENT-RESULT " + json.dumps(out), flush=True)

asyncio.run(main())
"""
)


@contextmanager
def policies_server(cluster: Cluster, namespace: str) -> Iterator[str]:
    """``tests/support/policy_server.py`` on the node's bridge address, registered as the
    MCPServer ``pol`` and Ready (yields its URL)."""
    assert cluster.plane.node is not None
    with peers.rug_pull_server(host=cluster.plane.node.ip) as url:
        cluster.kubectl(
            "label", "namespace", namespace, "mcp-operator.dev/private-destinations=allowed"
        )
        cluster.apply(namespace, mcpserver(url))
        ready(cluster, namespace, "mcpserver", "pol")
        yield url


def wiped(url: str) -> list[str]:
    """What the server itself says was wiped (asked directly, not through any bridge)."""

    async def read() -> list[str]:
        async with Client(url, cache=None) as client:
            result = await client.call_tool("wiped", {})
        paths: list[str] = json.loads(result.content[0].text)  # type: ignore[union-attr]
        return paths

    return asyncio.run(read())


def finished(
    cluster: Cluster, namespace: str, run: dict[str, Any], operator: OperatorProcess
) -> pods.FinishedRun:
    """Apply the run and wait for its Pod to end (printing both logs)."""
    cluster.apply(namespace, run)
    try:
        eventually("the agent Pod", lambda: get(cluster, namespace, "pod", "agent"), 60)
    except AssertionError:
        print(json.dumps(get(cluster, namespace, "agentrun", "agent"), indent=1))
        print(operator.log()[-3000:])
        raise
    done = pods.finished_run(cluster, namespace, "agent")
    print(done.show())
    return done


@contextmanager
def webhook(host: str) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The test's approval webhook: checks the signature, approves the first call, refuses
    the rest (yields its URL and the bodies it was sent)."""
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            mac = hmac.new(HMAC_KEY.encode(), body, hashlib.sha256).hexdigest()
            signed = self.headers.get("x-mcp-operator-signature") == f"sha256={mac}"
            held = json.loads(body)
            held["signed"] = signed
            seen.append(held)
            answer = {"approved": signed and len(seen) == 1, "by": "alice"}
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer((host, 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{httpd.server_address[1]}/approve", seen
    finally:
        httpd.shutdown()
        httpd.server_close()


def mcpserver(url: str) -> dict[str, Any]:
    search = "tool.name.startsWith('search_')"
    return {
        "apiVersion": "mcp-operator.dev/v1alpha1",
        "kind": "MCPServer",
        "metadata": {"name": "pol"},
        "spec": {
            "mode": "external",
            "url": url,
            "probe": {"intervalSeconds": 10},
            "toolsOverride": [{"name": "search_docs", "fixedArguments": {"space": "public"}}],
            "policy": {
                "rules": [
                    {
                        "match": "has(arguments.query) && arguments.query.matches('(?i)password')",
                        "action": "deny",
                        "reason": "do not search for credentials",
                    },
                    {
                        "match": f"{search} && caller.serviceAccount == 'researcher'",
                        "action": "allow",
                    },
                    {"match": search, "action": "deny", "reason": "search is for researchers"},
                ],
                "rateLimits": [{"tools": ["ping"], "perMinute": 6, "burst": 2}],
            },
        },
    }


def agentrun(image: str, hook: str) -> dict[str, Any]:
    return {
        "apiVersion": "mcp-operator.dev/v1alpha1",
        "kind": "AgentRun",
        "metadata": {"name": "agent"},
        "spec": {
            "mcpServers": [{"name": "pol"}],
            "agent": {
                "image": image,
                "command": ["python", "-c", AGENT],
                "serviceAccountName": "researcher",
            },
            "bridge": {
                "policy": {"requireApproval": ["wipe"]},
                "approval": {
                    "webhook": {
                        "url": hook,
                        "timeoutSeconds": 20,
                        "secretRef": {"name": "approvals", "key": "hmac-key"},
                    }
                },
            },
        },
    }


def test_one_run_meets_approval_rules_pins_rate_limits_and_fixed_arguments(
    node_cluster: Cluster,
    node_images: dict[str, str],
    node_operator: OperatorProcess,
    node_namespace: str,
) -> None:
    cluster, namespace = node_cluster, node_namespace
    assert cluster.plane.node is not None
    host = cluster.plane.node.ip
    with policies_server(cluster, namespace) as url, webhook(host) as (hook, seen):
        account = {"name": "researcher", "labels": OPT_IN}
        cluster.apply(
            namespace, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": account}
        )
        cluster.apply(namespace, secret("approvals", {"hmac-key": HMAC_KEY}))
        done = finished(
            cluster, namespace, agentrun(node_images["mcp-operator"], hook), node_operator
        )
        agent_log, bridge_log = done.agent_log, done.bridge_log
        assert pods.phase(done.pod) == "Succeeded"
        server = get(cluster, namespace, "mcpserver", "pol")
        listed = json.loads(cluster.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)
        wiped_paths = wiped(url)
    line = next(x for x in agent_log.splitlines() if x.startswith("AGENT-RESULT "))
    out = json.loads(line.removeprefix("AGENT-RESULT "))

    # Approval through the test's webhook: signed, approved once, refused once.
    assert out["wipe1"]["error"] is False and "wiped /drafts/a" in out["wipe1"]["text"]
    assert out["wipe2"]["code"] == "approval_denied"
    assert [(h["tool"], h["arguments"], h["signed"]) for h in seen] == [
        ("pol_wipe", {"path": "/drafts/a"}, True),
        ("pol_wipe", {"path": "/etc"}, True),
    ]
    assert seen[0]["identity"]["serviceAccount"] == "researcher"
    assert wiped_paths == ["/drafts/a"]  # the refused call never reached the server
    # Rules: search_* for the researcher, never a password; the fixed space is ours.
    assert out["search"]["error"] is False and "found kopf in public" in out["search"]["text"]
    assert out["search_password"]["code"] == "policy_denied"
    assert "credentials" in out["search_password"]["hint"]
    assert "space" not in out["tools"]["pol_search_docs"].get("properties", {})
    assert out["search_space"]["code"] == "invalid_arguments"
    # Rate limit: a burst of 2, the third refused with when to retry.
    assert [p["error"] for p in out["pings"]] == [False, False, True]
    limited = out["pings"][2]
    assert limited["code"] == "rate_limited" and limited["retryAfterMs"] > 0
    # Pins: the changed lookup is refused until re-pinned, then callable.
    assert out["lookup1"]["error"] is False and out["change"]["error"] is False
    assert out["hidden_after_s"] < 30, out  # left out of tools/list while it drifted
    assert out["after"][0]["code"] == "definition_changed" and out["repinned_after_s"] < 150
    assert out["after"][-1]["error"] is False, out["after"]
    changed = condition(server, "ToolsChanged")
    assert changed.get("status") == "True" and "lookup" in changed.get("message", "")
    events = [e["message"] for e in listed["items"] if e.get("reason") == "ToolsChanged"]
    assert any("lookup" in message for message in events), events
    audit = [json.loads(x) for x in bridge_log.splitlines() if x.startswith("{")]
    wipes = [a for a in audit if a.get("tool") == "pol_wipe"]
    assert [a["outcome"] for a in wipes] == ["ok", "approval_denied"]
    assert HMAC_KEY not in bridge_log + agent_log + node_operator.log()


def test_an_agent_that_declared_elicitation_approves_refuses_and_times_out_through_its_bridge(
    node_cluster: Cluster,
    node_images: dict[str, str],
    node_operator: OperatorProcess,
    node_namespace: str,
) -> None:
    """The same server and ``requireApproval: [wipe]``, no webhook: the run's agent (the SDK's
    client with an elicitation callback, once per era) is asked itself, and accepts, declines,
    accepts after 2.5 s (more than the call's 2 s timeout, which starts once approved), then
    answers after the run's ``approval.elicitation.timeoutSeconds``. Only the approved
    calls reach the server (it says so itself); the agent sees each refusal's code and hint;
    the bridge audits decision, who answered and how long it waited."""
    cluster, namespace = node_cluster, node_namespace
    agent = python_agent(node_images["mcp-operator"], ASKED_AGENT)
    approval = {"elicitation": {"timeoutSeconds": ASKED_TIMEOUT_SECONDS}}
    policy = {"requireApproval": ["wipe"], "timeoutSeconds": CALL_TIMEOUT_SECONDS}
    bridge = {"policy": policy, "approval": approval}
    run = objects.agentrun("agent", ["pol"], agent, bridge=bridge)
    with policies_server(cluster, namespace) as url:
        done = finished(cluster, namespace, run, node_operator)
        assert pods.phase(done.pod) == "Succeeded"
        wiped_paths = wiped(url)
    out = pods.marked(done.agent_log, "AGENT-RESULT")

    # What the server did: the approved calls only (never the declined or the late one).
    assert wiped_paths == [f"/{mode}/{answer}" for mode in MODES for answer in ("accept", "slow")]
    for mode in MODES:
        calls, seen = out[mode]["calls"], out[mode]["seen"]
        for approved in ("accept", "slow"):  # slow: approved after 2.5 s, then its own 2 s
            assert calls[approved]["error"] is False, calls[approved]
            assert calls[approved]["text"] == f"wiped /{mode}/{approved}"
        declined, late = calls["decline"], calls["late"]
        assert declined["code"] == "approval_denied" and declined["approval"] == "denied"
        assert "refused by agent" in declined["hint"] and "not sent" in declined["hint"]
        assert late["code"] == "approval_timeout" and late["approval"] == "timeout"
        assert late["timeoutSeconds"] == ASKED_TIMEOUT_SECONDS
        assert f"nobody answered within {ASKED_TIMEOUT_SECONDS} s" in late["hint"]
        # A legacy agent hears the refusal at the deadline, while its human still thinks; a
        # 2026-07-28 agent when it comes back with the late answer (5 s), which counts not.
        if mode == "legacy":
            assert ASKED_TIMEOUT_SECONDS <= late["took_s"] < 5, late
        else:
            assert 5 <= late["took_s"] < 8, late
        assert calls["lookup"]["error"] is False  # not held: nobody asked
        assert len(seen) == 4  # one question per held call, none for lookup
        for question, answer in zip(seen, ("accept", "decline", "slow", "late"), strict=True):
            assert "pol_wipe" in question["message"] and f"/{mode}/{answer}" in question["message"]
            assert question["schema"]["required"] == ["approve"]
    # The bridge's audit: decision, who answered, how long it waited.
    audit = [json.loads(x) for x in done.bridge_log.splitlines() if x.startswith("{")]
    wipes = [a for a in audit if a.get("tool") == "pol_wipe"]
    outcomes = ["ok", "approval_denied", "ok", "approval_timeout"] * 2
    assert [a["outcome"] for a in wipes] == outcomes
    decisions = [a["policy"]["approval"] for a in wipes]
    assert [(d["decision"], d["by"]) for d in decisions] == [
        ("approved", "agent"),
        ("denied", "agent"),
        ("approved", "agent"),
        ("timeout", "agent"),
    ] * 2
    slow = [d["waitedMs"] for d in decisions[2::4]]
    assert all(SLOW_SECONDS * 1000 <= w < ASKED_TIMEOUT_SECONDS * 1000 for w in slow), slow
    timeouts = [d["waitedMs"] for d in decisions if d["decision"] == "timeout"]
    # The event loop's timers may fire a clock tick early: 2999.9 ms for a 3 s wait.
    low, high = ASKED_TIMEOUT_SECONDS * 1000 - 50, ASKED_TIMEOUT_SECONDS * 1000 + 1500
    assert all(low <= waited < high for waited in timeouts), timeouts
    assert all(d["waitedMs"] < 1000 for d in decisions[0::4] + decisions[1::4])
    lookups = [a for a in audit if a.get("tool") == "pol_lookup"]
    assert len(lookups) == 2 and all("approval" not in a.get("policy", {}) for a in lookups)
