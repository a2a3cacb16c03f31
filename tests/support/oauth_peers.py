"""A local OAuth 2.1 authorization server and an MCP server protected by it, for tests.

Run as a script (``python tests/support/oauth_peers.py --as-port A --mcp-port B ...``), or
through :func:`oauth_peers`, which starts it in its own process group and yields
:class:`OAuthPeers`. No internet is needed: keys are generated at start.

**The authorization server** (ours; plain Starlette):

- RFC 8414 metadata at ``/.well-known/oauth-authorization-server``, its JWKS at ``/jwks``;
- ``POST /token``: the ``client_credentials`` grant (clients authenticate with HTTP Basic,
  ``client_secret_basic``) and RFC 8693 token exchange, whose ``subject_token`` must be a JWT
  signed by a key of ``--subject-jwks`` (a file: in the node e2e the cluster's own
  ServiceAccount issuer keys) with audience ``--subject-audience``; an authenticated client
  becomes the ``act`` claim. Access tokens are RS256 JWTs with ``aud`` = the RFC 8707
  ``resource`` (else ``audience``), ``sub``, ``scope``, ``client_id`` and a lifetime of
  ``--lifetime`` seconds;
- ``POST /introspect`` (RFC 7662, for the resource server): inactive once revoked;
- ``POST /admin/revoke-client?client=ID``: that client's secret stops working and every token
  issued to it is inactive; ``POST /admin/rotate-keys``: a new signing key (every token issued
  before is refused); ``GET /admin/stats``: token requests by grant; ``GET /admin/issued``:
  every token issued (tests look for them where they must not be).

**The MCP server** is the official SDK's ``MCPServer`` with its bearer-token auth
(``AuthSettings`` + a ``TokenVerifier``): it checks signature, issuer, audience (its own URL)
and, by introspection, revocation; publishes RFC 9728 protected-resource metadata naming the
authorization server; answers 401 with a ``WWW-Authenticate`` challenge that names that
metadata, and 403 ``insufficient_scope`` when the token lacks ``--required-scope``. Its tool
``whoami`` returns the token's subject, actor, client and scopes; ``echo`` its text.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class OAuthPeers:
    """Where the two servers listen."""

    issuer: str
    """The authorization server's base URL (its issuer)."""
    token_url: str
    mcp_url: str
    """The protected MCP endpoint (``.../mcp``), also the resource its tokens are for."""

    def stats(self) -> dict[str, int]:
        """Token requests by grant so far."""
        import httpx

        return dict(httpx.get(f"{self.issuer}/admin/stats", timeout=5).json())

    def issued(self) -> list[str]:
        """Every access token issued so far."""
        import httpx

        return list(httpx.get(f"{self.issuer}/admin/issued", timeout=5).json())

    def rotate_keys(self) -> None:
        """A new signing key: every token issued so far is refused by the MCP server."""
        import httpx

        httpx.post(f"{self.issuer}/admin/rotate-keys", timeout=5)

    def revoke(self, client: str) -> None:
        """Revoke the client's secret and every token issued to it."""
        import httpx

        httpx.post(f"{self.issuer}/admin/revoke-client", params={"client": client}, timeout=5)


@contextlib.contextmanager
def oauth_peers(
    *,
    clients: dict[str, str],
    host: str = "127.0.0.1",
    lifetime: int = 3600,
    required_scope: str | None = "mcp:tools",
    subject_jwks: Path | None = None,
    subject_audience: str | None = None,
    public_host: str | None = None,
) -> Iterator[OAuthPeers]:
    """Start both servers on free ports of ``host``; ``clients``: client id → secret.
    ``public_host``: the host name in the URLs they announce (default ``host``).
    ``subject_jwks``: the keys subject tokens of a token exchange must be signed with, for
    ``subject_audience`` (default: the token URL)."""
    from tests.support.peers import _accepts, free_port, run_server
    from tests.support.waiting import eventually

    as_port, mcp_port = free_port(), free_port()
    argv = [
        sys.executable,
        str(Path(__file__)),
        "--host",
        host,
        "--public-host",
        public_host or host,
        "--as-port",
        str(as_port),
        "--mcp-port",
        str(mcp_port),
        "--lifetime",
        str(lifetime),
    ]
    for client, secret in clients.items():
        argv += ["--client", f"{client}:{secret}"]
    if required_scope:
        argv += ["--required-scope", required_scope]
    shown = public_host or host
    if subject_jwks is not None:
        # The default subject audience is the token URL, as spec.auth.tokenExchange's is.
        audience = subject_audience or f"http://{shown}:{as_port}/token"
        argv += ["--subject-jwks", str(subject_jwks), "--subject-audience", audience]
    with run_server(argv, mcp_port, name="oauth peers", host=host, env={"PYTHONPATH": str(REPO)}):
        eventually("the authorization server listening", lambda: _accepts(as_port, host), 10)
        issuer = f"http://{shown}:{as_port}"
        yield OAuthPeers(issuer, f"{issuer}/token", f"http://{shown}:{mcp_port}/mcp")


# -- the authorization server ------------------------------------------------------------------


class AuthorizationServer:
    def __init__(self, args: argparse.Namespace) -> None:
        import jwt

        self.issuer = f"http://{args.public_host}:{args.as_port}"
        self._new_key()
        self.clients = dict(pair.split(":", 1) for pair in args.client or ())
        self.revoked: set[str] = set()
        self.issued: list[str] = []
        """Every access token issued (for tests that look for them where they must not be)."""
        self.lifetime = args.lifetime
        self.stats: dict[str, int] = {"client_credentials": 0, "token_exchange": 0, "refused": 0}
        self.subject_keys: Any = None
        self.subject_audience = args.subject_audience
        if args.subject_jwks:
            document = json.loads(Path(args.subject_jwks).read_text())
            self.subject_keys = jwt.PyJWKSet.from_dict(document)

    def _new_key(self) -> None:
        """A new signing key: every token signed before is invalid from now on."""
        import jwt
        from cryptography.hazmat.primitives.asymmetric import rsa

        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = uuid.uuid4().hex[:16]
        public = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        self.jwks = {"keys": [{**public, "kid": self.kid, "use": "sig", "alg": "RS256"}]}

    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        async def metadata(_request: Request) -> JSONResponse:
            return JSONResponse(
                {
                    "issuer": self.issuer,
                    "token_endpoint": f"{self.issuer}/token",
                    "jwks_uri": f"{self.issuer}/jwks",
                    "introspection_endpoint": f"{self.issuer}/introspect",
                    "grant_types_supported": [
                        "client_credentials",
                        "urn:ietf:params:oauth:grant-type:token-exchange",
                    ],
                    "token_endpoint_auth_methods_supported": ["client_secret_basic"],
                }
            )

        async def jwks(_request: Request) -> JSONResponse:
            return JSONResponse(self.jwks)

        async def token(request: Request) -> JSONResponse:
            form = dict(await request.form())
            client = self._client(request.headers.get("authorization"))
            grant = form.get("grant_type")
            if client is False:
                self.stats["refused"] += 1
                return _oauth_error(401, "invalid_client")
            if grant == "client_credentials":
                if client is None:
                    self.stats["refused"] += 1
                    return _oauth_error(401, "invalid_client")
                self.stats["client_credentials"] += 1
                return self._issue(client, client, None, form)
            if grant == "urn:ietf:params:oauth:grant-type:token-exchange":
                subject = self._subject(form.get("subject_token", ""))
                if subject is None:
                    self.stats["refused"] += 1
                    return _oauth_error(400, "invalid_grant")
                self.stats["token_exchange"] += 1
                return self._issue(client or "anonymous", subject, client, form)
            return _oauth_error(400, "unsupported_grant_type")

        async def introspect(request: Request) -> JSONResponse:
            import jwt

            form = dict(await request.form())
            try:
                claims = jwt.decode(
                    str(form.get("token", "")),
                    self.key.public_key(),
                    algorithms=["RS256"],
                    options={"verify_aud": False},
                    issuer=self.issuer,
                )
            except jwt.PyJWTError:
                return JSONResponse({"active": False})
            if claims.get("client_id") in self.revoked:
                return JSONResponse({"active": False})
            return JSONResponse({"active": True, **claims})

        async def revoke(request: Request) -> JSONResponse:
            self.revoked.add(request.query_params["client"])
            return JSONResponse({"revoked": sorted(self.revoked)})

        async def stats(_request: Request) -> JSONResponse:
            return JSONResponse(self.stats)

        async def issued(_request: Request) -> JSONResponse:
            return JSONResponse(self.issued)

        async def rotate(_request: Request) -> JSONResponse:
            self._new_key()
            return JSONResponse({"kid": self.kid})

        return Starlette(
            routes=[
                Route("/.well-known/oauth-authorization-server", metadata),
                Route("/jwks", jwks),
                Route("/token", token, methods=["POST"]),
                Route("/introspect", introspect, methods=["POST"]),
                Route("/admin/revoke-client", revoke, methods=["POST"]),
                Route("/admin/stats", stats),
                Route("/admin/rotate-keys", rotate, methods=["POST"]),
                Route("/admin/issued", issued),
            ]
        )

    def _client(self, authorization: str | None) -> str | bool | None:
        """The authenticated client id, ``None`` without credentials, ``False`` when wrong."""
        if not authorization or not authorization.lower().startswith("basic "):
            return None
        from urllib.parse import unquote

        try:
            pair = base64.b64decode(authorization[6:]).decode()
        except ValueError:
            return False
        client, _, secret = pair.partition(":")
        client, secret = unquote(client), unquote(secret)
        if client in self.revoked or self.clients.get(client) != secret:
            return False
        return client

    def _subject(self, token: str) -> str | None:
        import jwt

        if self.subject_keys is None:
            return None
        try:
            header = jwt.get_unverified_header(token)
            key = next(
                (k for k in self.subject_keys.keys if k.key_id == header.get("kid")),
                self.subject_keys.keys[0],
            )
            claims = jwt.decode(
                token, key.key, algorithms=["RS256", "ES256"], audience=self.subject_audience
            )
        except (jwt.PyJWTError, IndexError, ValueError):
            return None
        subject = claims.get("sub")
        return subject if isinstance(subject, str) else None

    def _issue(self, client: str, subject: str, actor: str | None, form: dict[str, Any]) -> Any:
        import jwt
        from starlette.responses import JSONResponse

        now = int(time.time())
        audience = form.get("resource") or form.get("audience")
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": subject,
            "aud": audience,
            "client_id": client,
            "scope": form.get("scope", ""),
            "iat": now,
            "exp": now + self.lifetime,
            "jti": uuid.uuid4().hex,
        }
        if actor is not None:
            claims["act"] = {"sub": actor}
        token = jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": self.kid})
        self.issued.append(token)
        body = {"access_token": token, "token_type": "Bearer", "expires_in": self.lifetime}
        if form.get("scope"):
            body["scope"] = form["scope"]
        if form.get("grant_type", "").endswith("token-exchange"):
            body["issued_token_type"] = "urn:ietf:params:oauth:token-type:access_token"
        return JSONResponse(body, headers={"cache-control": "no-store"})


def _oauth_error(status: int, error: str) -> Any:
    from starlette.responses import JSONResponse

    return JSONResponse({"error": error}, status_code=status)


# -- the protected MCP server ---------------------------------------------------------------------


def protected_server(args: argparse.Namespace, authority: AuthorizationServer) -> Any:
    import httpx
    import jwt
    from mcp.server.auth.middleware.auth_context import get_access_token
    from mcp.server.auth.provider import AccessToken
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.mcpserver import MCPServer

    resource = f"http://{args.public_host}:{args.mcp_port}/mcp"

    class Verifier:
        """Signature, issuer and audience offline; revocation by RFC 7662 introspection."""

        async def verify_token(self, token: str) -> AccessToken | None:
            try:
                claims = jwt.decode(
                    token,
                    authority.key.public_key(),
                    algorithms=["RS256"],
                    audience=resource,
                    issuer=authority.issuer,
                )
            except jwt.PyJWTError:
                return None
            async with httpx.AsyncClient() as client:
                answer = await client.post(f"{authority.issuer}/introspect", data={"token": token})
            if not answer.json().get("active"):
                return None
            return AccessToken(
                token=token,
                client_id=str(claims.get("client_id", "")),
                scopes=str(claims.get("scope", "")).split(),
                expires_at=int(claims["exp"]),
                resource=resource,
                subject=claims.get("sub"),
                claims=claims,
            )

    server = MCPServer(
        "protected",
        token_verifier=Verifier(),
        auth=AuthSettings(
            issuer_url=authority.issuer,
            resource_server_url=resource,
            required_scopes=[args.required_scope] if args.required_scope else None,
            validate_token_resource=False,  # the verifier checks the audience itself
        ),
    )

    @server.tool()
    def whoami() -> str:
        """Who the token names: subject, actor, client and scopes."""
        token = get_access_token()
        claims = (token.claims or {}) if token is not None else {}
        actor = claims.get("act")
        return json.dumps(
            {
                "subject": claims.get("sub"),
                "actor": actor.get("sub") if isinstance(actor, dict) else None,
                "client": claims.get("client_id"),
                "scopes": token.scopes if token is not None else [],
            }
        )

    @server.tool()
    def echo(text: str) -> str:
        """Returns the text."""
        return text

    from mcp.server.transport_security import TransportSecuritySettings

    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return server.streamable_http_app(transport_security=security, host=args.host)


async def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--public-host", default=None)
    parser.add_argument("--as-port", type=int, required=True)
    parser.add_argument("--mcp-port", type=int, required=True)
    parser.add_argument("--client", action="append")
    parser.add_argument("--lifetime", type=int, default=3600)
    parser.add_argument("--required-scope", default=None)
    parser.add_argument("--subject-jwks", default=None)
    parser.add_argument("--subject-audience", default=None)
    args = parser.parse_args()
    args.public_host = args.public_host or args.host
    authority = AuthorizationServer(args)
    servers = [
        uvicorn.Server(
            uvicorn.Config(app, host=args.host, port=port, log_level="warning", lifespan="auto")
        )
        for app, port in (
            (authority.app(), args.as_port),
            (protected_server(args, authority), args.mcp_port),
        )
    ]
    await asyncio.gather(*(server.serve() for server in servers))


if __name__ == "__main__":
    asyncio.run(main())
