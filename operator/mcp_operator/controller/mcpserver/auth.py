"""The probe's OAuth credentials for external servers: one per server, kept between probes.

An MCPServer's ``spec.probe.auth`` (else its ``spec.auth``) says how the operator's probe
authenticates (:mod:`~mcp_operator.mcp.oauth`). The credentials are kept here from one probe
to the next, so their token is reused until shortly before it expires: a fleet probed every
few minutes costs one token request per server and token lifetime, not one per probe. They
are built again when what they depend on changes (the auth spec, the server's URL, the egress
policy), and forgotten when the server is deleted (:meth:`ProbeCredentials.forget`, by uid) or, past
:data:`MAX_SERVERS`, the least recently used first.

Secrets are read when a token is requested, never kept: the client secret from the API
(opt-in label checked, :meth:`~mcp_operator.kube.Kube.read_secret_key`), the subject token of
a token exchange from ``subject`` (the operator's own identity for the audience the
authorization server expects). Token endpoints are reached under the server's egress policy.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from mcp_operator.api import MCPServer
from mcp_operator.api.auth import AuthSpec
from mcp_operator.kube import Kube, SecretReferenceError
from mcp_operator.mcp.oauth import (
    Client,
    ClientCredentialsGrant,
    OAuthCredentials,
    Secret,
    TokenExchangeGrant,
)
from mcp_operator.mcp.tokens import TokenEndpoint, TokenError
from mcp_operator.net.egress import EgressPolicy

MAX_SERVERS = 4096
"""Credentials kept at most (one per probed server with ``auth``)."""

SubjectSource = Callable[[str], Awaitable[str]]
"""The operator's own token for an audience: the subject token of the probe's exchanges."""


async def no_subject(audience: str) -> str:
    """The subject source of an operator that has none: the exchange fails with words."""
    raise TokenError(
        "AuthRequired",
        f"the operator has no token of its own for audience {audience} to exchange: give the "
        "probe other credentials (spec.probe.auth) or set spec.probe.enabled to false",
    )


class ProbeCredentials:
    """The probe's credentials of every server with ``auth``, by uid."""

    def __init__(self, subject: SubjectSource = no_subject, max_servers: int = MAX_SERVERS):
        self.subject = subject
        self.max_servers = max_servers
        self._kept: OrderedDict[str, tuple[str, OAuthCredentials]] = OrderedDict()

    def credentials(
        self, kube: Kube, server: MCPServer, egress: EgressPolicy
    ) -> OAuthCredentials | None:
        """The probe's credentials for ``server`` (``None`` when it has no ``auth``)."""
        auth = server.spec.probe_auth
        key = server.metadata.uid or f"{server.metadata.namespace}/{server.metadata.name}"
        if auth is None:
            self.forget(key)
            return None
        signature = json.dumps(
            [auth.model_dump(mode="json"), server.spec.url, repr(egress)], sort_keys=True
        )
        kept = self._kept.get(key)
        if kept is not None and kept[0] == signature:
            self._kept.move_to_end(key)
            return kept[1]
        credentials = build(kube, server, auth, egress, self.subject)
        self._kept[key] = (signature, credentials)
        self._kept.move_to_end(key)
        while len(self._kept) > self.max_servers:
            self._kept.popitem(last=False)
        return credentials

    def forget(self, key: str) -> None:
        """Drop the credentials of the server ``key`` (its uid: deleted, or no ``auth``)."""
        self._kept.pop(key, None)


def build(
    kube: Kube, server: MCPServer, auth: AuthSpec, egress: EgressPolicy, subject: SubjectSource
) -> OAuthCredentials:
    """The credentials ``auth`` configures for the probe of ``server``."""
    namespace = server.metadata.namespace or ""
    url = server.spec.url or ""
    method = auth.method
    ref = method.client_secret_ref
    secret: Secret | None = None
    if ref is not None:
        secret = _secret(kube, namespace, ref.name, ref.key)
    client = Client(method.client_id, secret)
    endpoint = TokenEndpoint(method.token_url, egress=egress)
    scopes = tuple(method.scopes or ())
    resource = method.resource or url
    if auth.token_exchange is not None:
        audience = auth.token_exchange.effective_subject_token_audience

        async def own() -> str:
            return await subject(audience)

        grant: ClientCredentialsGrant | TokenExchangeGrant = TokenExchangeGrant(
            subject=own, resource=resource, audience=method.audience, scopes=scopes
        )
    else:
        grant = ClientCredentialsGrant(resource=resource, audience=method.audience, scopes=scopes)
    return OAuthCredentials(endpoint, grant, client)


def _secret(kube: Kube, namespace: str, name: str, key: str) -> Secret:
    async def read() -> str:
        try:
            return await kube.read_secret_key(namespace, name, key)
        except SecretReferenceError as error:
            raise TokenError(error.reason, str(error)) from None

    return read
