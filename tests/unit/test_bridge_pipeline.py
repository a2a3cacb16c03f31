"""The one call pipeline (mcp_operator.bridge.pipeline): every outcome code reachable with
its hint, retries only for read-only or idempotent tools, the breaker per server, hooks on
every call, PII both ways, and audit lines without values. The upstream is a scripted fake
and the clock is passed in, so nothing sleeps except the one timeout test."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from mcp_operator.api.bridge import BridgeConfig, UpstreamServer
from mcp_operator.bridge.catalog import build_catalog
from mcp_operator.bridge.errors import (
    ERROR_CODES,
    CallCancelled,
    ToolError,
    UpstreamRejected,
    UpstreamUnavailable,
)
from mcp_operator.bridge.hooks import Call, CallOutcome, PiiHook
from mcp_operator.bridge.pii import MAX_SCAN_CHARS, PiiScanner
from mcp_operator.bridge.pii_detectors import builtin_detectors
from mcp_operator.bridge.pipeline import CallPipeline, CallReport
from mcp_operator.mcp.failures import McpFailure

MARKER = "alice@example.com"

ISSUE_SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
    "required": ["title"],
}
TOOLS: dict[str, list[dict[str, Any]]] = {
    "tools/github": [
        {
            "name": "get_issue",
            "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": True},
        },
        {"name": "create_issue", "inputSchema": ISSUE_SCHEMA},
        {
            "name": "close_issue",
            "inputSchema": {"type": "object"},
            "annotations": {"idempotentHint": True},
        },
        {"name": "delete_repo", "inputSchema": {"type": "object"}},
        {"name": "odd", "inputSchema": {"type": "objekt"}},
    ],
    "tools/mail": [{"name": "send", "inputSchema": {"type": "object"}}],
}


def bridge_config(filters: list[dict[str, Any]] | None = None, **policy: Any) -> BridgeConfig:
    github_policy = {
        "timeoutSeconds": 30,
        "circuitBreaker": {"failureThreshold": 3, "openSeconds": 30},
    }
    return BridgeConfig.model_validate(
        {
            "run": {"name": "triage", "namespace": "agents"},
            "servers": [
                {
                    "name": "github",
                    "namespace": "tools",
                    "url": "http://github.tools:8080/mcp",
                    "prefix": "gh",
                    "filters": filters or [{"deny": ["delete_*"]}],
                    "policy": github_policy | policy,
                },
                {
                    "name": "mail",
                    "namespace": "tools",
                    "url": "http://mail.tools:8080/mcp",
                    "prefix": "mail",
                    "policy": {"pii": {"arguments": "block", "results": "redact"}},
                },
            ],
        }
    )


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.t

    def now(self) -> datetime:
        return datetime(2026, 12, 1, 7, 0, tzinfo=UTC)

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds


def ok(text: str = "done") -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


class Upstream:
    """Answers each tool from a script of results and exceptions, and records every call."""

    def __init__(self) -> None:
        self.script: dict[str, list[Any]] = {}
        self.calls: list[tuple[str, str, Mapping[str, Any]]] = []
        self.hang = asyncio.Event()

    async def __call__(
        self, server: UpstreamServer, tool: str, arguments: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        self.calls.append((f"{server.namespace}/{server.name}", tool, arguments))
        steps = self.script.get(tool) or [ok()]
        step = steps.pop(0) if len(steps) > 1 else steps[0]
        if step == "hang":
            await self.hang.wait()
        if isinstance(step, BaseException):
            raise step
        return step  # type: ignore[no-any-return]


class Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str | None]] = []

    def before_call(self, call: Call) -> ToolError | None:
        code = call.refusal.code if call.refusal else None
        self.seen.append(("before", call.exposed_name, code))
        return None

    def after_call(self, call: Call, outcome: CallOutcome) -> None:
        code = outcome.error.code if outcome.error else None
        self.seen.append(("after", call.exposed_name, code))


class Setup:
    def __init__(self, **policy: Any) -> None:
        self.config = bridge_config(**policy)
        self.clock = Clock()
        self.upstream = Upstream()
        self.recorder = Recorder()
        self.pipeline = CallPipeline(
            self.config,
            build_catalog(self.config.servers, TOOLS),
            upstream=self.upstream,
            clock=self.clock,
            random=lambda: 0.5,
            hooks=[PiiHook(PiiScanner(builtin_detectors())), self.recorder],
        )

    async def call(self, name: str, arguments: Any = None) -> CallReport:
        return await self.pipeline.call(name, arguments)


def structured(report: CallReport) -> dict[str, Any]:
    assert report.result["isError"] is True
    text = report.result["content"][0]["text"]
    content = report.result["structuredContent"]
    assert text.startswith(f"{content['code']}: ")
    assert report.audit.outcome == content["code"]
    return content  # type: ignore[no-any-return]


@pytest.fixture
def setup() -> Setup:
    return Setup()


# the path of a good call


async def test_a_valid_call_goes_to_its_server_under_its_original_name(setup: Setup) -> None:
    setup.upstream.script["get_issue"] = [ok("issue 7")]
    report = await setup.call("gh_get_issue", {"number": 7})
    assert report.result == ok("issue 7")
    assert setup.upstream.calls == [("tools/github", "get_issue", {"number": 7})]
    audit = report.audit
    assert (audit.outcome, audit.attempts, audit.server, audit.original_tool) == (
        "ok",
        1,
        "tools/github",
        "get_issue",
    )
    assert audit.run == "agents/triage" and audit.tool == "gh_get_issue"


async def test_missing_arguments_are_sent_as_an_empty_object(setup: Setup) -> None:
    await setup.call("gh_get_issue")
    assert setup.upstream.calls[0][2] == {}


# validation


async def test_an_unknown_tool_is_not_allowlisted_and_similar_ones_are_named(
    setup: Setup,
) -> None:
    report = await setup.call("gh_get_isue", {})
    content = structured(report)
    assert content["code"] == "not_allowlisted"
    assert "gh_get_issue" in content["hint"] and content["similar"][0] == "gh_get_issue"
    assert setup.upstream.calls == [] and report.audit.attempts == 0
    assert report.audit.server is None


async def test_a_tool_removed_by_a_filter_is_not_allowlisted(setup: Setup) -> None:
    report = await setup.call("gh_delete_repo", {})
    assert structured(report)["code"] == "not_allowlisted"
    assert setup.upstream.calls == []


async def test_a_refusal_with_nothing_similar_names_the_tools_the_agent_may_call(
    setup: Setup,
) -> None:
    content = structured(await setup.call("gh_zzz", {}))
    same_server = [n for n in setup.pipeline.catalog.names() if n.startswith("gh_")]
    assert same_server and content["similar"] == [] and content["allowed"] == same_server[:10]
    assert all(name in content["hint"] for name in content["allowed"])


async def test_a_narrower_filter_applies_even_before_the_catalog_is_rebuilt(setup: Setup) -> None:
    narrower = bridge_config(filters=[{"deny": ["delete_*"]}, {"allow": ["get_*"]}])
    setup.pipeline.reconfigure(narrower, setup.pipeline.catalog)
    report = await setup.call("gh_create_issue", {"title": "t"})
    assert structured(report)["code"] == "not_allowlisted"
    assert setup.upstream.calls == []


async def test_invalid_arguments_are_refused_before_the_call_with_the_path(setup: Setup) -> None:
    report = await setup.call("gh_create_issue", {"body": MARKER})
    content = structured(report)
    assert content["code"] == "invalid_arguments"
    assert "$.title" in content["hint"] and content["fields"][0]["path"] == "$.title"
    assert setup.upstream.calls == []
    assert MARKER not in json.dumps(report.result)


async def test_hooks_fire_on_every_call_also_when_validation_fails(setup: Setup) -> None:
    await setup.call("nope", {})
    await setup.call("gh_create_issue", {})
    await setup.call("gh_get_issue", {})
    assert setup.recorder.seen == [
        ("before", "nope", "not_allowlisted"),
        ("after", "nope", "not_allowlisted"),
        ("before", "gh_create_issue", "invalid_arguments"),
        ("after", "gh_create_issue", "invalid_arguments"),
        ("before", "gh_get_issue", None),
        ("after", "gh_get_issue", None),
    ]


async def test_a_broken_schema_forwards_the_call_and_flags_the_audit(setup: Setup) -> None:
    report = await setup.call("gh_odd", {"x": 1})
    assert report.result == ok()
    assert setup.upstream.calls == [("tools/github", "odd", {"x": 1})]
    assert report.audit.schema_unchecked
    assert json.loads(report.audit.to_json_line())["schemaUnchecked"] is True


async def test_a_rejection_after_an_unchecked_call_says_the_schema_was_broken(setup: Setup) -> None:
    setup.upstream.script["odd"] = [UpstreamRejected("missing field q", -32602)]
    report = await setup.call("gh_odd", {"x": 1})
    content = structured(report)
    assert content["code"] == "upstream_error"
    assert "missing field q" in content["hint"] and "schema is broken" in content["hint"]


# PII


async def test_block_mode_stops_a_call_carrying_an_email_address(setup: Setup) -> None:
    report = await setup.call("mail_send", {"to": MARKER})
    content = structured(report)
    assert content["code"] == "pii_blocked" and content["kinds"] == {"email": 1}
    assert setup.upstream.calls == []
    assert report.audit.pii == {"arguments": {"email": 1}}
    assert MARKER not in json.dumps(report.result)


async def test_redact_mode_rewrites_arguments_before_they_leave() -> None:
    setup = Setup(pii={"arguments": "redact"})
    await setup.call("gh_get_issue", {"q": f"by {MARKER}"})
    assert setup.upstream.calls[0][2] == {"q": "by [REDACTED:email]"}


async def test_results_are_redacted_before_the_agent_sees_them(setup: Setup) -> None:
    setup.upstream.script["send"] = [ok(f"delivered to {MARKER}")]
    report = await setup.call("mail_send", {"to": "the team"})
    assert report.result == ok("delivered to [REDACTED:email]")
    assert report.audit.outcome == "ok" and report.audit.pii == {"results": {"email": 1}}


# upstream failures


async def test_a_failing_non_idempotent_tool_is_called_once(setup: Setup) -> None:
    setup.upstream.script["create_issue"] = [UpstreamUnavailable("connection refused")]
    report = await setup.call("gh_create_issue", {"title": "t"})
    content = structured(report)
    assert content["code"] == "upstream_unavailable"
    assert len(setup.upstream.calls) == 1 and setup.clock.sleeps == []
    assert "not marked read-only or idempotent" in content["hint"]
    assert "tools/github" in content["hint"] and "connection refused" in content["hint"]
    assert report.audit.attempts == 1


@pytest.mark.parametrize("tool", ["gh_get_issue", "gh_close_issue"])
async def test_a_read_only_or_idempotent_tool_is_retried_twice_with_backoff(
    setup: Setup, tool: str
) -> None:
    original = tool.removeprefix("gh_")
    flaky = UpstreamUnavailable("503")
    setup.upstream.script[original] = [flaky, flaky, ok("third time")]
    report = await setup.call(tool, {})
    assert report.result == ok("third time")
    assert report.audit.attempts == 3 and report.audit.outcome == "ok"
    assert setup.clock.sleeps == [pytest.approx(0.05), pytest.approx(0.1)]  # jitter 0.5 x bound


async def test_retries_end_with_the_structured_error(setup: Setup) -> None:
    setup.upstream.script["get_issue"] = [UpstreamUnavailable("reset")]
    report = await setup.call("gh_get_issue", {})
    content = structured(report)
    assert content["code"] == "upstream_unavailable" and content["attempts"] == 3
    assert "tried 3 times" in content["hint"]
    assert len(setup.upstream.calls) == 3


async def test_a_json_rpc_error_is_an_upstream_error_and_never_retried(setup: Setup) -> None:
    setup.upstream.script["get_issue"] = [UpstreamRejected("unknown repository", -32602)]
    report = await setup.call("gh_get_issue", {})
    content = structured(report)
    assert content["code"] == "upstream_error" and content["rpcCode"] == -32602
    assert "unknown repository" in content["hint"]
    assert len(setup.upstream.calls) == 1


async def test_a_tool_error_result_is_passed_through_and_audited(setup: Setup) -> None:
    failed = {"content": [{"type": "text", "text": "no such issue"}], "isError": True}
    setup.upstream.script["get_issue"] = [failed]
    report = await setup.call("gh_get_issue", {})
    assert report.result == failed
    assert report.audit.outcome == "upstream_error"


async def test_an_unexpected_exception_becomes_a_structured_error(setup: Setup) -> None:
    setup.upstream.script["get_issue"] = [KeyError("bug")]
    report = await setup.call("gh_get_issue", {})
    content = structured(report)
    assert content["code"] == "upstream_unavailable" and "KeyError" in content["hint"]
    assert len(setup.upstream.calls) == 1


async def test_a_call_past_its_deadline_times_out() -> None:
    setup = Setup(timeoutSeconds=1)
    setup.upstream.script["get_issue"] = ["hang"]
    report = await setup.call("gh_get_issue", {})
    content = structured(report)
    assert content["code"] == "timeout" and content["timeoutSeconds"] == 1
    assert "within 1 s" in content["hint"] and "may still have run" in content["hint"]


# the circuit breaker


async def test_the_circuit_opens_after_consecutive_failures_and_says_for_how_long(
    setup: Setup,
) -> None:
    setup.upstream.script["create_issue"] = [UpstreamUnavailable("refused")]
    for _ in range(3):
        await setup.call("gh_create_issue", {"title": "t"})
    setup.clock.t += 10
    report = await setup.call("gh_create_issue", {"title": "t"})
    content = structured(report)
    assert content["code"] == "circuit_open" and content["retryAfterSeconds"] == 20
    assert "tools/github" in content["hint"] and "20 s" in content["hint"]
    assert len(setup.upstream.calls) == 3 and report.audit.attempts == 0


async def test_the_last_failure_that_opens_the_circuit_says_so(setup: Setup) -> None:
    setup.upstream.script["create_issue"] = [UpstreamUnavailable("refused")]
    reports = [await setup.call("gh_create_issue", {"title": "t"}) for _ in range(3)]
    assert "will not call this server for 30 s" in structured(reports[-1])["hint"]


async def test_one_server_down_leaves_the_others_working(setup: Setup) -> None:
    setup.upstream.script["create_issue"] = [UpstreamUnavailable("refused")]
    for _ in range(4):
        await setup.call("gh_create_issue", {"title": "t"})
    report = await setup.call("mail_send", {"to": "the team"})
    assert report.result == ok() and report.audit.outcome == "ok"


async def test_the_circuit_closes_when_the_server_is_back(setup: Setup) -> None:
    setup.upstream.script["create_issue"] = [UpstreamUnavailable("refused")]
    for _ in range(3):
        await setup.call("gh_create_issue", {"title": "t"})
    setup.upstream.script["create_issue"] = [ok("back")]
    setup.clock.t += 31
    assert (await setup.call("gh_create_issue", {"title": "t"})).result == ok("back")
    assert (await setup.call("gh_create_issue", {"title": "t"})).audit.outcome == "ok"


async def test_a_reconfiguration_keeps_the_breaker_state(setup: Setup) -> None:
    setup.upstream.script["create_issue"] = [UpstreamUnavailable("refused")]
    for _ in range(3):
        await setup.call("gh_create_issue", {"title": "t"})
    setup.pipeline.reconfigure(bridge_config(), setup.pipeline.catalog)
    report = await setup.call("gh_create_issue", {"title": "t"})
    assert report.audit.outcome == "circuit_open"


# hooks that fail, and the audit


class Crashing:
    name = "crashing"

    def __init__(self, when: str) -> None:
        self.when = when

    def before_call(self, call: Call) -> ToolError | None:
        if self.when == "before":
            raise RuntimeError(MARKER)
        return None

    def after_call(self, call: Call, outcome: CallOutcome) -> None:
        if self.when == "after":
            raise RuntimeError(MARKER)


@pytest.mark.parametrize(("when", "sent"), [("before", 0), ("after", 1)])
async def test_a_crashing_hook_fails_closed(setup: Setup, when: str, sent: int) -> None:
    setup.pipeline.hooks.append(Crashing(when))
    report = await setup.call("gh_get_issue", {})
    content = structured(report)
    assert content["code"] == "hook_failed" and content["hook"] == "crashing"
    assert len(setup.upstream.calls) == sent
    assert MARKER not in json.dumps(report.result)


class Answering:
    """An approver that answers every held call with the given refusal maker."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    async def ask(self, call: Call, decision: Any) -> ToolError | None:
        assert call.entry is not None
        return self.answer(call.entry.exposed_name, decision)  # type: ignore[no-any-return]


async def test_every_error_code_is_reachable_and_no_audit_line_holds_a_value() -> None:
    from mcp_operator.bridge.approval import refused, timed_out
    from mcp_operator.mcp.definitions import definition_digest

    setup = Setup(
        timeoutSeconds=1,
        rules=[
            {"match": "has(arguments.title) && arguments.title == 'no'", "action": "deny"},
            {
                "match": "has(arguments.title) && arguments.title.startsWith('ask')",
                "action": "approve",
            },
        ],
        rateLimits=[{"tools": ["close_issue"], "perMinute": 1, "burst": 1}],
    )
    github = setup.config.servers[0]
    pins = {tool["name"]: definition_digest(tool) for tool in TOOLS["tools/github"]} | {
        "odd": "0" * 64
    }  # the server changed "odd" since the operator pinned it
    changed = github.model_copy(update={"tool_digests": pins})
    setup.config = setup.config.model_copy(update={"servers": [changed, *setup.config.servers[1:]]})
    setup.pipeline.reconfigure(setup.config, build_catalog(setup.config.servers, TOOLS))
    script = setup.upstream.script
    script["create_issue"] = [UpstreamUnavailable("refused")]
    script["get_issue"] = [
        UpstreamRejected("nope"),
        McpFailure("http", "HTTP 401", status=401, challenge='Bearer error="invalid_token"'),
        McpFailure(
            "http",
            "HTTP 403",
            status=403,
            challenge='Bearer error="insufficient_scope", scope="repo:read"',
        ),
    ]
    script["close_issue"] = ["hang"]
    script["send"] = [ok(f"to {MARKER}")]
    calls: list[tuple[str, Any]] = [
        ("gh_unknown", {"x": MARKER}),
        ("gh_create_issue", {"body": MARKER}),
        ("mail_send", {"to": MARKER}),
        ("gh_get_issue", {"q": MARKER}),
        ("gh_get_issue", {"q": MARKER}),
        ("gh_get_issue", {"q": MARKER}),
        ("gh_close_issue", {"q": MARKER}),
        ("gh_create_issue", {"title": MARKER}),
        ("gh_create_issue", {"title": MARKER}),
        ("gh_create_issue", {"title": MARKER}),
        ("mail_send", {"to": "team"}),
        ("mail_send", {"to": "x" * (MAX_SCAN_CHARS + 1)}),
    ]
    outcomes = set()
    for name, arguments in calls:
        report = await setup.call(name, arguments)
        line = report.audit.to_json_line()
        assert MARKER not in line and "alice" not in line
        # Only catalog names reach the audit: a made-up one is "(unknown)" (issue 17).
        known = setup.pipeline.catalog.get(name) is not None
        assert json.loads(line)["tool"] == (name if known else "(unknown)")
        outcomes.add(report.audit.outcome)
    calls = [
        ("gh_odd", {"q": MARKER}),  # definition_changed
        ("gh_create_issue", {"title": "no", "body": MARKER}),  # policy_denied
        ("gh_close_issue", {"q": MARKER}),  # rate_limited (the hanging call took the token)
        ("gh_create_issue", {"title": "ask", "body": MARKER}),  # approval_denied: no approver
    ]
    for name, arguments in calls:
        report = await setup.call(name, arguments)
        assert MARKER not in report.audit.to_json_line()
        outcomes.add(report.audit.outcome)
    for answer in (lambda n, d: refused(n, d, "a reviewer"), lambda n, d: timed_out(n, d, 1)):
        setup.pipeline.approver = Answering(answer)
        report = await setup.call("gh_create_issue", {"title": "ask", "body": MARKER})
        assert MARKER not in report.audit.to_json_line()
        outcomes.add(report.audit.outcome)
    setup.pipeline.hooks.append(Crashing("before"))
    report = await setup.call("mail_send", {"to": "team"})
    outcomes.add(report.audit.outcome)
    setup.pipeline.hooks.pop()
    script["send"] = [CallCancelled("The agent cancelled the call")]
    report = await setup.call("mail_send", {"to": "team"})
    outcomes.add(report.audit.outcome)
    assert outcomes == set(ERROR_CODES) | {"ok"}


async def test_a_call_the_agent_cancelled_is_audited_cancelled_and_spares_the_breaker(
    setup: Setup,
) -> None:
    setup.upstream.script["get_issue"] = [CallCancelled("The agent cancelled the call")] * 5
    for _ in range(5):
        report = await setup.call("gh_get_issue", {})
        assert report.audit.outcome == "cancelled" and report.audit.attempts == 1
        assert structured(report)["code"] == "cancelled"
    assert "cancelled by the agent" in structured(report)["hint"]
    setup.upstream.script["get_issue"] = [ok("still up")]
    report = await setup.call("gh_get_issue", {})
    assert report.audit.outcome == "ok"  # five cancellations did not open the circuit


# -- upstream failures are masked; made-up names stay out of the audit (issue 17) --------------

TOKEN = "Bearer ghp_1234567890abcdefghijklmnopqrstuvwxyzAB"


async def test_an_upstream_echoing_a_header_value_reaches_neither_the_agent_nor_the_audit(
    setup: Setup,
) -> None:
    import base64

    from mcp_operator.mcp.scrub import Scrubber

    setup.pipeline.scrubber = Scrubber([TOKEN])
    bare = TOKEN.split()[1]
    echoed = base64.b64encode(f"Authorization: {TOKEN}".encode()).decode()
    setup.upstream.script["get_issue"] = [UpstreamRejected(f"401: token {TOKEN} was refused")]
    setup.upstream.script["create_issue"] = [UpstreamUnavailable(f"502 from proxy: {echoed}")]
    setup.upstream.script["close_issue"] = [
        {"content": [{"type": "text", "text": f"bad {bare.upper()}"}], "isError": True}
    ]
    reports = [
        await setup.call("gh_get_issue", {}),
        await setup.call("gh_create_issue", {"title": "t"}),
        await setup.call("gh_close_issue", {}),
    ]
    for report in reports:
        shown = json.dumps(report.result) + report.audit.to_json_line()
        assert bare not in shown and bare.lower() not in shown.lower(), shown
        assert echoed[8:40] not in shown
        assert "***" in json.dumps(report.result)
    outcomes = [r.audit.outcome for r in reports]
    assert outcomes == ["upstream_error", "upstream_unavailable", "upstream_error"]


async def test_a_made_up_tool_name_is_unknown_in_the_audit_with_a_short_hash(
    setup: Setup,
) -> None:
    invented = "ssn 123-45-6789 of john.doe@example.com"
    report = await setup.call(invented, {})
    line = report.audit.to_json_line()
    record = json.loads(line)
    assert record["tool"] == "(unknown)" and record["outcome"] == "not_allowlisted"
    assert len(record["toolSha256"]) == 16
    assert "123-45-6789" not in line and "john.doe" not in line
    again = json.loads((await setup.call(invented, {})).audit.to_json_line())
    assert again["toolSha256"] == record["toolSha256"]  # repeated attempts can be grouped
    known = json.loads((await setup.call("gh_get_issue", {})).audit.to_json_line())
    assert known["tool"] == "gh_get_issue" and "toolSha256" not in known


async def test_a_server_that_cannot_be_called_as_configured_is_refused_without_a_send(
    setup: Setup,
) -> None:
    from mcp_operator.bridge.errors import UpstreamMisconfigured

    setup.upstream.script["get_issue"] = [
        UpstreamMisconfigured("the value of header 'X' holds a control character")
    ]
    report = await setup.call("gh_get_issue", {})
    content = structured(report)
    assert content["code"] == "upstream_unavailable" and content["misconfigured"] is True
    assert "control character" in content["hint"] and "not sent" in content["hint"]
    assert report.audit.attempts == 0 and setup.clock.sleeps == []  # read-only, yet no retry


async def test_a_hook_that_asks_for_it_runs_in_a_worker_thread_for_a_large_value() -> None:
    import threading

    seen: list[int] = []
    asked: list[str] = []

    class Heavy:
        name = "heavy"

        def offload(self, call: Call, direction: str, value: Any) -> bool:
            asked.append(direction)
            return "big" in json.dumps(value)

        def before_call(self, call: Call) -> ToolError | None:
            seen.append(threading.get_ident())
            return None

        def after_call(self, call: Call, outcome: CallOutcome) -> None:
            seen.append(threading.get_ident())

    setup = Setup()
    setup.pipeline.hooks = [Heavy()]
    await setup.call("gh_get_issue", {"q": "small"})
    assert seen == [threading.get_ident()] * 2
    seen.clear()
    setup.upstream.script["get_issue"] = [ok("big")]
    await setup.call("gh_get_issue", {"q": "big"})
    assert len(seen) == 2 and threading.get_ident() not in seen
    assert asked == ["arguments", "results"] * 2


async def test_every_audit_record_names_the_run_pods_identity_from_the_config() -> None:
    setup = Setup()
    body = setup.config.model_dump(by_alias=True, exclude_none=True)
    body["identity"] = {"namespace": "agents", "serviceAccount": "triager", "pod": "triage"}
    config = BridgeConfig.model_validate(body)
    setup.pipeline.reconfigure(config, build_catalog(config.servers, TOOLS))
    called = await setup.call("gh_get_issue", {"number": 7})
    refused = await setup.call("gh_nope", {})
    unreadable = setup.pipeline.unreadable(b"{")
    for audit in (called.audit, refused.audit, unreadable):
        assert audit.identity == {
            "namespace": "agents",
            "serviceAccount": "triager",
            "pod": "triage",
        }
