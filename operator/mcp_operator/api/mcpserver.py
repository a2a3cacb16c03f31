"""The MCPServer model (``mcp-operator.dev/v1alpha1``): spec, status, and what a server reads.

Mirrors ``crds/mcpservers.mcp-operator.dev.yaml`` (see :mod:`mcp_operator.api.common`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import (
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from mcp_operator.api.access import AccessSpec, AccessStatus
from mcp_operator.api.auth import AuthSpec, SecretKeyRef
from mcp_operator.api.common import (
    ENDPOINT_PATH_PATTERN,
    HEADER_NAME_PATTERN,
    HEADER_VALUE_CONTROL,
    PREFIX_MAX_LENGTH,
    PREFIX_PATTERN,
    QUANTITY_PATTERN,
    URL_PATTERN,
    AdmissionLayer,
    Arguments,
    CallPolicySpec,
    Commands,
    Conditions,
    Counter,
    DnsSubdomain,
    EnvVars,
    Generation,
    Globs,
    Image,
    KindObject,
    ResourceRequirements,
    SpecModel,
    StatusModel,
    TracingSpec,
    UriGlobs,
    check_env,
    check_exactly_one,
    check_globs,
    check_unique,
)
from mcp_operator.api.network import ServerNetworkSpec
from mcp_operator.mcp.definitions import SHA256_PATTERN
from mcp_operator.mcp.naming import default_prefix

WRITABLE_PATH_PATTERN = r"^/[^:]*[^/:]$"
"""An absolute path, not ``/`` itself, without ``:`` and without a trailing ``/``."""
RESERVED_MOUNT_PATHS = ("/tmp", "/run/mcp", "/run/mcp-exec")
"""Where the operator mounts its own volumes into the server container."""


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

    @field_validator("value")
    @classmethod
    def _no_control_characters(cls, value: str | None) -> str | None:
        if value is not None and HEADER_VALUE_CONTROL.search(value):
            raise ValueError("must not contain control characters other than tab")
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> HeaderSpec:
        check_exactly_one(self, "value", "value_from")
        return self


class LocalObjectReference(SpecModel):
    """The name of an object in the MCPServer's namespace (``imagePullSecrets`` entries)."""

    name: DnsSubdomain


class WritableDir(SpecModel):
    """A writable ``emptyDir`` mounted into the server container (its root stays read-only)."""

    mount_path: Annotated[
        str, StringConstraints(min_length=2, max_length=256, pattern=WRITABLE_PATH_PATTERN)
    ]
    size_limit: Annotated[str, StringConstraints(max_length=32, pattern=QUANTITY_PATTERN)] = "256Mi"


class DeploymentSpec(SpecModel):
    """How the operator runs a managed server (a Deployment and a Service)."""

    image: Image
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    command: Commands | None = None
    args: Arguments | None = None
    env: EnvVars | None = None
    port: int = Field(default=8080, ge=1, le=65535)
    path: str = Field(default="/mcp", max_length=256, pattern=ENDPOINT_PATH_PATTERN)
    replicas: int = Field(default=1, ge=0, le=100)
    resources: ResourceRequirements | None = None
    service_account_name: DnsSubdomain | None = None
    image_pull_secrets: Annotated[list[LocalObjectReference], Field(max_length=16)] | None = None
    writable_dirs: Annotated[list[WritableDir], Field(max_length=16)] | None = None
    sessions: Literal["shared", "perSession"] = "shared"
    """stdio: one server process shared by every client (``shared``), or one per MCP
    session, 2026-07-28 callers one each (``perSession``: the adapter's
    ``--child-per-session``)."""

    @model_validator(mode="after")
    def _unique_env(self) -> DeploymentSpec:
        check_env(self.env)
        check_unique((s.name for s in self.image_pull_secrets or ()), "imagePullSecrets names")
        check_unique((d.mount_path for d in self.writable_dirs or ()), "writableDirs mountPaths")
        for writable in self.writable_dirs or ():
            if ".." in writable.mount_path.split("/"):
                raise ValueError("writableDirs mountPath must not contain a '..' segment")
            if writable.mount_path in RESERVED_MOUNT_PATHS:
                raise ValueError(
                    f"writableDirs mountPath {writable.mount_path} is reserved: "
                    "/tmp, /run/mcp and /run/mcp-exec are mounted by the operator"
                )
        return self


class ProbeSpec(SpecModel):
    """How and how often the operator discovers the server's tools."""

    enabled: bool = True
    interval_seconds: int = Field(default=300, ge=10, le=86400)
    timeout_seconds: int = Field(default=10, ge=1, le=300)
    auth: AuthSpec | None = None


Transport = Literal["stdio", "streamable-http", "sse"]


class ToolOverrideSpec(SpecModel):
    """Our title, description and fixed arguments for one of the server's tools."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    title: Annotated[str, StringConstraints(max_length=256)] | None = None
    description: Annotated[str, StringConstraints(max_length=4096)] | None = None
    fixed_arguments: Annotated[dict[str, Any], Field(max_length=32)] | None = None


class MCPServerSpec(SpecModel):
    """Desired state of an MCP server."""

    mode: Literal["managed", "external"]
    transport: Transport | None = None
    url: str | None = Field(default=None, max_length=2048, pattern=URL_PATTERN)
    headers: Annotated[list[HeaderSpec], Field(max_length=32)] | None = None
    deployment: DeploymentSpec | None = None
    tools_prefix: str | None = Field(
        default=None, max_length=PREFIX_MAX_LENGTH, pattern=PREFIX_PATTERN
    )
    tools_allow: Globs | None = None
    tools_deny: Globs | None = None
    probe: ProbeSpec = Field(default_factory=ProbeSpec)
    suspend: bool = False
    access: AccessSpec | None = None
    policy: CallPolicySpec | None = None
    prompts_allow: Globs | None = None
    prompts_deny: Globs | None = None
    resources_allow: UriGlobs | None = None
    resources_deny: UriGlobs | None = None
    auth: AuthSpec | None = None
    tools_override: Annotated[list[ToolOverrideSpec], Field(max_length=256)] | None = None
    tools_pinning: Literal["strict", "pin", "off"] = "pin"
    """When a definition digest becomes the pin (:mod:`~mcp_operator.controller.mcpserver.pins`)."""
    network: ServerNetworkSpec | None = None
    tracing: TracingSpec | None = None
    """The ``OTEL_*`` variables of the Pod's adapter or front (managed only)."""

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
            if self.network is not None:
                raise ValueError(
                    "spec.network: network must not be set when mode is external: "
                    "the operator runs no Pods for it"
                )
            if self.tracing is not None:
                raise ValueError(
                    "spec.tracing: tracing must not be set when mode is external: "
                    "the operator runs no adapter for it"
                )
        self._tracing_rule()
        check_unique((h.name.lower() for h in self.headers or ()), "header names (ignoring case)")
        self._auth_rules()
        check_globs(self.tools_allow, self.tools_deny)
        check_globs(self.prompts_allow, self.prompts_deny, "prompts")
        check_globs(self.resources_allow, self.resources_deny, "resources")
        check_unique((o.name for o in self.tools_override or ()), "toolsOverride names")
        if self.access is not None:
            check_unique(self.access.namespaces or (), "access.namespaces entries")
        return self

    def _tracing_rule(self) -> None:
        if self.tracing is None or self.mode != "managed":
            return
        transport = self.effective_transport
        unauthenticated = self.access is not None and self.access.authentication == "none"
        if transport == "sse" or (transport == "streamable-http" and unauthenticated):
            raise ValueError(
                "spec.tracing: tracing needs the adapter or front of ours in the Pod: "
                "transport stdio, or streamable-http with access.authentication other than none"
            )

    def _auth_rules(self) -> None:
        if self.auth is None and self.probe.auth is None:
            return
        if self.mode != "external":
            raise ValueError(
                "spec.auth: auth and probe.auth must be set only when mode is external"
            )
        if self.effective_transport != "streamable-http":
            raise ValueError("spec.auth: auth and probe.auth need transport streamable-http")
        if any(h.name.lower() == "authorization" for h in self.headers or ()):
            raise ValueError(
                "spec.auth: auth and probe.auth must not be set together with an "
                "Authorization header"
            )

    @property
    def probe_auth(self) -> AuthSpec | None:
        """How the probe authenticates: ``probe.auth``, else the calls' ``auth``."""
        return self.probe.auth or self.auth

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
    definition_sha256: (
        Annotated[str, StringConstraints(max_length=64, pattern=SHA256_PATTERN)] | None
    ) = None
    """The pin: :func:`~mcp_operator.mcp.definitions.definition_digest` of the definition."""


class ServerInfo(StatusModel):
    """What the server said about itself in the handshake."""

    name: Annotated[str, StringConstraints(max_length=256)] | None = None
    version: Annotated[str, StringConstraints(max_length=128)] | None = None
    protocol_version: Annotated[str, StringConstraints(max_length=32)] | None = None


class MCPServerStatus(StatusModel):
    """Observed state of an MCP server, written by the operator."""

    admission: AdmissionLayer | None = None
    observed_generation: Generation | None = None
    url: Annotated[str, StringConstraints(max_length=2048)] | None = None
    access: AccessStatus | None = None
    tools: Annotated[list[ToolStatus], Field(max_length=256)] | None = None
    tool_count: Counter | None = None
    discovered_tool_count: Counter | None = None
    server_info: ServerInfo | None = None
    last_probe_time: datetime | None = None
    conditions: Conditions | None = None


class SecretUse(NamedTuple):
    """One key of a Secret that an MCPServer reads, and who reads it."""

    reader: Literal["probe", "pod", "registry", "auth"]
    """``probe``: a request header of the operator's probe (``spec.headers``); ``auth``: a
    client secret of ``spec.auth`` or ``spec.probe.auth``, sent to the token endpoint (by the
    operator's probe and the bridge, never to the server); ``pod``: an
    environment variable of the managed server's Pod (``spec.deployment.env``);
    ``registry``: a pull Secret (``spec.deployment.imagePullSecrets``), read by the operator
    when it reads the image's configuration."""
    name: str
    """The header's or the environment variable's name."""
    secret: str
    key: str


class MCPServer(KindObject):
    """An MCPServer object as the API server stores it."""

    kind: Literal["MCPServer"] = "MCPServer"
    spec: MCPServerSpec
    status: MCPServerStatus | None = Field(
        # The CRD's default: observedGeneration 0 until the operator has seen the object.
        default_factory=lambda: MCPServerStatus(observed_generation=0)
    )

    @property
    def effective_prefix(self) -> str:
        """``spec.toolsPrefix``, or the prefix derived from ``metadata.name``."""
        if self.spec.tools_prefix is not None:
            return self.spec.tools_prefix
        return default_prefix(self.metadata.name)

    def referenced_secrets(self) -> list[SecretUse]:
        """Every Secret key the server reads: its headers' first, then its client secrets
        (``auth``, ``probe.auth``), then its Pod's environment, then its pull Secrets."""
        uses = [
            SecretUse(
                "probe", h.name, h.value_from.secret_key_ref.name, h.value_from.secret_key_ref.key
            )
            for h in self.spec.headers or ()
            if h.value_from is not None
        ]
        for where, auth in (("auth", self.spec.auth), ("probe.auth", self.spec.probe.auth)):
            secret = auth.client_secret_ref if auth is not None else None
            if secret is not None:
                uses.append(SecretUse("auth", where, secret.name, secret.key))
        env = self.spec.deployment.env if self.spec.deployment is not None else None
        for var in env or ():
            ref = var.value_from.secret_key_ref if var.value_from is not None else None
            if ref is not None:
                uses.append(SecretUse("pod", var.name, ref.name, ref.key))
        pulls = self.spec.deployment.image_pull_secrets if self.spec.deployment else None
        for pull in pulls or ():
            uses.append(SecretUse("registry", "imagePullSecrets", pull.name, ".dockerconfigjson"))
        return uses
