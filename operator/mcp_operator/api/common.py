"""What both custom resources share: patterns, constrained types, base classes, shared parts.

The CRD YAML under ``crds/`` is the one source of truth for the schema; the models in
``api.mcpserver``, ``api.agentrun`` and here mirror it field for field
(``tests/unit/test_models_match_crds.py`` fails on any drift in names, required-ness,
defaults, enums and bounds). Attributes are snake_case, the wire names are camelCase
aliases: parse with ``Model.model_validate(body)`` and write back with
``model_dump(by_alias=True, exclude_none=True)`` (add ``mode="json"`` for status, whose
timestamps are :class:`datetime.datetime`).

Spec models forbid unknown fields, like the API server under strict validation. The
validators repeat the CRD's CEL rules and list-key uniqueness, so that the CLI and the unit
tests catch an invalid object without a cluster.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from mcp_operator.api.expressions import MAX_EXPRESSION_CHARS, check_expression

# -- patterns (identical to the CRD's; Go RE2 and pydantic's regex agree on them) --------------

DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
SECRET_KEY_PATTERN = r"^[-._a-zA-Z0-9]+$"
HEADER_NAME_PATTERN = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"
HEADER_VALUE_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\x80-\x9f]")
"""A character a header value must not hold: a control character other than tab (the CRD's
CEL rule on ``headers[].value`` says the same, in the same words)."""
"""An HTTP header field name: an RFC 9110 token."""
ENV_NAME_PATTERN = r"^[ -<>-~]+$"
"""Printable ASCII except ``=`` (what Kubernetes accepts for environment variable names)."""
GLOB_PATTERN = r"^[A-Za-z0-9_.*?/-]+$"
"""Tool-name characters plus the two wildcards ``*`` and ``?``; no ``[...]`` classes."""
PREFIX_PATTERN = r"^([a-z][a-z0-9_-]*)?$"
"""A prefix, or the empty prefix: a server that opts out of prefixing (absent = derived)."""
URI_GLOB_PATTERN = r"^[!-~]+$"
"""A glob on a resource URI or URI template: printable ASCII without spaces."""
URL_PATTERN = r"^https?://\S+$"
PATH_PATTERN = r"^/\S*$"
_PCHAR = "A-Za-z0-9_~!$&'()*+,;=:@-"
ENDPOINT_PATH_PATTERN = (
    rf"^(/([{_PCHAR}][.{_PCHAR}]*|\.[{_PCHAR}][.{_PCHAR}]*|\.\.[.{_PCHAR}]+)?)+$"
)
"""A URL path of unreserved characters and sub-delimiters, segment by segment, in which no
segment is ``.`` or ``..``, and without ``%``: pasted into the API server's service-proxy URL,
a dot segment (or one percent-encoded, ``%2e%2e``) would step out of the proxy prefix."""
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
AdmissionLayer = Literal["PolicyAndLabels", "Labels"]
"""``status.admission``: the tenant ValidatingAdmissionPolicy and the opt-in labels, or the
labels alone (docs/security.md, "Admission policies")."""

Globs = Annotated[list[Glob], Field(max_length=64)]
UriGlob = Annotated[str, StringConstraints(min_length=1, max_length=512, pattern=URI_GLOB_PATTERN)]
UriGlobs = Annotated[list[UriGlob], Field(max_length=64)]
Commands = Annotated[list[Argument], Field(max_length=64)]
Arguments = Annotated[list[Argument], Field(max_length=256)]


def check_unique(values: Iterable[str], what: str) -> None:
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


class ConfigModel(BaseModel):
    """A part of the bridge configuration: camelCase on the wire, unknown fields rejected."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_attribute_docstrings=True,
    )


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


class KindObject(BaseModel):
    """An object of one of the operator's kinds as the API server stores it: group version,
    kind and metadata; each kind's model names its ``kind`` and adds its spec and status."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    api_version: Literal["mcp-operator.dev/v1alpha1"] = "mcp-operator.dev/v1alpha1"
    kind: str
    metadata: ObjectMeta


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
        check_exactly_one(
            self, "secret_key_ref", "config_map_key_ref", "field_ref", "resource_field_ref"
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


def check_exactly_one(model: BaseModel, *fields: str) -> None:
    """Refuse ``model`` unless exactly one of ``fields`` (attribute names) is set; the
    message names them as on the wire (camelCase)."""
    if sum(getattr(model, name) is not None for name in fields) != 1:
        wire = [to_camel(name) for name in fields]
        raise ValueError(f"must set exactly one of {', '.join(wire[:-1])} or {wire[-1]}")


def check_env(env: list[EnvVar] | None) -> None:
    check_unique((var.name for var in env or ()), "env names")


def check_globs(allow: list[str] | None, deny: list[str] | None, kind: str = "tools") -> None:
    check_unique(allow or (), f"{kind}Allow entries")
    check_unique(deny or (), f"{kind}Deny entries")


class Condition(StatusModel):
    """A condition in the ``metav1.Condition`` shape."""

    type: Annotated[str, StringConstraints(max_length=316, pattern=CONDITION_TYPE_PATTERN)]
    status: Literal["True", "False", "Unknown"]
    observed_generation: Generation | None = None
    last_transition_time: datetime
    reason: Annotated[str, StringConstraints(min_length=1, max_length=1024, pattern=REASON_PATTERN)]
    message: Annotated[str, StringConstraints(max_length=32768)]


Conditions = Annotated[list[Condition], Field(max_length=8)]


# -- the bridge's call policy (MCPServer defaults, AgentRun tightening) ----------------------

PiiMode = Literal["off", "detect", "redact", "block"]
"""PII scanning modes, from the loosest to the strictest."""


class PiiPolicySpec(SpecModel):
    """PII/PHI scanning per direction; unset: the next level's default (off at the bottom)."""

    arguments: PiiMode | None = None
    results: PiiMode | None = None


class RetrySpec(SpecModel):
    """Automatic retries of transient upstream failures (read-only or idempotent tools only)."""

    max_attempts: int | None = Field(default=None, ge=1, le=5)


class PolicyRuleSpec(SpecModel):
    """An authorization rule: when ``match`` (CEL, :mod:`~mcp_operator.api.expressions`) is
    true for a call, ``action`` decides it."""

    match: Annotated[str, StringConstraints(min_length=1, max_length=MAX_EXPRESSION_CHARS)]
    action: Literal["allow", "deny", "approve"]
    reason: Annotated[str, StringConstraints(max_length=512)] | None = None

    @field_validator("match")
    @classmethod
    def _compiles(cls, value: str) -> str:
        return check_expression(value)


class RateLimitSpec(SpecModel):
    """A token bucket per tool: ``perMinute`` tokens a minute, at most ``burst`` at once."""

    tools: Annotated[list[Glob], Field(min_length=1, max_length=64)]
    per_minute: int = Field(ge=1, le=100_000)
    burst: int | None = Field(default=None, ge=1, le=10_000)


class TracingSpec(SpecModel):
    """OpenTelemetry traces of our program in a Pod (an AgentRun's bridge, a managed
    MCPServer's adapter or front), exported over OTLP/HTTP (docs/tracing.md)."""

    endpoint: str = Field(pattern=r"^https?://[^\s]+$", max_length=2048)
    """The collector's OTLP/HTTP base URL (``OTEL_EXPORTER_OTLP_ENDPOINT``)."""
    sample_percent: int = Field(default=100, ge=0, le=100)
    """The share of new traces recorded; a call that arrives in a sampled trace is recorded."""


class CallPolicySpec(SpecModel):
    """The bridge's call policy: server defaults (MCPServer) that a run may only tighten."""

    pii: PiiPolicySpec | None = None
    retry: RetrySpec | None = None
    timeout_seconds: int | None = Field(default=None, ge=1, le=300)
    rules: Annotated[list[PolicyRuleSpec], Field(max_length=64)] | None = None
    rate_limits: Annotated[list[RateLimitSpec], Field(max_length=32)] | None = None
    require_approval: Globs | None = None
    approve_destructive: bool | None = None
