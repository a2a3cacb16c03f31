"""Who may use an MCPServer: ``spec.access`` and ``status.access``.

This module owns the namespaces whose AgentRuns may use a server, how a managed server's
endpoint authenticates its callers (Kubernetes ServiceAccount tokens, OIDC, none) and the
audience of the tokens it accepts (:func:`token_audience`). Mirrors
``crds/mcpservers.mcp-operator.dev.yaml`` (see :mod:`mcp_operator.api.common`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from mcp_operator.api.common import SpecModel, StatusModel, check_unique

NAMESPACE_OR_ANY_PATTERN = r"^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$"
SERVICE_ACCOUNT_REF_PATTERN = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
"""``name`` (of the server's namespace) or ``namespace/name`` of a ServiceAccount."""
TOKEN_AUDIENCE_PREFIX = "mcpserver.mcp-operator.dev/"


def token_audience(namespace: str, name: str) -> str:
    """The audience of the tokens a managed MCPServer accepts: its own, so that a token
    minted for one server (or for the API server) is refused by every other."""
    return f"{TOKEN_AUDIENCE_PREFIX}{namespace}/{name}"


Authentication = Literal["kubernetes", "oidc", "none"]


class OidcSpec(SpecModel):
    """The OpenID Connect issuer whose JWTs a managed server accepts (clients outside the
    cluster, e.g. an IDE through an Ingress)."""

    issuer: str = Field(max_length=2048, pattern=r"^https?://[^\s]+$")
    audience: Annotated[str, StringConstraints(min_length=1, max_length=2048)]
    jwks_url: str | None = Field(
        default=None, alias="jwksURL", max_length=2048, pattern=r"^https?://[^\s]+$"
    )


class AccessSpec(SpecModel):
    """Which AgentRuns may use a server: its own namespace, plus the ones listed (``*``: all);
    and how a managed server's endpoint authenticates its callers."""

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

    authentication: Authentication = "kubernetes"
    service_accounts: (
        Annotated[
            list[
                Annotated[
                    str,
                    StringConstraints(
                        min_length=1, max_length=317, pattern=SERVICE_ACCOUNT_REF_PATTERN
                    ),
                ]
            ],
            Field(max_length=64),
        ]
        | None
    ) = None
    oidc: OidcSpec | None = None

    @model_validator(mode="after")
    def _oidc_when_oidc(self) -> AccessSpec:
        # The same rule as the CRD's x-kubernetes-validations, in the same words.
        if self.authentication == "oidc" and self.oidc is None:
            raise ValueError("spec.access.oidc: oidc must be set when authentication is oidc")
        check_unique(self.service_accounts or (), "access.serviceAccounts entries")
        return self

    def service_account_names(self, server_namespace: str) -> list[str] | None:
        """``serviceAccounts`` as ``namespace/name`` (a bare name is of the server's
        namespace); ``None``: any ServiceAccount of a permitted namespace."""
        if self.service_accounts is None:
            return None
        return [
            entry if "/" in entry else f"{server_namespace}/{entry}"
            for entry in self.service_accounts
        ]

    def permits(self, namespace: str, server_namespace: str) -> bool:
        """Whether a run in ``namespace`` may use a server that lives in ``server_namespace``."""
        listed = self.namespaces or []
        return namespace == server_namespace or "*" in listed or namespace in listed


class AccessStatus(StatusModel):
    """How a managed server's endpoint authenticates its callers."""

    authentication: Authentication | None = None
