"""The operator's side of authentication on a managed server's data path.

Owns three jobs, with the pure parts left to :mod:`~mcp_operator.controller.mcpserver.access`:

- writing each managed server's access ConfigMap ``<server>-access`` (:meth:`DataPath.
  write_access`): the cluster's ServiceAccount issuer and keys
  (:class:`~mcp_operator.kube.identity.IssuerKeys`, fetched again every few minutes, so a
  rotated signing key reaches the servers on their next reconcile), who may call, and the
  revoked Pods — read back from the ConfigMap, merged with what was seen since, pruned by
  time (so a restarted operator keeps them);
- remembering AgentRun Pods seen deleted (:meth:`DataPath.pod_deleted`) until the next
  write of each server whose audience their tokens name;
- the probe's credentials (:meth:`DataPath.probe_credentials`): the operator's own token
  for the server's audience (TokenRequest for its own ServiceAccount,
  :class:`~mcp_operator.kube.identity.OwnTokens`), in ``Authorization`` in a cluster, and in
  ``Mcp-Operator-Authorization`` through the API server's service proxy, which takes
  ``Authorization`` for itself (and does not pass it on).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping
from typing import Any

from mcp_operator.api import MCPServer
from mcp_operator.api.access import token_audience
from mcp_operator.controller.mcpserver import access, render
from mcp_operator.controller.render import metrics_access
from mcp_operator.kube import CONFIGMAPS, Kube
from mcp_operator.kube.credentials import CredentialError, utc_now
from mcp_operator.kube.identity import IssuerKeys, OwnTokens
from mcp_operator.mcp.credentials import CredentialsError

logger = logging.getLogger(__name__)

PROXY_HEADER = "mcp-operator-authorization"
"""Where the probe's token goes when it passes the API server's service proxy."""

ServerKey = tuple[str, str]


class ProbeCredentials:
    """The operator's own token for one server's audience, in ``header``."""

    def __init__(self, tokens: OwnTokens, audience: str, header: str = "authorization") -> None:
        self.tokens = tokens
        self.audience = audience
        self.header = header

    def __repr__(self) -> str:
        return f"ProbeCredentials(audience={self.audience!r}, header={self.header!r})"

    def describe(self) -> str:
        return f"the token of ServiceAccount {self.tokens.identity} for {self.audience}"

    async def headers(self) -> Mapping[str, str]:
        try:
            token = await self.tokens.token(self.audience)
        except CredentialError as error:
            raise CredentialsError(str(error)) from None
        return {self.header: f"Bearer {token}"}

    async def rejected(self, status: int, challenge: str | None) -> bool:
        # A 401 may be a token the server no longer takes (its keys rotated): a new one is
        # worth one try. A 403 is the server's verdict on who we are: a new token is not.
        return status == 401 and self.tokens.forget(self.audience)


class DataPath:
    """What the operator needs to authenticate on, and protect, managed servers' data path."""

    def __init__(
        self,
        kube: Kube,
        *,
        tokens: OwnTokens | None,
        issuer: IssuerKeys | None = None,
        metrics_scrapers: tuple[str, ...] = (),
    ) -> None:
        self.kube = kube
        self.metrics_scrapers = metrics_scrapers
        """Who may read the adapters' ``/metrics`` (``--metrics-scrapers``)."""
        self.tokens = tokens
        """``None``: the operator does not know its own ServiceAccount (it probes without
        a token, and servers that authenticate refuse it)."""
        self.issuer = issuer or IssuerKeys(kube)
        self.pending: dict[ServerKey, dict[str, datetime.datetime]] = {}
        """Revoked Pods not yet written into their servers' ConfigMaps."""

    @property
    def operators(self) -> list[str]:
        return [self.tokens.identity.username] if self.tokens is not None else []

    # -- revocation --------------------------------------------------------------------

    def pod_deleted(
        self, pod: Mapping[str, Any], now: datetime.datetime | None = None
    ) -> list[ServerKey]:
        """Remember a deleted AgentRun Pod's uid for every server its tokens are for; the
        servers to reconcile now."""
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        servers = access.token_servers(pod)
        if not uid or not servers:
            return []
        until = (now or utc_now()) + access.token_lifetime(pod)
        for key in servers:
            self.pending.setdefault(key, {})[uid] = until
        return servers

    # -- the access ConfigMap -----------------------------------------------------------

    async def write_access(
        self, server: MCPServer, now: datetime.datetime | None = None
    ) -> Mapping[str, Any] | None:
        """Apply the server's access ConfigMap (nothing for ``authentication: none``).

        Raises:
            CredentialError: the issuer's keys could not be read (and never were).
            NameConflict: a ConfigMap of that name that the server does not control.
        """
        if render.authentication(server) == "none":
            return None
        now = now or utc_now()
        key = (server.metadata.namespace or "", server.metadata.name)
        issuer = await self.issuer.current()
        name = render.access_config_map_name(server)
        existing = await self.kube.get(CONFIGMAPS, key[0], name)
        added = dict(self.pending.get(key, {}))
        revoked = access.revocations(existing, added, now)
        body = access.document(
            server,
            issuer=issuer.issuer,
            jwks=issuer.jwks,
            operators=self.operators,
            revoked=revoked,
        )
        scrapers = metrics_access(issuer.issuer, issuer.jwks, self.metrics_scrapers)
        applied: Mapping[str, Any] = await self.kube.apply(
            CONFIGMAPS, access.config_map(server, body, revoked, metrics=scrapers)
        )
        waiting = self.pending.get(key)
        if waiting is not None:
            for uid in added:
                if waiting.get(uid) == added[uid]:
                    del waiting[uid]
            if not waiting:
                del self.pending[key]
        return applied

    # -- the probe ----------------------------------------------------------------------

    def probe_credentials(self, server: MCPServer, *, proxied: bool) -> ProbeCredentials | None:
        """The probe's credentials for a managed server that authenticates with Kubernetes
        tokens (``None``: it does not, or the operator has no identity to present)."""
        if self.tokens is None or render.authentication(server) != "kubernetes":
            return None
        audience = token_audience(server.metadata.namespace or "", server.metadata.name)
        return ProbeCredentials(self.tokens, audience, PROXY_HEADER if proxied else "authorization")
