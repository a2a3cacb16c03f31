"""What a server's ``401``/``403`` asks for: its ``WWW-Authenticate`` challenge, read.

:func:`parse` reads a challenge (RFC 9110 §11.6.1; the Bearer parameters of RFC 6750 §3 and
``resource_metadata`` of RFC 9728 §5.1) into a :class:`Challenge`; :func:`explain` says in one
sentence what it means for a client that wants in (``AuthRequired``, or ``InsufficientScope``
with the scope the server named); :func:`authorization_servers` fetches the protected-resource
metadata the challenge names (RFC 9728 §3) through the caller's egress policy, bounded in time
and bytes, so the message can name the authorization servers to configure.

Everything quoted from the server is cut and made printable: a challenge is the server's text.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp_operator.mcp.messages import display_url
from mcp_operator.mcp.naming import cut
from mcp_operator.net.egress import EgressPolicy
from mcp_operator.net.http1 import Http1Error
from mcp_operator.net.pool import Http1Pool

METADATA_SECONDS = 5.0
"""The protected-resource metadata is fetched within this long (or the caller's remaining
deadline, when shorter)."""
MAX_METADATA_BYTES = 64 * 1024
MAX_SERVERS = 4
"""At most this many authorization servers are named in a message."""
MAX_TEXT = 200

_PARAM = re.compile(r'\s*([!#$%&\'*+.^_`|~0-9A-Za-z-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,]*)\s*,?')


@dataclass(frozen=True)
class Challenge:
    """The first challenge of a ``WWW-Authenticate`` header: its scheme and parameters."""

    scheme: str
    params: dict[str, str] = field(default_factory=dict)

    @property
    def error(self) -> str | None:
        return self.params.get("error")

    @property
    def scope(self) -> str | None:
        return self.params.get("scope")

    @property
    def resource_metadata(self) -> str | None:
        url = self.params.get("resource_metadata")
        return url if url and url.startswith(("https://", "http://")) else None

    @property
    def insufficient_scope(self) -> bool:
        return self.error == "insufficient_scope"


def parse(header: str | None) -> Challenge | None:
    """The first challenge of ``header`` (``None`` when there is none)."""
    if not header or not header.strip():
        return None
    text = header.strip()
    scheme, _, rest = text.partition(" ")
    if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", scheme):
        return None
    params: dict[str, str] = {}
    position = 0
    while position < len(rest):
        found = _PARAM.match(rest, position)
        if found is None or found.end() == position:
            break  # a token68, or a next challenge (another scheme): the first one ends here
        name, value = found.group(1).lower(), found.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        params.setdefault(name, value)
        position = found.end()
    return Challenge(scheme, params)


def reason_of(status: int, challenge: Challenge | None) -> str:
    """``InsufficientScope`` for a 403 (or a 401) that says so, else ``AuthRequired``."""
    if challenge is not None and challenge.insufficient_scope:
        return "InsufficientScope"
    return "AuthRequired"


def explain(
    where: str, status: int, challenge: Challenge | None, servers: Sequence[str] = ()
) -> str:
    """One sentence: what ``where`` answered and what it asks for (``servers``: the
    authorization servers its metadata named)."""
    if challenge is None:
        return f"{where} answered HTTP {status} without a WWW-Authenticate challenge"
    parts = [f"{where} answered HTTP {status} asking for {_text(challenge.scheme)} authentication"]
    if challenge.insufficient_scope:
        parts = [f"{where} answered HTTP {status}: the token lacks a scope it needs"]
    if challenge.scope:
        parts.append(f"scope {_text(challenge.scope)!r}")
    elif challenge.insufficient_scope and challenge.params.get("error_description"):
        parts.append(_text(challenge.params["error_description"]))
    if challenge.error and not challenge.insufficient_scope:
        parts.append(f"error {_text(challenge.error)}")
    if challenge.resource_metadata:
        parts.append(f"resource metadata {display_url(challenge.resource_metadata)}")
    if servers:
        named = ", ".join(display_url(server) for server in servers[:MAX_SERVERS])
        parts.append(f"authorization servers {named}")
    text = parts[0]
    if len(parts) > 1:
        text += " (" + "; ".join(parts[1:]) + ")"
    hint = (
        ": grant the client that scope, or ask for it in spec.auth"
        if challenge.insufficient_scope
        else ": configure spec.auth (see docs/authentication.md)"
    )
    return text + hint


async def authorization_servers(
    url: str, egress: EgressPolicy, *, seconds: float = METADATA_SECONDS, ssl_context: Any = None
) -> list[str]:
    """The ``authorization_servers`` of the protected-resource metadata at ``url``
    (RFC 9728 §2), fetched under ``egress`` within ``seconds``; ``[]`` when it cannot be had
    (refused, unreachable, too large, not the metadata): a message is better without it
    than late."""
    pool = Http1Pool(egress=egress, ssl_context=ssl_context)
    try:
        async with asyncio.timeout(seconds):
            answer = await pool.request(
                "GET", url, {"accept": "application/json", "accept-encoding": "identity"}
            )
            received = bytearray()
            async for chunk in answer.aiter_bytes():
                received += chunk
                if len(received) > MAX_METADATA_BYTES:
                    return []
            await answer.aclose()
            if answer.status_code != 200:
                return []
    except (TimeoutError, Http1Error, OSError, ValueError):
        return []
    finally:
        await pool.aclose()
    try:
        document = json.loads(received)
    except ValueError:
        return []
    found = document.get("authorization_servers") if isinstance(document, dict) else None
    if not isinstance(found, list):
        return []
    return [
        _text(server)
        for server in found[:MAX_SERVERS]
        if isinstance(server, str) and server.startswith(("https://", "http://"))
    ]


def _text(value: str) -> str:
    return cut("".join(c if c.isprintable() else "?" for c in value), MAX_TEXT)
