"""The bridge's OAuth credentials for an upstream: :func:`credentials_for` its ``auth``.

The configuration names files, never values (:class:`~mcp_operator.api.bridge.UpstreamAuth`):
the client secret is a mounted Secret key, the subject token of a token exchange the run's
projected ServiceAccount token (in the bridge container only, so the agent cannot present it
itself). Both are read for each token request, so a rotated secret or token is used at once.
Token requests go over the bridge's one pool under its egress policy
(:mod:`~mcp_operator.bridge.egress`); caching, single flight and the retry after a 401 are
:class:`~mcp_operator.mcp.oauth.OAuthCredentials`'.
"""

from __future__ import annotations

from mcp_operator.api.bridge import UpstreamAuth
from mcp_operator.bridge.egress import BRIDGE_EGRESS
from mcp_operator.mcp.oauth import (
    Client,
    ClientCredentialsGrant,
    OAuthCredentials,
    TokenExchangeGrant,
    file_secret,
)
from mcp_operator.mcp.session import Pool
from mcp_operator.mcp.tokens import TokenEndpoint


def credentials_for(auth: UpstreamAuth | None, pool: Pool) -> OAuthCredentials | None:
    """The credentials ``auth`` configures (``None`` without it), token requests on ``pool``."""
    if auth is None:
        return None
    if auth.oauth2_client_credentials is not None:
        cc = auth.oauth2_client_credentials
        return OAuthCredentials(
            TokenEndpoint(cc.token_url, egress=BRIDGE_EGRESS, pool=pool),
            ClientCredentialsGrant(
                resource=cc.resource, audience=cc.audience, scopes=tuple(cc.scopes)
            ),
            Client(cc.client_id, file_secret(cc.client_secret_file)),
        )
    exchange = auth.token_exchange
    assert exchange is not None  # exactly one is set
    secret = file_secret(exchange.client_secret_file) if exchange.client_secret_file else None
    return OAuthCredentials(
        TokenEndpoint(exchange.token_url, egress=BRIDGE_EGRESS, pool=pool),
        TokenExchangeGrant(
            subject=file_secret(exchange.subject_token_file),
            resource=exchange.resource,
            audience=exchange.audience,
            scopes=tuple(exchange.scopes),
        ),
        Client(exchange.client_id, secret),
    )
