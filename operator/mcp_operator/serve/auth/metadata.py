"""RFC 9728 OAuth 2.0 Protected Resource Metadata of an MCP endpoint in OIDC mode.

Owns the document (``resource``, ``authorization_servers``, ``bearer_methods_supported``)
and where it is served: ``/.well-known/oauth-protected-resource`` and the form with the
resource's path appended (``/.well-known/oauth-protected-resource/mcp``), which the MCP
authorization spec's clients try first; the 401 challenge names the latter in
``resource_metadata``. Pure.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from mcp_operator.serve.auth.access import OidcSettings

WELL_KNOWN = "/.well-known/oauth-protected-resource"


def document(settings: OidcSettings) -> bytes:
    return json.dumps(
        {
            "resource": settings.resource,
            "authorization_servers": list(settings.authorization_servers or (settings.issuer,)),
            "bearer_methods_supported": ["header"],
        },
        separators=(",", ":"),
    ).encode()


def metadata_url(resource: str) -> str:
    """Where the metadata of ``resource`` is served (RFC 9728 §3.1: the well-known path
    inserted between the host and the resource's path)."""
    parts = urlsplit(resource)
    path = parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{path}"


def is_metadata_path(path: str) -> bool:
    return path == WELL_KNOWN or path.startswith(WELL_KNOWN + "/")
