"""The HTTP side of inbound authentication: who asks, decided from the request's headers.

Owns, for an endpoint of ours, the step between the Host/Origin check and the handler: the
bearer token taken from ``Authorization`` or (the probe through the API server's service
proxy, which consumes ``Authorization`` itself) ``Mcp-Operator-Authorization`` —
``mcp_operator.serve.asgi.request_headers`` reads both; neither is ever forwarded, since the
handlers only see the headers they name — verified and authorized (``verifier``), and the
refusal answered before the body is read:

- ``401`` with ``WWW-Authenticate: Bearer`` (no ``error`` when no token was sent, RFC 6750
  §3.1), ``error="invalid_token"`` and a short ``error_description`` otherwise, and in OIDC
  mode ``resource_metadata="<url>"`` (RFC 9728 §5.1);
- ``403`` with a plain body naming the caller (never the token) when it may not call.

Every refusal is counted by reason (``count``, the program's metrics); every new caller is
logged once (bounded memory), never its token. ``--auth none`` admits every request as
:data:`~mcp_operator.serve.auth.caller.ANONYMOUS`. The verified caller is left in the ASGI
scope (:data:`SCOPE_KEY`) for the handlers (session keys, audit).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

from mcp_operator.serve.asgi import Scope, Send, respond_json, respond_plain
from mcp_operator.serve.auth.access import AccessFile
from mcp_operator.serve.auth.caller import ANONYMOUS, CURRENT_CALLER, Caller
from mcp_operator.serve.auth.jwks import JwksFetcher
from mcp_operator.serve.auth.metadata import document, is_metadata_path, metadata_url
from mcp_operator.serve.auth.tokens import TokenRefused
from mcp_operator.serve.auth.verifier import Decision, Verifier
from mcp_operator.serve.sessions import client_address

logger = logging.getLogger("mcp_operator.serve.auth")

AuthMode = Literal["kubernetes", "oidc", "none"]
MODES: tuple[AuthMode, ...] = ("kubernetes", "oidc", "none")

SCOPE_KEY = "mcp_operator.caller"
"""Where the verified :class:`Caller` of a request is kept in its ASGI scope."""

MAX_LOGGED_CALLERS = 10_000
"""Callers remembered as already logged; past that the memory starts over (a caller may then
be logged again, never is a caller's first request left unlogged)."""


def identity_key(scope: Mapping[str, Any], headers: dict[bytes, str]) -> str:
    """The session key of a request the gate admitted: its caller's identity (one caller in
    many Pods counts once), else the client's address (``serve.sessions.client_address``)."""
    caller = scope.get(SCOPE_KEY)
    if caller is not None and caller.key:
        return str(caller.key)
    return client_address(scope, headers)


def bearer(value: str | None) -> str | None:
    """The token of an ``Authorization``-style value, ``""`` when it is not a bearer
    credential, ``None`` when there is none."""
    if value is None or not value:
        return None
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer":
        return ""
    return token.strip(" ")


class AuthGate:
    """Admits or refuses the requests of one endpoint."""

    def __init__(
        self,
        mode: AuthMode,
        access: AccessFile | None,
        *,
        count: Callable[[str], None] = lambda reason: None,
        jwks: JwksFetcher | None = None,
        clock: Callable[[], float] = time.time,
        require_issuer: bool = True,
    ) -> None:
        """``access`` is required unless ``mode`` is ``none``; ``jwks`` fetches the OIDC
        issuer's keys when the configuration names a ``jwksURL``. ``require_issuer`` False:
        a configuration without issuer keys (not readable when it was written) refuses every
        token instead of failing here."""
        if mode != "none" and access is None:
            raise ValueError(f"--auth {mode} needs --access-config")
        if mode == "oidc" and access is not None and access.config.oidc is None:
            raise ValueError(f"--auth oidc: {access.path} has no oidc settings")
        if (
            require_issuer
            and mode == "kubernetes"
            and access is not None
            and access.config.issuer is None
        ):
            raise ValueError(f"--auth kubernetes: {access.path} has no issuer and jwks")
        self.mode = mode
        self.access = access
        self._count = count
        self._jwks = jwks
        self._clock = clock
        self._generation = -1
        self._jwks_keys: object = None
        self._verifier: Verifier | None = None
        self._logged: set[str] = set()
        self._refreshing: asyncio.Task[None] | None = None
        self.refused = 0

    @property
    def enabled(self) -> bool:
        return self.mode != "none"

    def verifier(self) -> Verifier:
        """The verifier of the current configuration (a new one, with an empty cache, when the
        file or the fetched keys changed)."""
        access = self.access
        assert access is not None
        config = access.current()
        keys = self._jwks.keys if self._jwks is not None else None
        if (
            self._verifier is None
            or access.generation != self._generation
            or keys is not self._jwks_keys
        ):
            self._verifier = Verifier(config, oidc=self.mode == "oidc", oidc_keys=keys)
            self._generation = access.generation
            self._jwks_keys = keys
        return self._verifier

    def challenge_base(self) -> str:
        """``Bearer`` with, in OIDC mode, the ``resource_metadata`` parameter."""
        if self.mode == "oidc" and self.access is not None:
            oidc = self.access.current().oidc
            if oidc is not None:
                return f'Bearer resource_metadata="{metadata_url(oidc.resource)}"'
        return "Bearer"

    async def admit(self, scope: Scope, headers: dict[bytes, str], send: Send) -> Caller | None:
        """The request's verified caller (also left in ``scope``), or None after answering
        401 or 403."""
        if self.mode == "none":
            scope[SCOPE_KEY] = ANONYMOUS
            return ANONYMOUS
        value = headers.get(b"mcp-operator-authorization") or headers.get(b"authorization")
        token = bearer(value)
        if not token:
            await self._unauthorized(send, "missing" if token is None else "malformed")
            return None
        decision = await self._decide(token)
        if isinstance(decision, str):
            await self._unauthorized(send, decision)
            return None
        caller = decision.caller
        seen = caller.describe()
        if seen not in self._logged:
            if len(self._logged) >= MAX_LOGGED_CALLERS:
                self._logged.clear()
            self._logged.add(seen)
            logger.info(
                "Verified caller %s%s", seen, "" if decision.permitted else " (not permitted)"
            )
        if not decision.permitted:
            self._tally("forbidden")
            text = f"Forbidden: {seen} is not permitted to call this server\n"
            await respond_plain(send, 403, text.encode())
            return None
        scope[SCOPE_KEY] = caller
        CURRENT_CALLER.set(caller)
        return caller

    async def _decide(self, token: str) -> Decision | str:
        """The decision for ``token``, or the reason it is refused (after one refetch of the
        OIDC keys when it names a key they do not hold)."""
        now = self._clock()
        jwks = self._jwks
        if jwks is not None and jwks.stale() and self._refreshing is None:
            self._refreshing = asyncio.create_task(self._refresh_in_background(jwks))
        try:
            return self.verifier().check(token, now)
        except TokenRefused as refusal:
            reason = refusal.reason
        except Exception:  # a token no check foresaw must not take the endpoint down
            logger.exception("Refused a token whose verification failed unexpectedly")
            return "malformed"
        if reason != "unknown_key" or not await self._refetched():
            return reason
        try:
            return self.verifier().check(token, now)
        except TokenRefused as refusal:
            return refusal.reason
        except Exception:
            logger.exception("Refused a token whose verification failed unexpectedly")
            return "malformed"

    async def _refresh_in_background(self, jwks: JwksFetcher) -> None:
        """Keys older than their refresh period fetched again while requests go on with the
        ones held (a key the issuer retired stops verifying within the period)."""
        try:
            await jwks.refresh()
        finally:
            self._refreshing = None

    async def _refetched(self) -> bool:
        jwks = self._jwks
        if jwks is None or self.mode != "oidc":
            return False
        return await jwks.refresh(unknown_kid=True)

    async def prepare(self) -> None:
        """Fetch the OIDC keys when they are due (at start and then now and again)."""
        if self._jwks is not None and self._jwks.stale():
            await self._jwks.refresh()

    def _tally(self, reason: str) -> None:
        self.refused += 1
        self._count(reason)

    async def _unauthorized(self, send: Send, reason: str) -> None:
        self._tally(reason)
        challenge = self.challenge_base()
        if reason == "missing":
            body = b"Unauthorized: a bearer token is required\n"
        else:
            description = str(TokenRefused(reason))
            separator = ", " if challenge != "Bearer" else " "
            challenge += f'{separator}error="invalid_token", error_description="{description}"'
            body = f"Unauthorized: {description}\n".encode()
        await respond_plain(send, 401, body, [(b"www-authenticate", challenge.encode())])

    async def serve_metadata(self, path: str, send: Send) -> bool:
        """Answer a request for the protected-resource metadata; False when ``path`` is not
        its path or the endpoint is not in OIDC mode (the caller answers 404)."""
        if self.mode != "oidc" or self.access is None or not is_metadata_path(path):
            return False
        oidc = self.access.current().oidc
        if oidc is None:
            return False
        await respond_json(send, 200, document(oidc), [(b"cache-control", b"max-age=300")])
        return True
