"""The tool errors of a refused authorization: ``upstream_unauthorized`` and ``insufficient_scope``.

A server's ``401`` (after the session's one retry with a new token), a ``403`` whose
challenge says ``insufficient_scope``, or a token endpoint that refused the bridge's client
or the run's identity (:class:`~mcp_operator.mcp.tokens.TokenError`) is no outage: calling
again will not help until the credentials or the grant change, so the hint says what the
server asked for (its challenge, :mod:`~mcp_operator.mcp.challenge`) and who can fix it.
"""

from __future__ import annotations

from mcp_operator.bridge.errors import ToolError, UpstreamFailure
from mcp_operator.mcp import challenge
from mcp_operator.mcp.tokens import TokenError


def unauthorized(server: str, error: UpstreamFailure) -> ToolError | None:
    """The tool error for an authorization refusal, or ``None`` for any other failure."""
    if isinstance(error, TokenError):
        if error.reason == "InsufficientScope":
            return ToolError(
                "insufficient_scope",
                f"Server {server} was not called: {error.message}. The platform must grant "
                "the scopes its MCPServer's spec.auth asks for; calling again will not help.",
                {"server": server},
            )
        return ToolError(
            "upstream_unauthorized",
            f"Server {server} was not called: no token could be had ({error.message}). "
            "Calling again will not help until the MCPServer's spec.auth or the "
            "authorization server's grant is fixed. Tools of other servers keep working.",
            {"server": server},
        )
    if error.status not in (401, 403):
        return None
    found = challenge.parse(error.challenge)
    if found is not None and found.insufficient_scope:
        details: dict[str, object] = {"server": server}
        if found.scope:
            details["scope"] = found.scope[:256]
        return ToolError(
            "insufficient_scope",
            f"{challenge.explain(f'Server {server}', error.status, found)}. The call was "
            "refused before it ran; calling again will not help until the token carries "
            "that scope.",
            details,
        )
    if error.status != 401:
        return None
    return ToolError(
        "upstream_unauthorized",
        f"{challenge.explain(f'Server {server}', 401, found)}. The call was refused before "
        "it ran (a new token was tried once); calling again will not help until the "
        "credentials are fixed. Tools of other servers keep working.",
        {"server": server},
    )
