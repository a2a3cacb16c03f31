"""The hook interface and the built-in PII hook (mcp_operator.bridge.hooks): the four modes
in both directions, and hooks from entry points."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from typing import Any

import pytest

from mcp_operator.api.bridge import UpstreamServer
from mcp_operator.api.bridge_policy import CallPolicy
from mcp_operator.bridge.catalog import CatalogEntry
from mcp_operator.bridge.errors import ToolError
from mcp_operator.bridge.hooks import (
    Call,
    CallOutcome,
    HookPluginError,
    PiiHook,
    load_plugin_hooks,
)
from mcp_operator.bridge.pii import PiiScanner
from mcp_operator.bridge.pii_detectors import builtin_detectors

HOOK = PiiHook(PiiScanner(builtin_detectors()))
EMAIL = "alice@example.com"


def call(arguments: Any, arguments_mode: str = "off", results_mode: str = "off") -> Call:
    policy = CallPolicy.model_validate(
        {"pii": {"arguments": arguments_mode, "results": results_mode}}
    )
    server = UpstreamServer(
        name="mail", namespace="tools", url="http://mail:8080/mcp", prefix="mail", policy=policy
    )
    entry = CatalogEntry("mail_send", "tools/mail", "send", {"type": "object"})
    return Call(
        run="agents/a", exposed_name="mail_send", arguments=arguments, entry=entry, server=server
    )


def result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def test_off_neither_scans_nor_changes() -> None:
    c = call({"to": EMAIL})
    assert HOOK.before_call(c) is None
    assert c.arguments == {"to": EMAIL} and c.pii == {}


def test_detect_counts_and_forwards_unchanged() -> None:
    c = call({"to": EMAIL}, arguments_mode="detect")
    assert HOOK.before_call(c) is None
    assert c.arguments == {"to": EMAIL}
    assert c.pii == {"arguments": {"email": 1}}


def test_redact_rewrites_the_arguments_before_they_leave() -> None:
    c = call({"to": EMAIL, "n": 1}, arguments_mode="redact")
    assert HOOK.before_call(c) is None
    assert c.arguments == {"to": "[REDACTED:email]", "n": 1}
    assert c.pii == {"arguments": {"email": 1}}


def test_block_refuses_the_call_and_names_the_kinds_not_the_values() -> None:
    c = call({"to": EMAIL, "cc": "bob@example.com"}, arguments_mode="block")
    refusal = HOOK.before_call(c)
    assert isinstance(refusal, ToolError) and refusal.code == "pii_blocked"
    assert "email x2" in refusal.hint and "tools/mail" in refusal.hint
    assert "not sent" in refusal.hint
    assert EMAIL not in str(refusal.to_result())
    assert refusal.details == {"direction": "arguments", "kinds": {"email": 2}}


def test_block_passes_a_call_without_pii() -> None:
    assert HOOK.before_call(call({"to": "the team"}, arguments_mode="block")) is None


def test_results_are_redacted_after_the_call() -> None:
    c = call({}, results_mode="redact")
    outcome = CallOutcome(result=result(f"sent to {EMAIL}"), attempts=1)
    HOOK.after_call(c, outcome)
    assert outcome.result == result("sent to [REDACTED:email]")
    assert outcome.error is None and c.pii == {"results": {"email": 1}}


def test_a_blocked_result_is_withheld_and_says_the_call_ran() -> None:
    c = call({}, results_mode="block")
    outcome = CallOutcome(result=result(f"sent to {EMAIL}"), attempts=1)
    HOOK.after_call(c, outcome)
    assert outcome.result is None
    assert outcome.error is not None and outcome.error.code == "pii_blocked"
    assert "was executed" in outcome.error.hint and EMAIL not in outcome.error.hint


def test_after_call_ignores_a_call_without_result() -> None:
    c = call({}, results_mode="block")
    outcome = CallOutcome(error=ToolError("timeout", "x"))
    HOOK.after_call(c, outcome)
    assert outcome.error is not None and outcome.error.code == "timeout"


# plugins


class Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def before_call(self, call: Call) -> ToolError | None:
        self.seen.append(f"before {call.exposed_name}")
        return None

    def after_call(self, call: Call, outcome: CallOutcome) -> None:
        self.seen.append(f"after {call.exposed_name}")


def point(value: str) -> EntryPoint:
    return EntryPoint(name="rec", value=value, group="mcp_operator.bridge_hooks")


def test_a_hook_is_loaded_from_an_entry_point_as_a_factory() -> None:
    [hook] = load_plugin_hooks([point(f"{__name__}:Recorder")])
    assert isinstance(hook, Recorder)


def test_a_broken_hook_plugin_is_an_error_that_names_it() -> None:
    with pytest.raises(HookPluginError, match="rec"):
        load_plugin_hooks([point(f"{__name__}:Missing")])
    with pytest.raises(HookPluginError, match="is not a hook"):
        load_plugin_hooks([point("builtins:dict")])


def test_no_installed_hooks_is_an_empty_list() -> None:
    assert load_plugin_hooks() == []


def test_the_default_hooks_are_the_pii_hook_then_the_plugins() -> None:
    from mcp_operator.bridge.hooks import default_hooks

    hooks = default_hooks([point(f"{__name__}:Recorder")])
    assert isinstance(hooks[0], PiiHook) and isinstance(hooks[1], Recorder)
    assert len(hooks) == 2


# -- bounded work per call (issue 17) -----------------------------------------------------------

SMALL = PiiHook(PiiScanner(builtin_detectors(), max_chars=100))
LARGE = f"{EMAIL} " + "x" * 200


def test_block_refuses_arguments_too_large_to_scan_and_says_why() -> None:
    c = call({"q": LARGE}, arguments_mode="block")
    refusal = SMALL.before_call(c)
    assert refusal is not None and refusal.code == "pii_unscannable"
    assert "100 characters" in refusal.hint and "not sent" in refusal.hint
    assert refusal.details == {"direction": "arguments", "maxChars": 100}
    assert c.pii_unscanned == ["arguments"]


def test_block_withholds_a_result_too_large_to_scan() -> None:
    c = call({}, results_mode="block")
    outcome = CallOutcome(result=result("x" * 200))
    SMALL.after_call(c, outcome)
    assert outcome.result is None and outcome.error is not None
    assert outcome.error.code == "pii_unscannable" and "executed" in outcome.error.hint


def test_redact_redacts_what_it_scanned_of_a_large_result_and_says_so() -> None:
    c = call({}, results_mode="redact")
    outcome = CallOutcome(result=result(LARGE + f" {EMAIL}"))
    SMALL.after_call(c, outcome)
    assert outcome.error is None and outcome.result is not None
    content = outcome.result["content"]
    assert content[0]["text"].startswith("[REDACTED:email] xxx")
    assert "only the first 100 characters" in content[-1]["text"]
    assert "only the first 100" in outcome.result["_meta"]["dev.mcp-operator/pii"]
    assert c.pii_unscanned == ["results"] and c.pii == {"results": {"email": 1}}


def test_detect_lets_a_large_value_through_and_only_records_it() -> None:
    c = call({"q": LARGE}, arguments_mode="detect")
    assert SMALL.before_call(c) is None and c.arguments == {"q": LARGE}
    assert c.pii_unscanned == ["arguments"]


def test_the_pii_hook_asks_for_a_thread_only_for_large_values() -> None:
    from mcp_operator.bridge.pii import OFFLOAD_CHARS

    large = {"a": ["x" * (OFFLOAD_CHARS // 2)] * 2}
    scanned = call(large, arguments_mode="detect", results_mode="redact")
    assert not HOOK.offload(scanned, "arguments", {"q": "small"})
    assert HOOK.offload(scanned, "arguments", large) and HOOK.offload(scanned, "results", large)


def test_the_pii_hook_never_asks_for_a_thread_for_a_direction_it_does_not_scan() -> None:
    from mcp_operator.bridge.pii import OFFLOAD_CHARS

    large = {"a": ["x" * (OFFLOAD_CHARS // 2)] * 2}
    arguments_only = call(large, arguments_mode="block")
    assert HOOK.offload(arguments_only, "arguments", large)
    assert not HOOK.offload(arguments_only, "results", large)
    assert not HOOK.offload(call(large), "arguments", large)
