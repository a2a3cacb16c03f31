"""The AgentRun model (``mcp-operator.dev/v1alpha1``): spec and status.

Mirrors ``crds/agentruns.mcp-operator.dev.yaml`` (see :mod:`mcp_operator.api.common`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from mcp_operator.api.common import (
    PREFIX_MAX_LENGTH,
    REASON_PATTERN,
    URL_PATTERN,
    AdmissionLayer,
    Arguments,
    CallPolicySpec,
    Commands,
    Conditions,
    Counter,
    DnsLabel,
    DnsSubdomain,
    EnvVars,
    Generation,
    Globs,
    Image,
    KindObject,
    ResourceRequirements,
    SecretKey,
    SpecModel,
    StatusModel,
    TracingSpec,
    UriGlobs,
    check_env,
    check_globs,
    check_unique,
)
from mcp_operator.api.network import RunNetworkSpec


class ServerRef(SpecModel):
    """An MCPServer an agent may use, with run-level filters that narrow the server's own."""

    name: DnsSubdomain
    namespace: DnsLabel | None = None
    optional: bool = False
    tools_allow: Globs | None = None
    tools_deny: Globs | None = None
    prompts_allow: Globs | None = None
    prompts_deny: Globs | None = None
    resources_allow: UriGlobs | None = None
    resources_deny: UriGlobs | None = None

    @model_validator(mode="after")
    def _unique_globs(self) -> ServerRef:
        check_globs(self.tools_allow, self.tools_deny)
        check_globs(self.prompts_allow, self.prompts_deny, "prompts")
        check_globs(self.resources_allow, self.resources_deny, "resources")
        return self


class AgentSpec(SpecModel):
    """The agent container."""

    image: Image
    command: Commands | None = None
    args: Arguments | None = None
    env: EnvVars | None = None
    resources: ResourceRequirements | None = None
    service_account_name: DnsSubdomain | None = None
    automount_service_account_token: bool = False
    """Mount a Kubernetes API token of the run's ServiceAccount into the agent container
    (never a token of an MCPServer's audience: those are the bridge's alone)."""

    @model_validator(mode="after")
    def _unique_env(self) -> AgentSpec:
        check_env(self.env)
        return self


class AuditSpec(SpecModel):
    """Where the bridge writes one JSON line per call."""

    stdout: bool = True
    file: bool = False


class ApprovalSecretRef(SpecModel):
    """A key of a Secret in the run's namespace."""

    name: DnsSubdomain
    key: SecretKey


class ApprovalWebhookSpec(SpecModel):
    """Where the bridge asks a person about held calls of an unattended run."""

    url: str = Field(max_length=2048, pattern=URL_PATTERN)
    timeout_seconds: int = Field(default=300, ge=1, le=3600)
    secret_ref: ApprovalSecretRef


class ElicitationApprovalSpec(SpecModel):
    """Approval asked of the calling agent itself (its human), when it declared elicitation."""

    timeout_seconds: int = Field(default=300, ge=1, le=300)


class ApprovalSpec(SpecModel):
    """How calls that the rules hold for approval are approved."""

    elicitation: ElicitationApprovalSpec | None = None
    webhook: ApprovalWebhookSpec | None = None


class BridgeSpec(SpecModel):
    """The mcp-bridge sidecar."""

    enabled: bool = True
    port: int = Field(default=7800, ge=1024, le=65534)
    image: Image | None = None
    policy: CallPolicySpec | None = None
    audit: AuditSpec = Field(default_factory=AuditSpec)
    approval: ApprovalSpec | None = None
    discovery: Literal["full", "search"] = "full"
    tracing: TracingSpec | None = None


class AgentRunSpec(SpecModel):
    """Desired state of an agent run."""

    mcp_servers: Annotated[list[ServerRef], Field(min_length=1, max_length=32)]
    agent: AgentSpec
    bridge: BridgeSpec = Field(default_factory=BridgeSpec)
    active_deadline_seconds: int | None = Field(default=None, ge=1, le=604800)
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0, le=604800)
    network: RunNetworkSpec | None = None

    @model_validator(mode="after")
    def _unique_servers(self) -> AgentRunSpec:
        check_unique((ref.name for ref in self.mcp_servers), "mcpServers names")
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

    admission: AdmissionLayer | None = None
    observed_generation: Generation | None = None
    pod_name: Annotated[str, StringConstraints(max_length=253)] | None = None
    config_map_name: Annotated[str, StringConstraints(max_length=253)] | None = None
    servers: Annotated[list[ServerBinding], Field(max_length=32)] | None = None
    tool_count: Counter | None = None
    start_time: datetime | None = None
    completion_time: datetime | None = None
    conditions: Conditions | None = None


class AgentRun(KindObject):
    """An AgentRun object as the API server stores it."""

    kind: Literal["AgentRun"] = "AgentRun"
    spec: AgentRunSpec
    status: AgentRunStatus | None = Field(
        # The CRD's default: observedGeneration 0 until the operator has seen the object.
        default_factory=lambda: AgentRunStatus(observed_generation=0)
    )

    def server_namespace(self, ref: ServerRef) -> str:
        """The namespace of a referenced server: its own, or the run's."""
        if ref.namespace is not None:
            return ref.namespace
        if self.metadata.namespace is None:
            raise ValueError(f"AgentRun {self.metadata.name} has no namespace to default to")
        return self.metadata.namespace
