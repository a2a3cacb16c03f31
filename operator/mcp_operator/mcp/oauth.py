"""OAuth credentials an MCP client presents to a server: client credentials and token exchange.

Two grants, one cache (:class:`OAuthCredentials`, a
:class:`~mcp_operator.mcp.credentials.Credentials` for
:class:`~mcp_operator.mcp.session.McpSession`):

- **client credentials** (RFC 6749 §4.4, :class:`ClientCredentialsGrant`): the client
  authenticates as itself; every caller that shares the client is the same principal to the
  server;
- **token exchange** (RFC 8693, :class:`TokenExchangeGrant`): the subject token is the
  caller's own identity (the bridge's projected ServiceAccount token for its run, the
  operator's own token for its probe), so the server sees who the call is for; the client, when
  one is configured, authenticates as the actor.

Both send the RFC 8707 ``resource`` (the server's URL unless configured otherwise) and, where
configured, ``audience`` and ``scope``.

**The cache.** A token is used until shortly before it expires (:func:`refresh_margin`), then
one request replaces it: concurrent callers that find no usable token wait for the same
request (single flight), so a thousand calls cost one token request per token lifetime.
A ``401`` from the server drops the token the refused request carried (unless another request
has replaced it already) and says "try again", which the session does once.
A ``403`` is an authorization verdict that a new token of the same scopes does not change.

**The token endpoint** (:mod:`~mcp_operator.mcp.tokens`) is reached through
:mod:`~mcp_operator.net.pool` with the caller's egress policy (a ``tokenURL`` on a metadata,
link-local or otherwise refused address is refused before any connection, as a server URL
is), within its time and size bounds; redirects are not followed. Its failures are
:class:`~mcp_operator.mcp.tokens.TokenError`, whose ``reason`` is the probe's vocabulary
(``AuthRequired`` when the authorization server refused the client or the subject,
``DestinationRefused``, ``Unreachable``, ``Timeout``, ``ProtocolError``).

Secrets and tokens are never in a message, a ``repr`` or a log line: a client secret is read
from its source (a mounted file, the API) for each token request and kept nowhere else;
:meth:`OAuthCredentials.secrets` gives the values in use to the caller's scrubber.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import logging
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from mcp_operator.mcp.messages import display_url
from mcp_operator.mcp.tokens import (
    Token,
    TokenEndpoint,
    TokenError,
    token_from,
)

logger = logging.getLogger(__name__)

_SENT: contextvars.ContextVar[tuple[OAuthCredentials, Token]] = contextvars.ContextVar(
    "mcp_operator_oauth_sent"
)
"""The credentials and token of the request the current task sent last: a 401 for a token
that another request has already replaced keeps the new one (a burst of 401s costs one token
request). The session asks for headers and reports a refusal in the same task."""
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"

Secret = Callable[[], Awaitable[str]]
"""Where a secret value comes from, asked for each token request (a mounted file, the API)."""


@dataclass(frozen=True)
class Client:
    """How the client authenticates to the token endpoint: ``client_secret_basic`` when it
    has a secret (RFC 6749 §2.3.1), its ``client_id`` in the form when it has none, nothing
    when it has no id either (a token exchange the subject token alone authorizes)."""

    client_id: str | None = None
    secret: Secret | None = field(default=None, repr=False)

    async def authenticate(self, form: dict[str, str]) -> dict[str, str]:
        """The request headers that authenticate the client (``form`` gains ``client_id``
        for a public client)."""
        if self.client_id is None:
            return {}
        if self.secret is None:
            form["client_id"] = self.client_id
            return {}
        secret = await self.secret()
        quote = urllib.parse.quote
        pair = f"{quote(self.client_id, safe='')}:{quote(secret, safe='')}"
        return {"authorization": "Basic " + base64.b64encode(pair.encode()).decode("ascii")}


class Grant(Protocol):
    """The form of one grant's token request."""

    def describe(self) -> str: ...

    async def form(self) -> dict[str, str]: ...


@dataclass(frozen=True)
class ClientCredentialsGrant:
    """RFC 6749 §4.4: the client's own token."""

    resource: str | None = None
    audience: str | None = None
    scopes: tuple[str, ...] = ()

    def describe(self) -> str:
        return "client credentials"

    async def form(self) -> dict[str, str]:
        return _optional({"grant_type": "client_credentials"}, self)


@dataclass(frozen=True)
class TokenExchangeGrant:
    """RFC 8693: a token for the server in exchange for the caller's own (``subject``)."""

    subject: Secret = field(repr=False)
    """The caller's own token (a JWT: a projected ServiceAccount token), read per request."""
    resource: str | None = None
    audience: str | None = None
    scopes: tuple[str, ...] = ()
    actor: Secret | None = field(default=None, repr=False)
    """The acting party's own token, sent as ``actor_token`` when the server supports it."""

    def describe(self) -> str:
        return "token exchange"

    async def form(self) -> dict[str, str]:
        form = {
            "grant_type": TOKEN_EXCHANGE,
            "subject_token": await self.subject(),
            "subject_token_type": JWT_TOKEN_TYPE,
            "requested_token_type": ACCESS_TOKEN_TYPE,
        }
        if self.actor is not None:
            form["actor_token"] = await self.actor()
            form["actor_token_type"] = JWT_TOKEN_TYPE
        return _optional(form, self)


def _optional(
    form: dict[str, str], grant: ClientCredentialsGrant | TokenExchangeGrant
) -> dict[str, str]:
    if grant.resource:
        form["resource"] = grant.resource
    if grant.audience:
        form["audience"] = grant.audience
    if grant.scopes:
        form["scope"] = " ".join(grant.scopes)
    return form


class OAuthCredentials:
    """A :class:`~mcp_operator.mcp.credentials.Credentials` that presents a cached OAuth
    access token, obtained by ``grant`` from ``endpoint`` as ``client``.

    ``clock``: monotonic seconds (tests pass their own). :attr:`requests` counts the token
    requests made (the bench reads it)."""

    def __init__(
        self,
        endpoint: TokenEndpoint,
        grant: ClientCredentialsGrant | TokenExchangeGrant,
        client: Client | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.endpoint = endpoint
        self.grant = grant
        self.client = client or Client()
        self._clock = clock
        self._token: Token | None = None
        self._lock = asyncio.Lock()
        self.requests = 0

    def __repr__(self) -> str:
        return f"OAuthCredentials({self.describe()!r})"

    def describe(self) -> str:
        who = f" of client {self.client.client_id}" if self.client.client_id else ""
        return f"OAuth {self.grant.describe()}{who} from {display_url(self.endpoint.url)}"

    @property
    def token(self) -> Token | None:
        """The token in use (for the audit's subject and actor; never logged)."""
        return self._token

    def secrets(self) -> list[str]:
        """The token in use, for a scrubber (a server may echo it)."""
        return [self._token.value] if self._token is not None else []

    async def headers(self) -> Mapping[str, str]:
        token = self._token
        if token is None or self._clock() >= token.refresh_at:
            async with self._lock:  # one request at a time; the waiters take its token
                token = self._token
                if token is None or self._clock() >= token.refresh_at:
                    token = await self._obtain()
        _SENT.set((self, token))  # what this task's request carries, for :meth:`rejected`
        return token.headers

    async def rejected(self, status: int, challenge: str | None) -> bool:
        """A 401: the token the refused request carried is dropped (unless another request
        has replaced it already) and the request is worth one more try; a 403: not (a new
        token has the same scopes)."""
        if status != 401:
            return False
        sent = _SENT.get(None)
        if sent is None or sent[0] is not self or sent[1] is self._token:
            self._token = None
        return True

    async def _obtain(self) -> Token:
        form = await self.grant.form()
        headers = await self.client.authenticate(form)
        who = f"client {self.client.client_id}" if self.client.client_id else "the subject token"
        self.requests += 1
        response = await self.endpoint.request(form, headers, who)
        token = token_from(response, self._clock(), display_url(self.endpoint.url))
        self._token = token
        logger.debug("Obtained an access token from %s", display_url(self.endpoint.url))
        return token


def file_secret(path: str) -> Secret:
    """A secret read from a mounted file for each use (a Secret key, a projected token that
    the kubelet rotates), trailing whitespace dropped."""

    async def read() -> str:
        return read_secret_file(path)

    return read


def read_secret_file(path: str) -> str:
    """A mounted secret's value (a small file on a tmpfs: read at once)."""
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except OSError as error:
        raise TokenError("AuthRequired", f"{path} could not be read ({error.strerror})") from None
