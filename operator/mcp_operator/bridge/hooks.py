"""The hook interface: code that sees every call before and after it goes upstream.

A hook has ``before_call(call)`` and ``after_call(call, outcome)``. Both fire on every call,
also one refused by validation (``call.refusal`` is then set, and no hook can lift it). A
before-hook may rewrite ``call.arguments`` or refuse the call by returning a
:class:`~mcp_operator.bridge.errors.ToolError`; an after-hook may rewrite ``outcome.result`` or
replace it by setting ``outcome.error``. Hooks run on the event loop in order, so they must be
quick and must not block; they see values, and must not log them. A hook whose work grows with
the value may say so with ``offload(call, direction, value) -> bool`` (``direction``:
``"arguments"`` before the call, ``"results"`` after it): when it answers true, the pipeline
runs that step in a worker thread (so the hook must not touch the event loop). It is asked on
every call, so it must be cheaper than the step it would move.

Hooks come from the entry point group ``mcp_operator.bridge_hooks`` (an object, or a
zero-argument factory of one). PII scanning is the built-in :class:`PiiHook`, through this
same interface. Running the hooks in order and deciding what a crashing hook means is
:mod:`mcp_operator.bridge.pipeline`'s job.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint
from typing import Any, Protocol, TypeGuard, runtime_checkable

from mcp_operator.api.bridge import UpstreamServer
from mcp_operator.api.bridge_policy import CallPolicy, PiiMode
from mcp_operator.bridge.catalog import CatalogEntry
from mcp_operator.bridge.errors import ToolError
from mcp_operator.bridge.pii import OFFLOAD_CHARS, PiiScanner, default_scanner, text_size
from mcp_operator.bridge.plugins import load_plugins

HOOK_GROUP = "mcp_operator.bridge_hooks"
"""Entry point group of pluggable hooks."""


@dataclass
class Call:
    """One call as it moves through the pipeline."""

    run: str
    """``namespace/name`` of the AgentRun."""
    exposed_name: str
    """The name the agent called."""
    arguments: Any
    """The arguments (a before-hook may replace them; what is sent upstream)."""
    entry: CatalogEntry | None = None
    """The catalog entry, when the name resolved."""
    server: UpstreamServer | None = None
    """The server's configuration, when the name resolved."""
    refusal: ToolError | None = None
    """Set when the call is refused before it goes out (validation or a before-hook)."""
    schema_problem: str | None = None
    """Why the tool's schema could not be applied (the arguments then went unchecked)."""
    pii: dict[str, Counter[str]] = field(default_factory=dict)
    """PII kinds and counts found per direction (``arguments``, ``results``), for the audit."""
    pii_unscanned: list[str] = field(default_factory=list)
    """Directions too large to scan whole (only their first part was scanned)."""
    authorization: dict[str, Any] = field(default_factory=dict)
    """What the rules and the approval decided (``rule``, ``action``, ``approval``), for the
    audit."""

    @property
    def policy(self) -> CallPolicy:
        """The effective call policy (the defaults when the name did not resolve)."""
        return self.server.policy if self.server is not None else CallPolicy()


@dataclass
class CallOutcome:
    """What came of a call, as after-hooks see it."""

    result: Mapping[str, Any] | None = None
    """The upstream's ``CallToolResult`` (an after-hook may replace it)."""
    error: ToolError | None = None
    """The failure the agent will get instead (refusal, upstream failure, or an after-hook's)."""
    attempts: int = 0


@runtime_checkable
class Hook(Protocol):
    """Code run before and after every call."""

    @property
    def name(self) -> str:
        """Short name, for logs."""
        ...

    def before_call(self, call: Call) -> ToolError | None:
        """Inspect or rewrite ``call.arguments``; return an error to refuse the call."""
        ...

    def after_call(self, call: Call, outcome: CallOutcome) -> None:
        """Inspect or rewrite ``outcome.result``, or set ``outcome.error``."""
        ...


def _counted(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{kind} x{count}" for kind, count in sorted(counts.items()))


class PiiHook:
    """PII scanning in both directions, by the server's effective policy (``pii.arguments``
    before the call, ``pii.results`` after it).

    A direction larger than the scanner's budget is scanned only in part: ``block`` then
    refuses it (``pii_unscannable``: what was not scanned cannot be let through), ``redact``
    redacts what it scanned and says so (the audit's ``piiUnscanned``, and for a result a note
    in its ``_meta`` and ``content``), ``detect`` only records it. Large values are scanned
    off the event loop (:meth:`offload`).
    """

    name = "pii"

    def __init__(self, scanner: PiiScanner) -> None:
        self.scanner = scanner

    def offload(self, call: Call, direction: str, value: Any) -> bool:
        """Whether scanning ``value`` is worth a worker thread: never when the policy does not
        scan this direction (measuring the value cost more than a small call's whole
        pipeline), else when it holds much text."""
        pii = call.policy.pii
        if (pii.arguments if direction == "arguments" else pii.results) == "off":
            return False
        return text_size(value, OFFLOAD_CHARS) >= OFFLOAD_CHARS

    def _scan(
        self, call: Call, direction: str, mode: PiiMode, value: Any
    ) -> tuple[Any, ToolError | None]:
        """Scan ``value``; return it (redacted when the mode says so) and the refusal."""
        if mode == "off":
            return value, None
        report = self.scanner.scan(value, redact=mode == "redact")
        if report.found:
            call.pii.setdefault(direction, Counter()).update(report.counts)
        if report.unscanned:
            call.pii_unscanned.append(direction)
        if mode != "block":
            return report.value, None
        if report.unscanned:
            return report.value, self._unscannable(call, direction)
        return report.value, self._blocked(call, direction) if report.found else None

    def _unscannable(self, call: Call, direction: str) -> ToolError:
        limit = self.scanner.max_chars
        what = "arguments" if direction == "arguments" else "result"
        after = (
            "the call was not sent"
            if direction == "arguments"
            else "it was withheld. The call itself was executed: do not repeat it to get the "
            "result; ask for less (a page, a filter) instead"
        )
        return ToolError(
            "pii_unscannable",
            f"The {what} of {call.exposed_name} is larger than the {limit} characters the "
            f"bridge scans for personal data, and the policy of server {_server_name(call)} "
            f"lets through only what was scanned, so {after}.",
            {"direction": direction, "maxChars": limit},
        )

    def _blocked(self, call: Call, direction: str) -> ToolError:
        counts = call.pii[direction]
        if direction == "arguments":
            return ToolError(
                "pii_blocked",
                f"The arguments of {call.exposed_name} contain personal data "
                f"({_counted(counts)}), which the policy of server {_server_name(call)} does "
                "not let leave the Pod. Remove or anonymise it and call again; the call was "
                "not sent.",
                {"direction": "arguments", "kinds": dict(counts)},
            )
        return ToolError(
            "pii_blocked",
            f"The result of {call.exposed_name} contained personal data ({_counted(counts)}), "
            f"which the policy of server {_server_name(call)} does not let through, so it was "
            "withheld. The call itself was executed: do not repeat it to get the result.",
            {"direction": "results", "kinds": dict(counts)},
        )

    def before_call(self, call: Call) -> ToolError | None:
        value, refusal = self._scan(call, "arguments", call.policy.pii.arguments, call.arguments)
        call.arguments = value
        return refusal

    def after_call(self, call: Call, outcome: CallOutcome) -> None:
        if outcome.result is None:
            return
        mode = call.policy.pii.results
        value, refusal = self._scan(call, "results", mode, outcome.result)
        if refusal is not None:
            outcome.result, outcome.error = None, refusal
            return
        if mode == "redact" and "results" in call.pii_unscanned and isinstance(value, dict):
            value = _noted(value, self.scanner.max_chars)
        outcome.result = value


def _noted(result: dict[str, Any], limit: int) -> dict[str, Any]:
    """A redacted result that was too large to scan whole, saying so to the agent."""
    note = (
        f"[mcp-bridge: only the first {limit} characters of this result were scanned for "
        "personal data and redacted; the rest was not scanned]"
    )
    meta = result.get("_meta")
    noted = {**result, "_meta": {**(meta if isinstance(meta, dict) else {}), PII_META: note}}
    content = result.get("content")
    if isinstance(content, list):
        noted["content"] = [*content, {"type": "text", "text": note}]
    return noted


PII_META = "dev.mcp-operator/pii"
"""The ``_meta`` key of a result's note that it was scanned only in part."""


def _server_name(call: Call) -> str:
    return call.entry.server if call.entry is not None else "(unknown)"


def default_hooks(points: Iterable[EntryPoint] | None = None) -> list[Hook]:
    """The built-in PII hook (built-in and plugin detectors), then the plugin hooks."""
    return [PiiHook(default_scanner()), *load_plugin_hooks(points)]


class HookPluginError(RuntimeError):
    """A hook plugin could not be loaded or is not a hook; names the entry point."""


def load_plugin_hooks(points: Iterable[EntryPoint] | None = None) -> list[Hook]:
    """The hooks of the ``mcp_operator.bridge_hooks`` entry points (or of ``points``)."""
    return load_plugins(
        HOOK_GROUP,
        points,
        interface=Hook,
        accepts=_is_hook,
        what="Bridge hook plugin",
        needs="a hook: it needs name, before_call(call) and after_call(call, outcome)",
        error=HookPluginError,
    )


def _is_hook(plugin: object) -> TypeGuard[Hook]:
    return isinstance(plugin, Hook)
