"""``spec.network`` of both kinds: who may reach a managed server, where Pods may connect.

Mirrors the ``network`` parts of ``crds/`` (see :mod:`mcp_operator.api.common`): a subset
of Kubernetes' ``NetworkPolicyPeer`` (``podSelector``, ``namespaceSelector``, ``ipBlock``)
and ``NetworkPolicyPort``, bounded and checked here as the CRD's CEL rules check them, so
that what the operator renders into a NetworkPolicy is something the API server accepts.
What the operator renders from them is :mod:`mcp_operator.controller.mcpserver.network` and
:mod:`mcp_operator.controller.agentrun.network`.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, field_validator, model_validator

from mcp_operator.api.common import SpecModel

LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
"""A label key: an optional DNS-subdomain prefix and ``/``, then a name of at most 63."""
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
CIDR_PATTERN = r"^[0-9a-fA-F:.]+/[0-9]{1,3}$"
"""The shape of a CIDR; the CRD's CEL rule (``isCIDR``) and :func:`check_cidr` say the rest."""

LabelKey = Annotated[
    str, StringConstraints(min_length=1, max_length=317, pattern=LABEL_KEY_PATTERN)
]
LabelValue = Annotated[str, StringConstraints(max_length=63, pattern=LABEL_VALUE_PATTERN)]
Cidr = Annotated[str, StringConstraints(min_length=4, max_length=49, pattern=CIDR_PATTERN)]

Egress = Literal["open", "restricted"]
"""``open``: the Pods may connect anywhere (no egress policy); ``restricted``: only to DNS and
to what the operator and the spec allow."""


def check_cidr(value: str) -> str:
    """A CIDR as the API server accepts it in an ``ipBlock``: an address and a prefix
    length, with no bits set past the prefix (``10.0.0.0/8``, never ``10.1.2.3/8``)."""
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError as error:
        raise ValueError(f"{value!r} is not a CIDR with no host bits set: {error}") from None
    return value


class LabelSelectorRequirement(SpecModel):
    """One requirement of a label selector."""

    key: LabelKey
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: (
        Annotated[list[Annotated[str, StringConstraints(max_length=63)]], Field(max_length=32)]
        | None
    ) = None

    @model_validator(mode="after")
    def _values_fit_the_operator(self) -> LabelSelectorRequirement:
        # The same rule as the CRD's CEL rule, in the same words.
        if (self.operator in ("In", "NotIn")) != bool(self.values):
            raise ValueError(
                "values must be non-empty when operator is In or NotIn, and empty otherwise"
            )
        return self


class LabelSelector(SpecModel):
    """A Kubernetes label selector; an empty one selects everything."""

    match_labels: Annotated[dict[LabelKey, LabelValue], Field(max_length=16)] | None = None
    match_expressions: Annotated[list[LabelSelectorRequirement], Field(max_length=16)] | None = None


class IPBlock(SpecModel):
    """A range of addresses (outside the cluster's Pods, as Kubernetes documents ``ipBlock``)."""

    cidr: Cidr
    except_: Annotated[list[Cidr], Field(max_length=16)] | None = Field(
        default=None, alias="except"
    )

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        return check_cidr(value)

    @field_validator("except_")
    @classmethod
    def _excepted(cls, values: list[str] | None) -> list[str] | None:
        for value in values or ():
            check_cidr(value)
        return values


class NetworkPeer(SpecModel):
    """Who or where: Pods (``podSelector``, in the Namespaces ``namespaceSelector`` selects,
    or in the object's own), or addresses (``ipBlock``), as in a NetworkPolicy."""

    pod_selector: LabelSelector | None = None
    namespace_selector: LabelSelector | None = None
    ip_block: IPBlock | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> NetworkPeer:
        # The same rules as the CRD's CEL rules, in the same words.
        selectors = self.pod_selector is not None or self.namespace_selector is not None
        if self.ip_block is not None and selectors:
            raise ValueError(
                "ipBlock must not be set together with podSelector or namespaceSelector"
            )
        if self.ip_block is None and not selectors:
            raise ValueError("must set podSelector, namespaceSelector or ipBlock")
        return self


class NetworkPort(SpecModel):
    """A port (or a range, with ``endPort``) and its protocol; no port: every port."""

    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"
    port: int | None = Field(default=None, ge=1, le=65535)
    end_port: int | None = Field(default=None, ge=1, le=65535)

    @model_validator(mode="after")
    def _range(self) -> NetworkPort:
        if self.end_port is not None and (self.port is None or self.end_port < self.port):
            raise ValueError("endPort must be set only with port, and be at least port")
        return self


class EgressRule(SpecModel):
    """Destinations the Pods may connect to when their egress is ``restricted``."""

    to: Annotated[list[NetworkPeer], Field(min_length=1, max_length=16)]
    ports: Annotated[list[NetworkPort], Field(max_length=16)] | None = None


EgressRules = Annotated[list[EgressRule], Field(max_length=16)]


class ServerNetworkSpec(SpecModel):
    """A managed server's NetworkPolicy: extra callers, and where its Pods may connect."""

    ingress_from: Annotated[list[NetworkPeer], Field(max_length=32)] | None = None
    egress: Egress = "open"
    egress_to: EgressRules | None = None

    @model_validator(mode="after")
    def _egress_to_needs_restricted(self) -> ServerNetworkSpec:
        # The same rule as the CRD's CEL rule, in the same words.
        if self.egress_to and self.egress != "restricted":
            raise ValueError("egressTo must be set only when egress is restricted")
        return self


class RunNetworkSpec(SpecModel):
    """An AgentRun Pod's egress; unset ``egress``: the operator's default
    (``--agent-egress``)."""

    egress: Egress | None = None
    egress_to: EgressRules | None = None
