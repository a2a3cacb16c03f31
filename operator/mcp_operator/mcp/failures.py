"""How an MCP session's request failed, and what its caller may do about it.

This module owns :class:`McpFailure`: ``fault`` says what broke (no connection, a broken
connection, an HTTP error status, a JSON-RPC error, an answer that is not MCP, the deadline,
a bound, the credentials), :attr:`~McpFailure.kind` what it means for the caller
(``unavailable`` and ``timeout`` may pass; ``error`` will not). The message never holds a
header value.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Any, Literal

Fault = Literal[
    "connect",
    "connection",
    "mismatch",
    "http",
    "rpc",
    "json",
    "mcp",
    "timeout",
    "limit",
    "credentials",
]
"""What broke: no connection; the connection failed or ended mid-answer; an answer to another
request; an HTTP error status; a JSON-RPC error; a body that is not JSON; an answer that is
not MCP; the caller's deadline; one of the session's bounds; the session's credentials could
not produce anything to present (nothing was sent)."""
Kind = Literal["unavailable", "timeout", "error"]
"""What a caller does with a failure: ``unavailable`` and ``timeout`` may pass (the server
could not be reached, lost the call, or a gateway said 502/503/504); ``error``: the server
answered, but not with a result."""
TRANSIENT_HTTP = frozenset({502, 503, 504})


@dataclass(eq=False)
class McpFailure(Exception):
    """A request that produced no result: ``fault`` says what broke, :attr:`kind` what it
    means for the caller. The message never holds a header value."""

    fault: Fault
    message: str
    _: KW_ONLY
    code: int | None = None
    """The JSON-RPC error's code when the server sent one."""
    data: Any = None
    """The JSON-RPC error's data when the server sent one."""
    status: int | None = None
    """The HTTP status when the answer had an error status."""
    detail: str | None = None
    """The server's own words (its error message), when it gave any."""
    limit: str | None = None
    """The listing bound that was passed (``TooManyPages``, ``PaginationLoop``,
    ``TooManyTools``)."""
    challenge: str | None = None
    """The ``WWW-Authenticate`` header of a 401 or 403 answer (:mod:`~mcp_operator.mcp.challenge`
    reads it)."""

    def __post_init__(self) -> None:
        super().__init__(self.message)

    @property
    def kind(self) -> Kind:
        if self.fault in ("connect", "connection", "mismatch"):
            return "unavailable"
        if self.fault == "timeout":
            return "timeout"
        if self.fault == "http" and self.status in TRANSIENT_HTTP:
            return "unavailable"
        return "error"

    @property
    def transient(self) -> bool:
        """Whether repeating the request may help (connection trouble, a gateway, time)."""
        return self.kind in ("unavailable", "timeout")

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"McpFailure(fault={self.fault!r}, code={self.code!r}, message={self.message!r})"
