"""Pydantic models of the custom resources MCPServer and AgentRun (``mcp-operator.dev/v1alpha1``).

The CRD YAML under ``crds/`` is the one source of truth for the schema; these models mirror
it field for field (``tests/unit/test_models_match_crds.py`` fails on any drift in names,
required-ness, defaults, enums and bounds). Attributes are snake_case, the wire names are
camelCase aliases: parse with ``Model.model_validate(body)`` and write back with
``model_dump(by_alias=True, exclude_none=True)`` (add ``mode="json"`` for status, whose
timestamps are :class:`datetime.datetime`).

Spec models forbid unknown fields, like the API server under strict validation. The
validators repeat the CRD's CEL rules and list-key uniqueness, so that the CLI and the unit
tests catch an invalid object without a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Annotated, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.alias_generators import to_camel

from mcp_operator.mcp.naming import default_prefix

# -- patterns (identical to the CRD's; Go RE2 and pydantic's regex agree on them) --------------

DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
SECRET_KEY_PATTERN = r"^[-._a-zA-Z0-9]+$"
HEADER_NAME_PATTERN = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"
"""An HTTP header field name: an RFC 9110 token."""
ENV_NAME_PATTERN = r"^[ -<>-~]+$"
"""Printable ASCII except ``=`` (what Kubernetes accepts for environment variable names)."""
GLOB_PATTERN = r"^[A-Za-z0-9_.*?/-]+$"
"""Tool-name characters plus the two wildcards ``*`` and ``?``; no ``[...]`` classes."""
PREFIX_PATTERN = r"^[a-z][a-z0-9_-]*$"
URL_PATTERN = r"^https?://\S+$"
PATH_PATTERN = r"^/\S*$"
REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

PREFIX_MAX_LENGTH = 32
MAX_INT64_JSON = 9007199254740991
"""The largest integer a JSON number holds exactly (the CRD's bound on generations)."""

# -- constrained scalar types ----------------------------------------------------------------

DnsSubdomain = Annotated[
    str, StringConstraints(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)
]
DnsLabel = Annotated[str, StringConstraints(min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN)]
SecretKey = Annotated[
    str, StringConstraints(min_length=1, max_length=253, pattern=SECRET_KEY_PATTERN)
]
Glob = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=GLOB_PATTERN)]
Argument = Annotated[str, StringConstraints(max_length=4096)]
Image = Annotated[str, StringConstraints(min_length=1, max_length=1024)]
Quantity = int | Annotated[str, StringConstraints(pattern=QUANTITY_PATTERN)]
Generation = Annotated[int, Field(ge=0, le=MAX_INT64_JSON)]
Counter = Annotated[int, Field(ge=0, le=1_000_000)]

Globs = Annotated[list[Glob], Field(max_length=64)]
Commands = Annotated[list[Argument], Field(max_length=64)]
Arguments = Annotated[list[Argument], Field(max_length=256)]


def _check_unique(values: Iterable[str], what: str) -> None:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{what} must be unique: {value!r} appears twice")
        seen.add(value)


# -- base classes ----------------------------------------------------------------------------


class SpecModel(BaseModel):
    """A part of a spec: camelCase on the wire, unknown fields rejected."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class StatusModel(BaseModel):
    """A part of a status: camelCase on the wire, unknown fields ignored (older operators)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


# -- shared parts ----------------------------------------------------------------------------


class ObjectMeta(BaseModel):
    """The parts of ``metadata`` the operator reads; everything else is ignored."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    name: str
    namespace: str | None = None
    uid: str | None = None
    generation: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class KeySelector(SpecModel):
    """A key of a Secret or ConfigMap (``secretKeyRef`` / ``configMapKeyRef`` of an EnvVar)."""

    name: DnsSubdomain
    key: SecretKey
    optional: bool | None = None


class ObjectFieldSelector(SpecModel):
    """``fieldRef`` of an EnvVar: a field of the Pod."""

    api_version: Annotated[str, StringConstraints(max_length=64)] | None = None
    field_path: Annotated[str, StringConstraints(min_length=1, max_length=256)]


class ResourceFieldSelector(SpecModel):
    """``resourceFieldRef`` of an EnvVar: a resource of a container."""

    container_name: Annotated[str, StringConstraints(max_length=63)] | None = None
    resource: Annotated[str, StringConstraints(min_length=1, max_length=253)]
    divisor: Quantity | None = None


class EnvVarSource(SpecModel):
    """``valueFrom`` of an EnvVar: exactly one source."""

    secret_key_ref: KeySelector | None = None
    config_map_key_ref: KeySelector | None = None
    field_ref: ObjectFieldSelector | None = None
    resource_field_ref: ResourceFieldSelector | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> EnvVarSource:
        sources = [
            self.secret_key_ref,
            self.config_map_key_ref,
            self.field_ref,
            self.resource_field_ref,
        ]
        if sum(source is not None for source in sources) != 1:
            raise ValueError(
                "must set exactly one of secretKeyRef, configMapKeyRef, fieldRef or "
                "resourceFieldRef"
            )
        return self


class EnvVar(SpecModel):
    """An environment variable in the Kubernetes EnvVar shape."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=ENV_NAME_PATTERN)]
    value: Annotated[str, StringConstraints(max_length=32768)] | None = None
    value_from: EnvVarSource | None = None

    @model_validator(mode="after")
    def _not_both(self) -> EnvVar:
        if self.value is not None and self.value_from is not None:
            raise ValueError("must not set both value and valueFrom")
        return self


EnvVars = Annotated[list[EnvVar], Field(max_length=128)]
Amounts = Annotated[
    dict[Annotated[str, StringConstraints(max_length=253)], Quantity], Field(max_length=16)
]


class ResourceRequirements(SpecModel):
    """Compute resources of a container (Kubernetes ResourceRequirements, without claims)."""

    requests: Amounts | None = None
    limits: Amounts | None = None


def _check_env(env: list[EnvVar] | None) -> None:
    _check_unique((var.name for var in env or ()), "env names")


def _check_globs(allow: list[str] | None, deny: list[str] | None) -> None:
    _check_unique(allow or (), "toolsAllow entries")
    _check_unique(deny or (), "toolsDeny entries")


class Condition(StatusModel):
    """A condition in the ``metav1.Condition`` shape."""

    type: Annotated[str, StringConstraints(max_length=316, pattern=CONDITION_TYPE_PATTERN)]
    status: Literal["True", "False", "Unknown"]
    observed_generation: Generation | None = None
    last_transition_time: datetime
    reason: Annotated[str, StringConstraints(min_length=1, max_length=1024, pattern=REASON_PATTERN)]
    message: Annotated[str, StringConstraints(max_length=32768)]


Conditions = Annotated[list[Condition], Field(max_length=8)]


# -- MCPServer -------------------------------------------------------------------------------


class SecretKeyRef(SpecModel):
    """A key of a Secret in the MCPServer's namespace."""

    name: DnsSubdomain
    key: SecretKey


class HeaderValueFrom(SpecModel):
    """Where a header value is read from (only ever a Secret)."""

    secret_key_ref: SecretKeyRef


class HeaderSpec(SpecModel):
    """An HTTP header sent on every request to the server: ``value`` xor ``valueFrom``."""

    name: Annotated[
        str, StringConstraints(min_length=1, max_length=256, pattern=HEADER_NAME_PATTERN)
    ]
    value: Annotated[str, StringConstraints(max_length=8192)] | None = None
    value_from: HeaderValueFrom | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> HeaderSpec:
        if (self.value is None) == (self.value_from is None):
            raise ValueError("must set exactly one of value or valueFrom")
        return self


class DeploymentSpec(SpecModel):
    """How the operator runs a managed server (a Deployment and a Service)."""

    image: Image
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    command: Commands | None = None
    args: Arguments | None = None
    env: EnvVars | None = None
    port: int = Field(default=8080, ge=1, le=65535)
    path: str = Field(default="/mcp", max_length=256, pattern=PATH_PATTERN)
    replicas: int = Field(default=1, ge=0, le=100)
    resources: ResourceRequirements | None = None
    service_account_name: DnsSubdomain | None = None

    @model_validator(mode="after")
    def _unique_env(self) -> DeploymentSpec:
        _check_env(self.env)
        return self


class ProbeSpec(SpecModel):
    """How and how often the operator discovers the server's tools."""

    enabled: bool = True
    interval_seconds: int = Field(default=300, ge=10, le=86400)
    timeout_seconds: int = Field(default=10, ge=1, le=300)


Transport = Literal["stdio", "streamable-http", "sse"]

PiiMode = Literal["off", "detect", "redact", "block"]
"""PII scanning modes, from the loosest to the strictest."""

NAMESPACE_OR_ANY_PATTERN = r"^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$"


class PiiPolicySpec(SpecModel):
    """PII/PHI scanning per direction; unset: the next level's default (off at the bottom)."""

    arguments: PiiMode | None = None
    results: PiiMode | None = None


class RetrySpec(SpecModel):
    """Automatic retries of transient upstream failures (read-only or idempotent tools only)."""

    max_attempts: int | None = Field(default=None, ge=1, le=5)


class CallPolicySpec(SpecModel):
    """The bridge's call policy: server defaults (MCPServer) that a run may only tighten."""

    pii: PiiPolicySpec | None = None
    retry: RetrySpec | None = None
    timeout_seconds: int | None = Field(default=None, ge=1, le=300)


class AccessSpec(SpecModel):
    """Which AgentRuns may use a server: its own namespace, plus the ones listed (``*``: all)."""

    namespaces: (
        Annotated[
            list[
                Annotated[
                    str,
                    StringConstraints(
                        min_length=1, max_length=63, pattern=NAMESPACE_OR_ANY_PATTERN
                    ),
                ]
            ],
            Field(max_length=64),
        ]
        | None
    ) = None

    def permits(self, namespace: str, server_namespace: str) -> bool:
        """Whether a run in ``namespace`` may use a server that lives in ``server_namespace``."""
        listed = self.namespaces or []
        return namespace == server_namespace or "*" in listed or namespace in listed


class MCPServerSpec(SpecModel):
    """Desired state of an MCP server."""

    mode: Literal["managed", "external"]
    transport: Transport | None = None
    url: str | None = Field(default=None, max_length=2048, pattern=URL_PATTERN)
    headers: Annotated[list[HeaderSpec], Field(max_length=32)] | None = None
    deployment: DeploymentSpec | None = None
    tools_prefix: str | None = Field(
        default=None, min_length=1, max_length=PREFIX_MAX_LENGTH, pattern=PREFIX_PATTERN
    )
    tools_allow: Globs | None = None
    tools_deny: Globs | None = None
    probe: ProbeSpec = Field(default_factory=ProbeSpec)
    suspend: bool = False
    access: AccessSpec | None = None
    policy: CallPolicySpec | None = None

    @model_validator(mode="after")
    def _cross_field_rules(self) -> MCPServerSpec:
        # The same rules as the CRD's x-kubernetes-validations, in the same words.
        if self.mode == "managed":
            if self.deployment is None:
                raise ValueError("spec.deployment: deployment must be set when mode is managed")
            if self.url is not None:
                raise ValueError(
                    "spec.url: url must not be set when mode is managed: "
                    "the operator computes status.url"
                )
            if self.effective_transport == "stdio" and not self.deployment.command:
                raise ValueError(
                    "spec.deployment.command: deployment.command must be set for a stdio "
                    "server: the image's own entrypoint cannot be wrapped"
                )
        else:
            if self.url is None:
                raise ValueError("spec.url: url must be set when mode is external")
            if self.deployment is not None:
                raise ValueError(
                    "spec.deployment: deployment must not be set when mode is external"
                )
            if self.transport == "stdio":
                raise ValueError(
                    "spec.transport: transport must be streamable-http or sse when mode is external"
                )
        _check_unique((h.name.lower() for h in self.headers or ()), "header names (ignoring case)")
        _check_globs(self.tools_allow, self.tools_deny)
        if self.access is not None:
            _check_unique(self.access.namespaces or (), "access.namespaces entries")
        return self

    @property
    def effective_transport(self) -> Transport:
        """``transport``, or its default: ``stdio`` when managed, ``streamable-http`` when
        external."""
        if self.transport is not None:
            return self.transport
        return "stdio" if self.mode == "managed" else "streamable-http"


class ToolAnnotations(StatusModel):
    """A tool's behaviour hints, as the server reports them (untrusted)."""

    title: Annotated[str, StringConstraints(max_length=256)] | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None


class ToolStatus(StatusModel):
    """A tool the server exposes after the filters; ``name`` is the exposed (prefixed) name."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    original_name: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    description: Annotated[str, StringConstraints(max_length=1024)] | None = None
    annotations: ToolAnnotations | None = None


class ServerInfo(StatusModel):
    """What the server said about itself in the handshake."""

    name: Annotated[str, StringConstraints(max_length=256)] | None = None
    version: Annotated[str, StringConstraints(max_length=128)] | None = None
    protocol_version: Annotated[str, StringConstraints(max_length=32)] | None = None


class MCPServerStatus(StatusModel):
    """Observed state of an MCP server, written by the operator."""

    observed_generation: Generation | None = None
    url: Annotated[str, StringConstraints(max_length=2048)] | None = None
    tools: Annotated[list[ToolStatus], Field(max_length=256)] | None = None
    tool_count: Counter | None = None
    discovered_tool_count: Counter | None = None
    server_info: ServerInfo | None = None
    last_probe_time: datetime | None = None
    conditions: Conditions | None = None


class SecretUse(NamedTuple):
    """One key of a Secret that an MCPServer reads, and who reads it."""

    reader: Literal["probe", "pod"]
    """``probe``: a request header of the operator's probe (``spec.headers``); ``pod``: an
    environment variable of the managed server's Pod (``spec.deployment.env``)."""
    name: str
    """The header's or the environment variable's name."""
    secret: str
    key: str


class MCPServer(BaseModel):
    """An MCPServer object as the API server stores it."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    api_version: Literal["mcp-operator.dev/v1alpha1"] = "mcp-operator.dev/v1alpha1"
    kind: Literal["MCPServer"] = "MCPServer"
    metadata: ObjectMeta
    spec: MCPServerSpec
    status: MCPServerStatus | None = None

    @property
    def effective_prefix(self) -> str:
        """``spec.toolsPrefix``, or the prefix derived from ``metadata.name``."""
        if self.spec.tools_prefix is not None:
            return self.spec.tools_prefix
        return default_prefix(self.metadata.name)

    def referenced_secrets(self) -> list[SecretUse]:
        """Every Secret key the server reads: its headers' first, then its Pod's environment."""
        uses = [
            SecretUse(
                "probe", h.name, h.value_from.secret_key_ref.name, h.value_from.secret_key_ref.key
            )
            for h in self.spec.headers or ()
            if h.value_from is not None
        ]
        env = self.spec.deployment.env if self.spec.deployment is not None else None
        for var in env or ():
            ref = var.value_from.secret_key_ref if var.value_from is not None else None
            if ref is not None:
                uses.append(SecretUse("pod", var.name, ref.name, ref.key))
        return uses


# -- AgentRun --------------------------------------------------------------------------------


class ServerRef(SpecModel):
    """An MCPServer an agent may use, with run-level filters that narrow the server's own."""

    name: DnsSubdomain
    namespace: DnsLabel | None = None
    optional: bool = False
    tools_allow: Globs | None = None
    tools_deny: Globs | None = None

    @model_validator(mode="after")
    def _unique_globs(self) -> ServerRef:
        _check_globs(self.tools_allow, self.tools_deny)
        return self


class AgentSpec(SpecModel):
    """The agent container."""

    image: Image
    command: Commands | None = None
    args: Arguments | None = None
    env: EnvVars | None = None
    resources: ResourceRequirements | None = None
    service_account_name: DnsSubdomain | None = None

    @model_validator(mode="after")
    def _unique_env(self) -> AgentSpec:
        _check_env(self.env)
        return self


class AuditSpec(SpecModel):
    """Where the bridge writes one JSON line per call."""

    stdout: bool = True
    file: bool = False


class BridgeSpec(SpecModel):
    """The mcp-bridge sidecar."""

    enabled: bool = True
    port: int = Field(default=7800, ge=1024, le=65534)
    image: Image | None = None
    policy: CallPolicySpec | None = None
    audit: AuditSpec = Field(default_factory=AuditSpec)


class AgentRunSpec(SpecModel):
    """Desired state of an agent run."""

    mcp_servers: Annotated[list[ServerRef], Field(min_length=1, max_length=32)]
    agent: AgentSpec
    bridge: BridgeSpec = Field(default_factory=BridgeSpec)
    active_deadline_seconds: int | None = Field(default=None, ge=1, le=604800)
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0, le=604800)

    @model_validator(mode="after")
    def _unique_servers(self) -> AgentRunSpec:
        _check_unique((ref.name for ref in self.mcp_servers), "mcpServers names")
        return self


class ServerBinding(StatusModel):
    """How one referenced MCPServer was resolved."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=253)]
    namespace: Annotated[str, StringConstraints(min_length=1, max_length=63)]
    url: Annotated[str, StringConstraints(max_length=2048)] | None = None
    prefix: Annotated[str, StringConstraints(max_length=PREFIX_MAX_LENGTH)] | None = None
    tool_count: Counter | None = None
    ready: bool
    reason: Annotated[str, StringConstraints(max_length=64, pattern=REASON_PATTERN)] | None = None


class AgentRunStatus(StatusModel):
    """Observed state of an agent run, written by the operator."""

    observed_generation: Generation | None = None
    pod_name: Annotated[str, StringConstraints(max_length=253)] | None = None
    config_map_name: Annotated[str, StringConstraints(max_length=253)] | None = None
    servers: Annotated[list[ServerBinding], Field(max_length=32)] | None = None
    tool_count: Counter | None = None
    start_time: datetime | None = None
    completion_time: datetime | None = None
    conditions: Conditions | None = None


class AgentRun(BaseModel):
    """An AgentRun object as the API server stores it."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    api_version: Literal["mcp-operator.dev/v1alpha1"] = "mcp-operator.dev/v1alpha1"
    kind: Literal["AgentRun"] = "AgentRun"
    metadata: ObjectMeta
    spec: AgentRunSpec
    status: AgentRunStatus | None = None

    def server_namespace(self, ref: ServerRef) -> str:
        """The namespace of a referenced server: its own, or the run's."""
        if ref.namespace is not None:
            return ref.namespace
        if self.metadata.namespace is None:
            raise ValueError(f"AgentRun {self.metadata.name} has no namespace to default to")
        return self.metadata.namespace


__all__ = [
    "AccessSpec",
    "AgentRun",
    "AgentRunSpec",
    "AgentRunStatus",
    "AgentSpec",
    "AuditSpec",
    "BridgeSpec",
    "CallPolicySpec",
    "Condition",
    "DeploymentSpec",
    "EnvVar",
    "EnvVarSource",
    "HeaderSpec",
    "HeaderValueFrom",
    "KeySelector",
    "MCPServer",
    "MCPServerSpec",
    "MCPServerStatus",
    "ObjectFieldSelector",
    "ObjectMeta",
    "PiiMode",
    "PiiPolicySpec",
    "ProbeSpec",
    "ResourceFieldSelector",
    "ResourceRequirements",
    "RetrySpec",
    "SecretKeyRef",
    "SecretUse",
    "ServerBinding",
    "ServerInfo",
    "ServerRef",
    "ToolAnnotations",
    "ToolStatus",
    "Transport",
]
