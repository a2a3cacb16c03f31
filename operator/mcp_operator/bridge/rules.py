"""Authorization rules in the bridge: which calls a run's rules allow, deny or hold for approval.

Each server's effective policy lists its rules, the server's (``spec.policy.rules``) then the
run's (``spec.bridge.policy.rules``), each a CEL ``match`` (:mod:`mcp_operator.api.
expressions`) with an ``action``. Per layer the first rule that matches decides; no match
allows. The two layers' verdicts combine to the stricter (``allow`` < ``approve`` <
``deny``), so a run's rules can only add restrictions: a run's ``allow`` never lifts a
server's ``deny`` or ``approve``.

A rule that cannot be evaluated (a field the call does not have, a type error) fails closed:
a ``deny`` or ``approve`` rule counts as matching, an ``allow`` rule as not matching. Write
``has(arguments.path) && ...`` for optional fields.

``tool.annotations`` are the annotations as the operator pinned them: the live ones only when
the tool's live definition has the pinned digest (the digest covers the annotations), else
none at all (``toolsPinning: off``, or no pin), so a server cannot dodge a rule by changing
its hints after review.

**Cost.** Rules that do not read ``arguments`` have one answer per tool: they are evaluated
once per tool when the catalog changes. The others run per call against one CEL context per
tool that holds the tool's fixed variables, converted once; ``arguments`` are handed to CEL
by a variable resolver, because adding a variable to a context rebuilds all of it
(converting the variables is most of the cost of a CEL evaluation: ``bench/policy_bench.py``).

**Listing.** A tool is left out of ``tools/list`` when a layer's verdict for it is ``deny``
whatever the arguments: its rules up to the first that matches read no arguments, and that
one denies. A rule reading ``arguments`` before it means the call may be allowed, so the tool
stays listed and each call is decided on its own.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import cel

from mcp_operator.api.bridge import BridgeConfig, UpstreamServer
from mcp_operator.api.bridge_policy import Rule
from mcp_operator.api.expressions import compiled, is_static
from mcp_operator.bridge.catalog import Catalog, CatalogEntry, server_key
from mcp_operator.bridge.errors import ToolError
from mcp_operator.mcp.naming import matches

logger = logging.getLogger(__name__)

Action = Literal["allow", "deny", "approve"]

STRICTNESS: Final[dict[str, int]] = {"allow": 0, "approve": 1, "deny": 2}


@dataclass(frozen=True)
class Decision:
    """What the rules say of one call."""

    action: Action
    rule: Rule | None = None
    """The rule that decided (``None``: no rule matched, the call is allowed)."""
    position: int | None = None
    """The rule's place in its layer's list, from 0 (``spec...rules[position]``)."""

    source: str | None = None
    """What decided when no rule did: ``requireApproval`` or ``approveDestructive``."""

    def describe(self) -> str:
        """``server rule 2`` / ``run rule 0`` / ``requireApproval`` (hints and audit lines)."""
        if self.rule is None:
            return self.source or "no rule"
        return f"{self.rule.layer} rule {self.position}"


ALLOWED = Decision("allow")


@dataclass(frozen=True)
class _Compiled:
    rule: Rule
    position: int
    program: cel.Program
    static: bool
    known: bool | None
    """For a static rule: whether it matches this tool (fail-closed result on an error)."""


class ToolRules:
    """The rules of one tool of the run: static answers taken, a context for the others."""

    def __init__(self, rules: Sequence[Rule], variables: Mapping[str, Any]) -> None:
        self.layers: list[list[_Compiled]] = []
        self._context: cel.Context | None = None
        self._variables = dict(variables)
        self._arguments: Any = None
        for layer in ("server", "run"):
            entries = []
            for position, rule in enumerate(r for r in rules if r.layer == layer):
                static = is_static(rule.match)
                program = compiled(rule.match)
                known = self._evaluate(rule, program) if static else None
                entries.append(_Compiled(rule, position, program, static, known))
            self.layers.append(entries)

    @property
    def context(self) -> cel.Context:
        """The CEL context of the tool's fixed variables, converted once; ``arguments`` come
        from a resolver, so giving a call's arguments does not rebuild it."""
        if self._context is None:
            self._context = cel.Context(self._variables)
            self._context.set_variable_resolver(self._resolve)
        return self._context

    def _resolve(self, name: str) -> Any:
        return self._arguments if name == "arguments" else None

    def _evaluate(self, rule: Rule, program: cel.Program) -> bool:
        try:
            return program.execute(self.context) is True
        except Exception as error:
            # Fail closed: a restricting rule matches, an allowing one does not.
            logger.warning("Rule %r could not be evaluated: %s", rule.match, str(error)[:200])
            return rule.action != "allow"

    def _layer(self, entries: Sequence[_Compiled]) -> Decision:
        for entry in entries:
            matched = (
                bool(entry.known) if entry.static else self._evaluate(entry.rule, entry.program)
            )
            if matched:
                return Decision(entry.rule.action, entry.rule, entry.position)
        return ALLOWED

    def decide(self, arguments: Any) -> Decision:
        """The stricter of the two layers' first matching rules."""
        verdict = ALLOWED
        self._arguments = arguments
        try:
            for entries in self.layers:
                found = self._layer(entries)
                if STRICTNESS[found.action] > STRICTNESS[verdict.action]:
                    verdict = found
        finally:
            self._arguments = None  # the call's values are not kept past its decision
        return verdict

    def denied_whatever_the_arguments(self) -> Decision | None:
        """The deny that holds for every call of this tool, if one does (see the module)."""
        for entries in self.layers:
            for entry in entries:
                if not entry.static:
                    break
                if entry.known:
                    if entry.rule.action == "deny":
                        return Decision("deny", entry.rule, entry.position)
                    break
        return None


def tool_variables(
    config: BridgeConfig, server: UpstreamServer, entry: CatalogEntry
) -> dict[str, Any]:
    """``caller``, ``server`` and ``tool`` of one catalog entry (see the module)."""
    identity = config.identity
    pinned = (
        server.pinning != "off"
        and server.tool_digests is not None
        and server.tool_digests.get(entry.original_name) == entry.sha256
    )
    title = entry.definition.get("title") or entry.annotations.get("title") or ""
    return {
        "caller": {
            "run": config.run.name,
            "namespace": config.run.namespace,
            "serviceAccount": identity.service_account if identity is not None else "",
            "pod": (identity.pod or "") if identity is not None else "",
        },
        "server": {"name": server.name, "namespace": server.namespace},
        "tool": {
            "name": entry.original_name,
            "exposedName": entry.exposed_name,
            "title": title if isinstance(title, str) else "",
            "annotations": dict(entry.annotations) if pinned else {},
        },
    }


def destructive(config: BridgeConfig, server: UpstreamServer, entry: CatalogEntry) -> bool:
    """Whether the tool may be destructive by its pinned annotations: not ``readOnlyHint``,
    and ``destructiveHint`` not false (the MCP default is true); without pinned annotations
    it counts as destructive."""
    annotations = tool_variables(config, server, entry)["tool"]["annotations"]
    if annotations.get("readOnlyHint") is True:
        return False
    return annotations.get("destructiveHint") is not False


class RuleBook:
    """Every tool's rules for one configuration and catalog (rebuilt when either changes)."""

    def __init__(self, config: BridgeConfig, catalog: Catalog) -> None:
        self.tools: dict[str, ToolRules] = {}
        servers = {server_key(s): s for s in config.servers}
        for name, entry in catalog.entries.items():
            server = servers.get(entry.server)
            if server is None or not server.policy.rules:
                continue
            self.tools[name] = ToolRules(server.policy.rules, tool_variables(config, server, entry))
        self.hidden = {
            name
            for name, rules in self.tools.items()
            if rules.denied_whatever_the_arguments() is not None
        }
        """Exposed names no call can be allowed for: left out of ``tools/list``."""
        self.held: dict[str, Decision] = {}
        """Tools every call of which waits for approval (``requireApproval``,
        ``approveDestructive``), whatever the rules allow."""
        for name, entry in catalog.entries.items():
            server = servers.get(entry.server)
            if server is None:
                continue
            policy = server.policy
            if matches(policy.require_approval, entry.original_name) or matches(
                policy.require_approval, name
            ):
                self.held[name] = Decision("approve", source="requireApproval")
            elif policy.approve_destructive and destructive(config, server, entry):
                self.held[name] = Decision("approve", source="approveDestructive")

    def decide(self, exposed_name: str, arguments: Any) -> Decision:
        rules = self.tools.get(exposed_name)
        decision = ALLOWED if rules is None else rules.decide(arguments)
        held = self.held.get(exposed_name)
        if held is not None and decision.action == "allow":
            return held
        return decision


def denied(exposed_name: str, decision: Decision) -> ToolError:
    """``policy_denied``: the rule's reason as the hint."""
    reason = (decision.rule.reason if decision.rule is not None else None) or (
        "a policy rule does not allow this call"
    )
    return ToolError(
        "policy_denied",
        f"{reason} (the {decision.describe()} of the policy refused {exposed_name}; the call "
        "was not sent). Calling again with the same arguments will be refused the same way.",
        {"rule": decision.describe(), "action": decision.action},
    )
