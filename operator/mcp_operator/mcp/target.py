"""Where and how to probe: :class:`ProbeTarget`, its checks, and URLs safe to show.

A target's ``repr`` shows header names, never their values, and its URL
without userinfo and query string (:func:`display_url`): credentials cannot
leak through a log line or a message. Connecting is left to
:mod:`~mcp_operator.mcp.probe_client`.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from mcp_operator.mcp.credentials import Credentials
from mcp_operator.mcp.errors import ProbeError
from mcp_operator.mcp.messages import display_url
from mcp_operator.net.egress import EgressPolicy
from mcp_operator.net.headers import header_refusal

__all__ = ["ProbeTarget", "Transport", "check_target", "display_url"]

Transport = Literal["streamable-http", "sse"]


@dataclass(frozen=True)
class ProbeTarget:
    """Where and how to probe. ``repr`` shows header names, never their values."""

    url: str
    transport: Transport = "streamable-http"
    headers: Mapping[str, str] = field(default_factory=dict, hash=False)
    timeout_seconds: float = 10.0
    verify_tls: bool | ssl.SSLContext = True
    """``True``: the system CAs; ``False``: no verification; an ``SSLContext``: its CAs
    (e.g. the cluster CA, when probing through the API server's service proxy)."""
    egress: EgressPolicy = field(default_factory=EgressPolicy)
    """Where connections may go (:mod:`~mcp_operator.net.egress`); the default refuses
    loopback, link-local, metadata and private addresses."""
    credentials: Credentials | None = field(default=None, compare=False, hash=False)
    """Asked for headers before every request (a managed server's audience-bound token);
    ``repr`` says where they come from, never their value."""

    def __repr__(self) -> str:
        verify = "custom" if isinstance(self.verify_tls, ssl.SSLContext) else self.verify_tls
        return (
            f"ProbeTarget(url={display_url(self.url)!r}, transport={self.transport!r}, "
            f"headers={sorted(self.headers)!r}, timeout_seconds={self.timeout_seconds!r}, "
            f"verify_tls={verify!r}"
            + (f", credentials={self.credentials.describe()!r})" if self.credentials else ")")
        )


def check_target(target: ProbeTarget) -> None:
    """Raise ``ProbeError("InvalidTarget")`` for a target that cannot be probed at all."""
    try:
        parts = urlsplit(target.url)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        valid = False
    if not valid:
        raise ProbeError(
            "InvalidTarget", f"{display_url(target.url)} is not an http:// or https:// URL"
        )
    if target.transport not in ("streamable-http", "sse"):
        raise ProbeError(
            "InvalidTarget", f"transport {target.transport!r} cannot be probed over the network"
        )
    if target.timeout_seconds <= 0:
        raise ProbeError("InvalidTarget", "the probe timeout must be positive")
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ProbeError(
            "InvalidTarget", f"{display_url(target.url)} has an invalid port"
        ) from None
    for name, value in target.headers.items():
        refusal = header_refusal(name, value)
        if refusal is not None:
            raise ProbeError("InvalidTarget", f"{refusal}, so it cannot be sent")
    why = target.egress.host_refusal(host, port)
    if why is not None:
        raise ProbeError(
            "DestinationRefused",
            f"{display_url(target.url)} was not contacted: {host} {why.removeprefix('it ')} "
            "(the operator's egress policy; see docs/security.md)",
        )
