"""The bridge configuration file (``kind: BridgeConfig``), the controller↔bridge contract.

The AgentRun controller writes one of these into the run's ConfigMap; the ``mcp-bridge``
sidecar reads it from the mounted file (``mcp-operator bridge --config FILE``) and again when
it changes. This module owns the file format:

- the pydantic models (camelCase on the wire like :mod:`mcp_operator.api.common`, unknown fields
  rejected, every field documented), versioned as ``mcp-operator.dev/v1alpha1``; a server's
  call policy is :mod:`mcp_operator.api.bridge_policy`'s, its filter layers
  :mod:`mcp_operator.api.bridge_filters`';
- :func:`load_bridge_config` / :func:`dump_bridge_config`: read and write the file, with an
  error that names the offending field; a dump loads back to an equal object.

No secret value is ever in this file: a header whose value is secret names the file of a
mounted Secret key (``valueFile``) and the bridge reads it. Resolving servers, rendering the
ConfigMap and mounting Secrets are the controller's job; enforcing the policy is the bridge's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Final, Literal

import yaml
from pydantic import Field, StringConstraints, ValidationError, model_validator

from mcp_operator.api.bridge_filters import FilterLayer, tool_allowed
from mcp_operator.api.bridge_policy import CallPolicy
from mcp_operator.api.common import (
    HEADER_NAME_PATTERN,
    PATH_PATTERN,
    PREFIX_MAX_LENGTH,
    PREFIX_PATTERN,
    URL_PATTERN,
    ConfigModel,
    DnsLabel,
    DnsSubdomain,
    check_exactly_one,
    check_unique,
)

API_VERSION: Final = "mcp-operator.dev/v1alpha1"
KIND: Final = "BridgeConfig"

ABSOLUTE_PATH_PATTERN = r"^/[^\x00]*$"

AbsolutePath = Annotated[
    str, StringConstraints(min_length=2, max_length=4096, pattern=ABSOLUTE_PATH_PATTERN)
]


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


# -- the file --------------------------------------------------------------------------------


class BridgeConfigError(ValueError):
    """The configuration file is missing, not YAML/JSON, or invalid; the message names the
    field."""


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
