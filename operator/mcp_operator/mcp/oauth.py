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

**The token endpoint** is reached through :mod:`~mcp_operator.net.pool` with the caller's
egress policy (a ``tokenURL`` on a metadata, link-local or otherwise refused address is
refused before any connection, as a server URL is), within :data:`TOKEN_SECONDS` and
:data:`MAX_TOKEN_RESPONSE_BYTES`; redirects are not followed. Its failures are
:class:`TokenError`, whose ``reason`` is the probe's vocabulary (``AuthRequired`` when the
authorization server refused the client or the subject, ``DestinationRefused``,
``Unreachable``, ``Timeout``, ``ProtocolError``).

Secrets and tokens are never in a message, a ``repr`` or a log line: a client secret is read
from its source (a mounted file, the API) for each token request and kept nowhere else;
:meth:`OAuthCredentials.secrets` gives the values in use to the caller's scrubber.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import json
import logging
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import jwt

from mcp_operator.mcp.session import McpFailure, display_url
from mcp_operator.net.egress import EgressPolicy, Refused
from mcp_operator.net.pool import ConnectFailed, Http1Error, Http1Pool

logger = logging.getLogger(__name__)

TOKEN_SECONDS = 10.0
"""One token request (connect, send, the whole answer) takes at most this long."""
MAX_TOKEN_RESPONSE_BYTES = 64 * 1024
"""A token endpoint's answer larger than this is refused (a token response is small)."""
DEFAULT_LIFETIME_SECONDS = 300.0
"""A token whose response gave no ``expires_in`` is used this long (RFC 6749 §5.1 lets the
server leave it out; a 401 replaces it sooner)."""
MAX_REFRESH_MARGIN_SECONDS = 30.0
"""A token is replaced this long before it expires, or a tenth of its lifetime if shorter."""
_SENT: contextvars.ContextVar[tuple[OAuthCredentials, Token]] = contextvars.ContextVar(
    "mcp_operator_oauth_sent"
)
"""The credentials and token of the request the current task sent last: a 401 for a token
that another request has already replaced keeps the new one (a burst of 401s costs one token
request). The session asks for headers and reports a refusal in the same task."""
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
REFUSALS = frozenset(
    {"invalid_client", "invalid_grant", "unauthorized_client", "access_denied", "invalid_token"}
)
"""Token endpoint errors that mean "these credentials are not accepted": ``AuthRequired``."""

Secret = Callable[[], Awaitable[str]]
"""Where a secret value comes from, asked for each token request (a mounted file, the API)."""


class TokenError(McpFailure):
    """A token could not be had. ``reason``: the probe's word for it; the message names the
    token endpoint and the client, never a secret or a token."""

    def __init__(self, reason: str, message: str, *, status: int | None = None) -> None:
        fault = "connect" if reason in ("DestinationRefused", "Unreachable") else "http"
        super().__init__(fault, message, status=status)  # type: ignore[arg-type]
        self.reason = reason

    @property
    def transient(self) -> bool:
        """Only an unreachable or slow token endpoint may do better on another try."""
        return self.reason in ("Unreachable", "Timeout")


@dataclass(frozen=True)
class Token:
    """An access token and what is known of it. ``repr`` never shows the token."""

    value: str = field(repr=False)
    obtained: float
    """Monotonic time it was received."""
    expires: float
    """Monotonic time it stops being valid."""
    scope: str | None = None
    subject: str | None = None
    """The token's ``sub`` claim when it is a JWT (for the audit line; not verified here)."""
    actor: str | None = None
    """The token's ``act.sub`` claim when it is a JWT (RFC 8693 §4.1)."""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    """``{"authorization": "Bearer <token>"}``, built once."""

    @property
    def refresh_at(self) -> float:
        return self.expires - refresh_margin(self.expires - self.obtained)


def refresh_margin(lifetime: float) -> float:
    """How long before its expiry a token of ``lifetime`` seconds is replaced."""
    return min(MAX_REFRESH_MARGIN_SECONDS, max(0.0, lifetime) / 10)


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


class TokenEndpoint:
    """One authorization server's token endpoint, reached under ``egress``.

    ``pool``: the caller's keep-alive pool (the bridge's); without one, each token request
    opens and closes a pool of its own (the operator's probes, minutes apart)."""

    def __init__(
        self,
        url: str,
        *,
        egress: EgressPolicy,
        pool: Http1Pool | None = None,
        ssl_context: Any = None,
        seconds: float = TOKEN_SECONDS,
    ) -> None:
        self.url = url
        self.egress = egress
        self._pool = pool
        self._ssl = ssl_context
        self.seconds = seconds

    def __repr__(self) -> str:
        return f"TokenEndpoint({display_url(self.url)!r})"

    async def request(
        self, form: Mapping[str, str], headers: Mapping[str, str], who: str
    ) -> dict[str, Any]:
        """POST ``form``; the token response's JSON object. ``who`` names the client in
        messages."""
        shown = display_url(self.url)
        body = urllib.parse.urlencode(dict(form)).encode()
        head = {
            "content-type": "application/x-www-form-urlencoded",
            "accept": "application/json",
            "accept-encoding": "identity",
            "cache-control": "no-store",
            **headers,
        }
        pool = self._pool or Http1Pool(egress=self.egress, ssl_context=self._ssl)
        try:
            async with asyncio.timeout(self.seconds):
                answer = await pool.request("POST", self.url, head, body)
                try:
                    data = await _bounded(answer.aiter_bytes(), shown)
                finally:
                    await answer.aclose()
        except TimeoutError:
            raise TokenError(
                "Timeout", f"the token endpoint {shown} did not answer within {self.seconds:g}s"
            ) from None
        except ConnectFailed as error:
            if isinstance(error.__cause__, Refused):
                raise TokenError(
                    "DestinationRefused",
                    f"the token endpoint {shown} was not contacted: {error.__cause__} "
                    "(the egress policy; see docs/security.md)",
                ) from None
            raise TokenError(
                "Unreachable", f"could not connect to the token endpoint {shown}: {error}"
            ) from None
        except Http1Error as error:
            raise TokenError(
                "Unreachable", f"the connection to the token endpoint {shown} failed ({error})"
            ) from None
        finally:
            if self._pool is None:
                await pool.aclose()
        parsed = _json_object(data)
        status = answer.status_code
        if status != 200:
            raise _refusal(status, parsed, shown, who)
        if parsed is None:
            raise TokenError(
                "ProtocolError", f"the token endpoint {shown} answered with a body that is not JSON"
            )
        return parsed


async def _bounded(chunks: Any, shown: str) -> bytes:
    received = bytearray()
    async for chunk in chunks:
        received += chunk
        if len(received) > MAX_TOKEN_RESPONSE_BYTES:
            raise TokenError(
                "ProtocolError",
                f"the token endpoint {shown} sent more than {MAX_TOKEN_RESPONSE_BYTES} bytes",
            )
    return bytes(received)


def _json_object(data: bytes) -> dict[str, Any] | None:
    try:
        parsed = json.loads(data)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _refusal(status: int, parsed: dict[str, Any] | None, shown: str, who: str) -> TokenError:
    """What a token endpoint's error answer means (RFC 6749 §5.2), in one sentence."""
    code = parsed.get("error") if parsed is not None else None
    code = code if isinstance(code, str) and code.isascii() and len(code) <= 64 else None
    said = f" ({code})" if code else ""
    if code in REFUSALS or (status in (400, 401, 403) and code is None):
        return TokenError(
            "AuthRequired",
            f"the token endpoint {shown} refused {who} with HTTP {status}{said}: "
            "check the client's ID and secret, or the subject token's audience",
            status=status,
        )
    if code == "invalid_scope":
        return TokenError(
            "InsufficientScope",
            f"the token endpoint {shown} refused the scopes asked for by {who}{said}",
            status=status,
        )
    if code in ("invalid_target", "invalid_request", "unsupported_grant_type"):
        return TokenError(
            "AuthRequired",
            f"the token endpoint {shown} refused the token request of {who}{said}: check its "
            "resource, audience and grant",
            status=status,
        )
    return TokenError(
        "Unreachable" if status in (502, 503, 504) else "ProtocolError",
        f"the token endpoint {shown} answered HTTP {status}{said}",
        status=status,
    )


def token_from(response: Mapping[str, Any], now: float, shown: str) -> Token:
    """The :class:`Token` of a successful token response (RFC 6749 §5.1)."""
    value = response.get("access_token")
    kind = response.get("token_type")
    if not isinstance(value, str) or not value or not value.isascii() or not value.isprintable():
        raise TokenError("ProtocolError", f"the token endpoint {shown} sent no usable access_token")
    if not isinstance(kind, str) or kind.lower() != "bearer":
        raise TokenError(
            "ProtocolError",
            f"the token endpoint {shown} sent a token of type {str(kind)[:32]!r}, not Bearer",
        )
    lifetime = response.get("expires_in")
    seconds = (
        float(lifetime)
        if isinstance(lifetime, int | float) and not isinstance(lifetime, bool) and lifetime > 0
        else DEFAULT_LIFETIME_SECONDS
    )
    scope = response.get("scope")
    claims = jwt_claims(value)
    actor = claims.get("act")
    return Token(
        value=value,
        obtained=now,
        expires=now + seconds,
        scope=scope if isinstance(scope, str) else None,
        subject=_claim(claims.get("sub")),
        actor=_claim(actor.get("sub")) if isinstance(actor, dict) else None,
        headers={"authorization": f"Bearer {value}"},
    )


def _claim(value: Any) -> str | None:
    return value[:256] if isinstance(value, str) else None


def jwt_claims(token: str) -> dict[str, Any]:
    """The payload of a JWT, unverified by PyJWT (for naming the subject and actor in audit
    lines: the server verifies the token, not us); ``{}`` for a token that is not a JWT."""
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.InvalidTokenError:
        return {}
    return claims if isinstance(claims, dict) else {}


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
