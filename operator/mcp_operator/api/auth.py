"""The credentials an MCPServer presents: ``spec.auth`` and ``spec.probe.auth``.

This module owns the OAuth 2.0 methods a server's callers (the operator's probe, the bridge)
use to obtain a token for an external server (client credentials, token exchange) and the
reference to the Secret key that holds a value (:class:`SecretKeyRef`, also of headers and
pull Secrets). Mirrors ``crds/mcpservers.mcp-operator.dev.yaml`` (see
:mod:`mcp_operator.api.common`).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints, model_validator

from mcp_operator.api.common import (
    URL_PATTERN,
    DnsSubdomain,
    SecretKey,
    SpecModel,
    check_exactly_one,
)


class SecretKeyRef(SpecModel):
    """A key of a Secret in the MCPServer's namespace."""

    name: DnsSubdomain
    key: SecretKey


SCOPE_PATTERN = r"^[!#-\[\]-~]+$"
"""An OAuth scope token (RFC 6749 §3.3): printable ASCII but for space, ``"`` and ``\\``."""
CLIENT_ID_PATTERN = r"^[ -~]+$"
"""An OAuth client identifier (RFC 6749 §2.2 and Appendix A.1: printable ASCII)."""
AUDIENCE_PATTERN = r"^\S+$"
SUBJECT_AUDIENCE_PATTERN = r"^https?://[^/\s]+(/\S*)?$"
"""The subject token's audience: a URL (the token endpoint's, or a part of it)."""

Scopes = Annotated[
    list[Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=SCOPE_PATTERN)]],
    Field(max_length=32),
]
TokenURL = Annotated[str, StringConstraints(max_length=2048, pattern=URL_PATTERN)]
Audience = Annotated[
    str, StringConstraints(min_length=1, max_length=2048, pattern=AUDIENCE_PATTERN)
]
ClientID = Annotated[
    str, StringConstraints(min_length=1, max_length=256, pattern=CLIENT_ID_PATTERN)
]


class ClientCredentialsSpec(SpecModel):
    """OAuth 2.0 client credentials (RFC 6749 §4.4): every caller is the client itself."""

    token_url: TokenURL = Field(alias="tokenURL")
    client_id: ClientID = Field(alias="clientID")
    client_secret_ref: SecretKeyRef
    scopes: Scopes | None = None
    resource: str | None = Field(default=None, max_length=2048, pattern=URL_PATTERN)
    audience: Audience | None = None


class TokenExchangeSpec(SpecModel):
    """OAuth 2.0 token exchange (RFC 8693): the caller's own identity is the subject."""

    token_url: TokenURL = Field(alias="tokenURL")
    audience: Audience | None = None
    resource: str | None = Field(default=None, max_length=2048, pattern=URL_PATTERN)
    scopes: Scopes | None = None
    client_id: ClientID | None = Field(default=None, alias="clientID")
    client_secret_ref: SecretKeyRef | None = None
    subject_token_audience: (
        Annotated[
            str,
            StringConstraints(min_length=1, max_length=2048, pattern=SUBJECT_AUDIENCE_PATTERN),
        ]
        | None
    ) = None

    @model_validator(mode="after")
    def _secret_needs_client(self) -> TokenExchangeSpec:
        if self.client_secret_ref is not None and self.client_id is None:
            raise ValueError("clientSecretRef must be set only together with clientID")
        audience = self.subject_token_audience
        if audience is not None and not (
            self.token_url == audience or self.token_url.startswith(audience + "/")
        ):
            # The run's (or the operator's) token goes to this authorization server: its
            # audience names that server and nothing else (never the Kubernetes API).
            raise ValueError(
                "subjectTokenAudience must be the tokenURL or the part of it before a '/' "
                "of its path"
            )
        return self

    @property
    def effective_subject_token_audience(self) -> str:
        """``subjectTokenAudience``, or its default: the token URL."""
        return self.subject_token_audience or self.token_url


class AuthSpec(SpecModel):
    """The credentials presented to an external server: exactly one method."""

    oauth2_client_credentials: ClientCredentialsSpec | None = None
    token_exchange: TokenExchangeSpec | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> AuthSpec:
        check_exactly_one(self, "oauth2_client_credentials", "token_exchange")
        return self

    @property
    def method(self) -> ClientCredentialsSpec | TokenExchangeSpec:
        method = self.oauth2_client_credentials or self.token_exchange
        assert method is not None  # exactly one is set
        return method

    @property
    def client_secret_ref(self) -> SecretKeyRef | None:
        return self.method.client_secret_ref
