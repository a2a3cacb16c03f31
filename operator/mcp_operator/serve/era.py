"""Which protocol era an incoming MCP request speaks.

Owns the routing decision between the two eras on one endpoint, as the
SDK's session manager makes it: an ``MCP-Protocol-Version`` header that
names no handshake-era version selects the stateless 2026-07-28 entry;
everything else is the legacy session protocol. Leaves what each era
answers to the server that serves it.
"""

from __future__ import annotations

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS


def is_modern(version: str | None) -> bool:
    """Whether an ``MCP-Protocol-Version`` header routes the request to the stateless era.

    Mirrors the SDK's session manager: a header naming anything but a
    handshake version (unknown values included) goes to the 2026 entry, whose
    ladder rejects what it does not serve.
    """
    return version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS
