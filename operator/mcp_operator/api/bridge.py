"""The bridge configuration file (``kind: BridgeConfig``), the controller↔bridge contract.

The AgentRun controller writes one of these into the run's ConfigMap; the ``mcp-bridge``
sidecar reads it from the mounted file (``mcp-operator bridge --config FILE``) and again when
it changes. This module owns the file format and nothing else:

- the pydantic models (camelCase on the wire like :mod:`mcp_operator.api.common`, unknown fields
  rejected, every field documented), versioned as ``mcp-operator.dev/v1alpha1``;
- :func:`load_bridge_config` / :func:`dump_bridge_config`: read and write the file, with an
  error that names the offending field; a dump loads back to an equal object;
- :func:`tighten`: the effective call policy of one server for one run, where the run may only
  make the server's defaults stricter;
- :func:`tool_allowed`: whether a tool passes every filter layer.

No secret value is ever in this file: a header whose value is secret names the file of a
mounted Secret key (``valueFile``) and the bridge reads it. Resolving servers, rendering the
ConfigMap and mounting Secrets are the controller's job; enforcing the policy is the bridge's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from mcp_operator.api.common import (
    HEADER_NAME_PATTERN,
    PATH_PATTERN,
    PREFIX_MAX_LENGTH,
    PREFIX_PATTERN,
    URL_PATTERN,
    DnsLabel,
    DnsSubdomain,
    Glob,
    Globs,
    UriGlobs,
    check_exactly_one,
)
from mcp_operator.api.expressions import MAX_EXPRESSION_CHARS, check_expression
from mcp_operator.mcp.naming import matches

API_VERSION: Final = "mcp-operator.dev/v1alpha1"
KIND: Final = "BridgeConfig"

ABSOLUTE_PATH_PATTERN = r"^/[^\x00]*$"

PiiMode = Literal["off", "detect", "redact", "block"]
"""What PII scanning does in one direction: nothing, report, rewrite, or refuse the call."""

PII_MODE_ORDER: tuple[PiiMode, ...] = ("off", "detect", "redact", "block")
"""PII modes from the most lenient to the strictest (``tighten`` keeps the stricter)."""

AbsolutePath = Annotated[
    str, StringConstraints(min_length=2, max_length=4096, pattern=ABSOLUTE_PATH_PATTERN)
]


class ConfigModel(BaseModel):
    """A part of the bridge configuration: camelCase on the wire, unknown fields rejected."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_attribute_docstrings=True,
    )


class RunRef(ConfigModel):
    """The AgentRun this bridge serves (for audit lines and logs)."""

    name: DnsSubdomain
    """``metadata.name`` of the AgentRun."""
    namespace: DnsLabel
    """``metadata.namespace`` of the AgentRun."""


class RunIdentity(ConfigModel):
    """Who the bridge calls as: the run Pod's ServiceAccount (for audit lines)."""

    namespace: DnsLabel
    """The Pod's namespace."""
    service_account: DnsSubdomain
    """The Pod's ServiceAccount, whose audience-bound tokens the bridge presents."""
    pod: DnsSubdomain | None = None
    """The Pod's name (the operator names the run's Pod)."""


class Listen(ConfigModel):
    """Where the bridge offers its one MCP endpoint to the agent."""

    host: Annotated[str, StringConstraints(min_length=1, max_length=253)] = "127.0.0.1"
    """Address to bind; loopback by default, so only containers of the Pod reach it."""
    port: int = Field(default=7800, ge=1024, le=65535)
    """TCP port (the agent's ``MCP_BRIDGE_URL`` names it)."""
    path: str = Field(default="/mcp", max_length=256, pattern=PATH_PATTERN)
    """HTTP path of the MCP endpoint."""


class FilterLayer(ConfigModel):
    """One layer of tool filters: globs (``*``, ``?``) on the server's original tool names."""

    allow: Globs = Field(default_factory=list)
    """A tool must match one of these; empty means every tool."""
    deny: Globs = Field(default_factory=list)
    """A tool matching one of these is refused, even when allowed above."""
    prompts_allow: Globs = Field(default_factory=list)
    """A prompt (by its original name) must match one of these; empty means every prompt."""
    prompts_deny: Globs = Field(default_factory=list)
    """A prompt matching one of these is hidden and cannot be got."""
    resources_allow: UriGlobs = Field(default_factory=list)
    """A resource (by its original URI) or template (by its original URI template) must
    match one of these; empty means every one."""
    resources_deny: UriGlobs = Field(default_factory=list)
    """A resource or template matching one of these is hidden and cannot be read."""


class Header(ConfigModel):
    """An HTTP header sent on every request to the server: ``value`` xor ``valueFile``."""

    name: Annotated[
        str, StringConstraints(min_length=1, max_length=256, pattern=HEADER_NAME_PATTERN)
    ]
    """The header field name."""
    value: Annotated[str, StringConstraints(max_length=8192)] | None = None
    """A literal value, only for values that are not secret (they are visible in the ConfigMap)."""
    value_file: AbsolutePath | None = None
    """Path of a mounted Secret key whose content is the value; read by the bridge, never
    copied into this file."""

    @model_validator(mode="after")
    def _exactly_one(self) -> Header:
        check_exactly_one(self, "value", "value_file")
        return self


class ClientCredentialsAuth(ConfigModel):
    """OAuth client credentials (RFC 6749 §4.4): the bridge obtains the client's own token."""

    token_url: str = Field(alias="tokenURL", max_length=2048, pattern=URL_PATTERN)
    """The authorization server's token endpoint."""
    client_id: Annotated[str, StringConstraints(min_length=1, max_length=256)] = Field(
        alias="clientID"
    )
    """The OAuth client identifier."""
    client_secret_file: AbsolutePath
    """Path of the mounted Secret key that holds the client secret (never its value)."""
    scopes: Annotated[
        list[Annotated[str, StringConstraints(max_length=256)]], Field(max_length=32)
    ] = Field(default_factory=list)
    """Scopes asked for."""
    resource: str = Field(max_length=2048, pattern=URL_PATTERN)
    """The RFC 8707 resource (the controller writes the server's URL when it is not set)."""
    audience: Annotated[str, StringConstraints(max_length=2048)] | None = None
    """The ``audience`` parameter, when configured."""


class TokenExchangeAuth(ConfigModel):
    """OAuth token exchange (RFC 8693): the run's projected ServiceAccount token is the subject."""

    token_url: str = Field(alias="tokenURL", max_length=2048, pattern=URL_PATTERN)
    """The authorization server's token endpoint."""
    subject_token_file: AbsolutePath
    """Path of the projected ServiceAccount token (mounted into the bridge container only),
    re-read for every exchange as the kubelet rotates it."""
    resource: str = Field(max_length=2048, pattern=URL_PATTERN)
    """The RFC 8707 resource (the controller writes the server's URL when it is not set)."""
    audience: Annotated[str, StringConstraints(max_length=2048)] | None = None
    """The ``audience`` parameter, when configured."""
    scopes: Annotated[
        list[Annotated[str, StringConstraints(max_length=256)]], Field(max_length=32)
    ] = Field(default_factory=list)
    """Scopes asked for."""
    client_id: Annotated[str, StringConstraints(min_length=1, max_length=256)] | None = Field(
        default=None, alias="clientID"
    )
    """The client that performs the exchange (the actor), when one authenticates."""
    client_secret_file: AbsolutePath | None = None
    """Path of the mounted Secret key with that client's secret."""


class UpstreamAuth(ConfigModel):
    """How the bridge authenticates to one upstream: exactly one OAuth method."""

    oauth2_client_credentials: ClientCredentialsAuth | None = None
    """Client credentials."""
    token_exchange: TokenExchangeAuth | None = None
    """Token exchange of the run's own identity."""

    @model_validator(mode="after")
    def _exactly_one(self) -> UpstreamAuth:
        check_exactly_one(self, "oauth2_client_credentials", "token_exchange")
        return self


class PiiPolicy(ConfigModel):
    """PII scanning per direction."""

    arguments: PiiMode = "off"
    """Mode for a call's arguments, scanned before the call leaves the Pod."""
    results: PiiMode = "off"
    """Mode for a call's result, scanned before the agent sees it."""


class RetryPolicy(ConfigModel):
    """Retries of transient upstream failures (only for read-only or idempotent tools)."""

    max_attempts: int = Field(default=3, ge=1, le=5)
    """Attempts in all: 3 is one call and two retries; 1 never retries."""
    initial_backoff_ms: int = Field(default=100, ge=1, le=60_000)
    """Upper bound of the first wait (full jitter: the wait is uniform in [0, bound])."""
    max_backoff_ms: int = Field(default=2000, ge=1, le=300_000)
    """Cap of the bound, which doubles after each attempt."""

    @model_validator(mode="after")
    def _ordered(self) -> RetryPolicy:
        if self.initial_backoff_ms > self.max_backoff_ms:
            raise ValueError("initialBackoffMs must not be greater than maxBackoffMs")
        return self


class CircuitBreakerPolicy(ConfigModel):
    """When the bridge stops calling a server that keeps failing, and for how long."""

    failure_threshold: int = Field(default=5, ge=1, le=1000)
    """Consecutive failed calls that open the circuit."""
    open_seconds: int = Field(default=30, ge=1, le=3600)
    """Seconds the circuit stays open before one trial call is let through."""


class Rule(ConfigModel):
    """An authorization rule (``spec.policy.rules`` of the MCPServer, ``spec.bridge.policy.
    rules`` of the AgentRun), evaluated by :mod:`mcp_operator.bridge.rules`."""

    match: Annotated[str, StringConstraints(min_length=1, max_length=MAX_EXPRESSION_CHARS)]
    """A CEL expression over ``caller``, ``server``, ``tool`` and ``arguments``."""
    action: Literal["allow", "deny", "approve"]
    """What a call the expression matches gets."""
    reason: Annotated[str, StringConstraints(max_length=512)] | None = None
    """Said to the agent when the rule refuses a call (the hint of ``policy_denied``)."""
    layer: Literal["server", "run"] = "server"
    """Whose rule: the server's (first) or the run's, which may only add restrictions."""

    @field_validator("match")
    @classmethod
    def _compiles(cls, value: str) -> str:
        return check_expression(value)


class RateLimit(ConfigModel):
    """A token bucket per matching tool (``spec.policy.rateLimits``, ``spec.bridge.policy.
    rateLimits``), kept by :mod:`mcp_operator.bridge.ratelimit`."""

    tools: Annotated[list[Glob], Field(min_length=1, max_length=64)]
    """Globs on the original or the exposed tool name."""
    per_minute: int = Field(ge=1, le=100_000)
    """Tokens added per minute."""
    burst: int | None = Field(default=None, ge=1, le=10_000)
    """Most tokens held at once (calls in a burst); unset: ``perMinute``."""
    layer: Literal["server", "run"] = "server"
    """Whose limit (every limit that matches applies)."""


class CallPolicy(ConfigModel):
    """How calls to one server are governed (the effective policy, after :func:`tighten`)."""

    pii: PiiPolicy = Field(default_factory=PiiPolicy)
    """PII scanning of arguments and results."""
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    """Retries of transient failures."""
    timeout_seconds: int = Field(default=30, ge=1, le=3600)
    """Deadline of one call, all attempts and waits included."""
    circuit_breaker: CircuitBreakerPolicy = Field(default_factory=CircuitBreakerPolicy)
    """The per-server circuit breaker."""
    rules: Annotated[list[Rule], Field(max_length=128)] = Field(default_factory=list)
    """Authorization rules, the server's then the run's."""
    rate_limits: Annotated[list[RateLimit], Field(max_length=64)] = Field(default_factory=list)
    """Rate limits, the server's and the run's (all that match apply)."""
    require_approval: Globs = Field(default_factory=list)
    """Tools (globs on the original or exposed name) every call of which waits for a
    person's approval (the server's and the run's)."""
    approve_destructive: bool = False
    """Every call of a tool that may be destructive (its pinned ``destructiveHint`` is not
    false and it is not ``readOnlyHint``; unknown counts as destructive) waits for approval."""


class ToolOverride(ConfigModel):
    """The server's ``spec.toolsOverride`` entry for one tool (:mod:`mcp_operator.bridge.
    overrides`)."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    """The tool's original name."""
    title: Annotated[str, StringConstraints(max_length=256)] | None = None
    """The title the agent sees instead of the server's."""
    description: Annotated[str, StringConstraints(max_length=4096)] | None = None
    """The description the agent sees instead of the server's."""
    fixed_arguments: Annotated[dict[str, Any], Field(max_length=32)] | None = None
    """Arguments sent with every call whatever the agent says; removed from the schema the
    agent sees."""


class UpstreamServer(ConfigModel):
    """One resolved MCPServer whose allowed tools the bridge exposes."""

    name: DnsSubdomain
    """``metadata.name`` of the MCPServer."""
    namespace: DnsLabel
    """``metadata.namespace`` of the MCPServer."""
    url: str = Field(max_length=2048, pattern=URL_PATTERN)
    """The server's ``status.url`` (``http://`` or ``https://``)."""
    transport: Literal["streamable-http", "sse"] = "streamable-http"
    """How the server is reached (stdio servers are reached through the managed adapter)."""
    protocol_version: Annotated[str, StringConstraints(max_length=32)] | None = None
    """The protocol version the server's status reported; the bridge still negotiates."""
    prefix: str = Field(max_length=PREFIX_MAX_LENGTH, pattern=PREFIX_PATTERN)
    """Exposed tool and prompt names are ``<prefix>_<name>`` (the shared naming plan), resource
    URIs are namespaced by it (:mod:`~mcp_operator.mcp.uris`); the empty prefix exposes the
    server's own names and URIs."""
    filters: Annotated[list[FilterLayer], Field(max_length=8)] = Field(default_factory=list)
    """Filter layers applied in order (the server's own first, then the run's); a tool must
    pass every layer, so a later layer can only narrow."""
    headers: Annotated[list[Header], Field(max_length=32)] = Field(default_factory=list)
    """Headers sent on every request to the server."""
    policy: CallPolicy = Field(default_factory=CallPolicy)
    """The effective call policy for this server in this run."""
    tools: (
        Annotated[
            list[Annotated[str, StringConstraints(min_length=1, max_length=128)]],
            Field(max_length=5000),
        ]
        | None
    ) = None
    """The pins: the original names of the tools the operator's probe listed (after every
    filter layer), when its status listed them all. Only these are planned, and they keep
    their exposed names in a collision, so that a tool the server adds later is exposed only
    after the operator has seen it and never takes over a name. Unset: the filter layers
    alone decide."""
    auth: UpstreamAuth | None = None
    """OAuth credentials the bridge presents (``Authorization: Bearer``, a cached token); the
    secrets they need are mounted files, named here by path."""

    token_file: AbsolutePath | None = None
    """A projected ServiceAccount token (audience: this server) sent as ``Authorization:
    Bearer`` on every request, re-read as the kubelet rotates it; mounted into the bridge
    container only."""

    pinning: Literal["strict", "pin", "off"] = "pin"
    """The server's ``spec.toolsPinning``: whether the bridge refuses a tool whose live
    definition differs from its pin (``off``: it does not check), and whether a tool
    without a pin is refused (``strict``)."""
    overrides: Annotated[list[ToolOverride], Field(max_length=256)] = Field(default_factory=list)
    """The server's tool overrides (``spec.toolsOverride``)."""
    tool_digests: (
        Annotated[
            dict[
                Annotated[str, StringConstraints(min_length=1, max_length=128)],
                Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")],
            ],
            Field(max_length=5000),
        ]
        | None
    ) = None
    """The pinned definition digests (original name → ``definitionSha256`` of the server's
    ``status.tools``). Unset: no pins, nothing checked."""

    @model_validator(mode="after")
    def _unique_headers(self) -> UpstreamServer:
        check_unique((h.name.lower() for h in self.headers), "header names (ignoring case)")
        if self.auth is not None and self.token_file is not None:
            raise ValueError("auth and tokenFile must not both be set: one credential per server")
        return self

    def allows(self, original_name: str) -> bool:
        """Whether the tool ``original_name`` passes every filter layer."""
        return tool_allowed(self.filters, original_name)


class AuditSink(ConfigModel):
    """Where the bridge writes its audit lines (one JSON object per call)."""

    stdout: bool = True
    """Write audit lines to standard output (the container log)."""
    file: AbsolutePath | None = None
    """Also append them to this file."""


class ApprovalWebhook(ConfigModel):
    """Where the bridge asks a person about a held call (:mod:`mcp_operator.bridge.approval`)."""

    url: str = Field(max_length=2048, pattern=URL_PATTERN)
    """The webhook's URL (``http://`` or ``https://``); the bridge's egress policy applies."""
    timeout_seconds: int = Field(default=300, ge=1, le=3600)
    """How long the bridge waits for the answer; none in time is a denial."""
    secret_file: AbsolutePath
    """A mounted Secret key: the HMAC-SHA256 key that signs each request's body."""


class ElicitationApproval(ConfigModel):
    """Approval asked of the calling agent through elicitation (its human answers)."""

    timeout_seconds: int = Field(default=300, ge=1, le=300)
    """How long the bridge waits for the agent's answer; none in time is a denial (at most
    the time a 2026-07-28 agent's call stays parked for its answer)."""


class ApprovalConfig(ConfigModel):
    """How held calls are approved: the agent when it declared elicitation, else the webhook."""

    elicitation: ElicitationApproval = Field(default_factory=ElicitationApproval)
    """Asking the agent (its wait)."""
    webhook: ApprovalWebhook | None = None
    """The approval webhook, for an agent that did not declare elicitation (unset: its held
    calls are refused)."""


class BridgeConfig(ConfigModel):
    """The whole bridge configuration file."""

    api_version: Literal["mcp-operator.dev/v1alpha1"] = API_VERSION
    """Version of this file format."""
    kind: Literal["BridgeConfig"] = KIND
    """Always ``BridgeConfig``."""
    run: RunRef
    """The AgentRun served."""
    listen: Listen = Field(default_factory=Listen)
    """The agent-facing endpoint."""
    servers: Annotated[list[UpstreamServer], Field(max_length=32)] = Field(default_factory=list)
    """The resolved servers, in the run's order (may be empty while none is Ready)."""
    audit: AuditSink = Field(default_factory=AuditSink)
    """Audit destinations."""
    identity: RunIdentity | None = None
    """The run's identity (audit, and the ``caller`` of authorization rules)."""
    approval: ApprovalConfig | None = None
    """How calls held for approval are approved (unset: an agent that declared elicitation is
    asked, waiting the default; no other is)."""
    discovery: Literal["full", "search"] = "full"
    """``full``: the agent's ``tools/list`` shows every tool; ``search``: two tools, search
    and call-by-name (:mod:`mcp_operator.bridge.discovery`)."""

    @model_validator(mode="after")
    def _unique_servers(self) -> BridgeConfig:
        check_unique((f"{s.namespace}/{s.name}" for s in self.servers), "servers")
        return self


# -- policy tightening ----------------------------------------------------------------------


class PiiOverride(ConfigModel):
    """A run's PII modes; unset means the server's."""

    arguments: PiiMode | None = None
    """The run's mode for arguments; kept only when stricter than the server's."""
    results: PiiMode | None = None
    """The run's mode for results; kept only when stricter than the server's."""


class RetryOverride(ConfigModel):
    """A run's retry settings; unset means the server's."""

    max_attempts: int | None = Field(default=None, ge=1, le=5)
    """Kept when fewer than the server's."""
    initial_backoff_ms: int | None = Field(default=None, ge=1, le=60_000)
    """Kept when longer than the server's (gentler on the server)."""
    max_backoff_ms: int | None = Field(default=None, ge=1, le=300_000)
    """Kept when longer than the server's."""


class CircuitBreakerOverride(ConfigModel):
    """A run's circuit breaker settings; unset means the server's."""

    failure_threshold: int | None = Field(default=None, ge=1, le=1000)
    """Kept when lower than the server's (the circuit opens sooner)."""
    open_seconds: int | None = Field(default=None, ge=1, le=3600)
    """Kept when longer than the server's."""


class CallPolicyOverride(ConfigModel):
    """What a run asks of a server's call policy; :func:`tighten` keeps only what is stricter."""

    pii: PiiOverride = Field(default_factory=PiiOverride)
    """The run's PII modes."""
    retry: RetryOverride = Field(default_factory=RetryOverride)
    """The run's retry settings."""
    timeout_seconds: int | None = Field(default=None, ge=1, le=3600)
    """Kept when shorter than the server's."""
    circuit_breaker: CircuitBreakerOverride = Field(default_factory=CircuitBreakerOverride)
    """The run's circuit breaker settings."""
    rules: Annotated[list[Rule], Field(max_length=64)] = Field(default_factory=list)
    """The run's rules: they come after the server's and can only add restrictions."""
    rate_limits: Annotated[list[RateLimit], Field(max_length=32)] = Field(default_factory=list)
    """The run's rate limits: they apply besides the server's."""
    require_approval: Globs = Field(default_factory=list)
    """The run's tools that wait for approval, besides the server's."""
    approve_destructive: bool = False
    """The run asks approval for every destructive tool (kept when either asks)."""


def stricter_pii(first: PiiMode, second: PiiMode | None) -> PiiMode:
    """The stricter of two PII modes (``off`` < ``detect`` < ``redact`` < ``block``)."""
    if second is None:
        return first
    return max(first, second, key=PII_MODE_ORDER.index)


def _low(server: int, run: int | None) -> int:
    return server if run is None else min(server, run)


def _high(server: int, run: int | None) -> int:
    return server if run is None else max(server, run)


def tighten(server_default: CallPolicy, run_override: CallPolicyOverride | None) -> CallPolicy:
    """The effective policy: the server's defaults, made stricter (never looser) by the run.

    Stricter means: the stricter PII mode per direction; fewer attempts; a shorter timeout;
    longer backoffs (gentler on the server); a circuit that opens after fewer failures and
    stays open longer; the run's rules after the server's (:mod:`~mcp_operator.bridge.rules`
    lets them only add restrictions) and its rate limits besides the server's. An unset run
    field keeps the server's value. Pure.
    """
    if run_override is None:
        return server_default.model_copy(deep=True)
    run = run_override
    base = server_default
    return CallPolicy(
        pii=PiiPolicy(
            arguments=stricter_pii(base.pii.arguments, run.pii.arguments),
            results=stricter_pii(base.pii.results, run.pii.results),
        ),
        retry=RetryPolicy(
            max_attempts=_low(base.retry.max_attempts, run.retry.max_attempts),
            initial_backoff_ms=_high(base.retry.initial_backoff_ms, run.retry.initial_backoff_ms),
            max_backoff_ms=_high(base.retry.max_backoff_ms, run.retry.max_backoff_ms),
        ),
        timeout_seconds=_low(base.timeout_seconds, run.timeout_seconds),
        circuit_breaker=CircuitBreakerPolicy(
            failure_threshold=_low(
                base.circuit_breaker.failure_threshold, run.circuit_breaker.failure_threshold
            ),
            open_seconds=_high(base.circuit_breaker.open_seconds, run.circuit_breaker.open_seconds),
        ),
        rules=[*base.rules, *(r.model_copy(update={"layer": "run"}) for r in run.rules)],
        require_approval=list(dict.fromkeys([*base.require_approval, *run.require_approval])),
        approve_destructive=base.approve_destructive or run.approve_destructive,
        rate_limits=[
            *base.rate_limits,
            *(limit.model_copy(update={"layer": "run"}) for limit in run.rate_limits),
        ],
    )


def prompt_allowed(layers: Sequence[FilterLayer], original_name: str) -> bool:
    """Whether the prompt ``original_name`` passes every layer's prompt filters."""
    return all(
        (not layer.prompts_allow or matches(layer.prompts_allow, original_name))
        and not matches(layer.prompts_deny, original_name)
        for layer in layers
    )


def resource_allowed(layers: Sequence[FilterLayer], original_uri: str) -> bool:
    """Whether the resource (or template) ``original_uri`` passes every layer's resource
    filters."""
    return all(
        (not layer.resources_allow or matches(layer.resources_allow, original_uri))
        and not matches(layer.resources_deny, original_uri)
        for layer in layers
    )


def tool_allowed(layers: Sequence[FilterLayer], original_name: str) -> bool:
    """Whether ``original_name`` passes every layer (allow, empty = all; then deny)."""
    return all(
        (not layer.allow or matches(layer.allow, original_name))
        and not matches(layer.deny, original_name)
        for layer in layers
    )


# -- the file --------------------------------------------------------------------------------


class BridgeConfigError(ValueError):
    """The configuration file is missing, not YAML/JSON, or invalid; the message names the
    field."""


def check_unique(values: Any, what: str) -> None:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{what} must be unique: {value!r} appears twice")
        seen.add(value)


def _location(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def describe(error: ValidationError) -> str:
    """One line per problem: ``field.path: message`` (camelCase names, list indexes)."""
    return "; ".join(f"{_location(e['loc'])}: {e['msg']}" for e in error.errors())


def parse_bridge_config(text: str, source: str = "bridge config") -> BridgeConfig:
    """Parse the file's text (YAML, of which JSON is a subset)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise BridgeConfigError(f"{source}: not valid YAML or JSON: {error}") from None
    if not isinstance(data, dict):
        raise BridgeConfigError(f"{source}: must be a mapping with kind BridgeConfig")
    try:
        return BridgeConfig.model_validate(data)
    except ValidationError as error:
        raise BridgeConfigError(f"{source}: {describe(error)}") from None


def load_bridge_config(path: str | Path) -> BridgeConfig:
    """Read and validate the configuration file at ``path``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise BridgeConfigError(f"{path}: cannot be read: {error.strerror}") from None
    return parse_bridge_config(text, str(path))


def dump_bridge_config(config: BridgeConfig) -> str:
    """The file's text (YAML, camelCase, unset optional fields left out); loads back equal."""
    data = config.model_dump(mode="json", by_alias=True, exclude_none=True)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
