"""OAuth tokens and the token endpoint that issues them: one request, its bounds, its answer.

This module owns :class:`TokenEndpoint` (one authorization server's token endpoint, reached
through :mod:`~mcp_operator.net.pool` with the caller's egress policy, within
:data:`TOKEN_SECONDS` and :data:`MAX_TOKEN_RESPONSE_BYTES`, redirects not followed), what its
answers mean (:func:`token_from` for a token response, RFC 6749 §5.1; an error answer,
§5.2, becomes a :class:`TokenError` whose ``reason`` is the probe's vocabulary) and
:class:`Token`, with when it is replaced (:func:`refresh_margin`). No secret or token is ever
in a message or a ``repr``. Which grant asks, and the cache, are :mod:`.oauth`'s.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jwt

from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.messages import display_url
from mcp_operator.net.egress import EgressPolicy, Refused
from mcp_operator.net.http1 import ConnectFailed, Http1Error
from mcp_operator.net.pool import Http1Pool

TOKEN_SECONDS = 10.0
"""One token request (connect, send, the whole answer) takes at most this long."""
MAX_TOKEN_RESPONSE_BYTES = 64 * 1024
"""A token endpoint's answer larger than this is refused (a token response is small)."""
DEFAULT_LIFETIME_SECONDS = 300.0
"""A token whose response gave no ``expires_in`` is used this long (RFC 6749 §5.1 lets the
server leave it out; a 401 replaces it sooner)."""
MAX_REFRESH_MARGIN_SECONDS = 30.0
"""A token is replaced this long before it expires, or a tenth of its lifetime if shorter."""
REFUSALS = frozenset(
    {"invalid_client", "invalid_grant", "unauthorized_client", "access_denied", "invalid_token"}
)
"""Token endpoint errors that mean "these credentials are not accepted": ``AuthRequired``."""


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
