"""The Host/Origin policy of an MCP endpoint: DNS rebinding protection.

Owns which ``Host`` and ``Origin`` headers a server accepts (the local names
always, plus the configured names and patterns, IPv6 literals in brackets)
and the refusal itself: 421 for a foreign Host, 403 for a foreign Origin.
Leaves where the allowed names come from to the caller's configuration.
"""

from __future__ import annotations

import fnmatch
from urllib.parse import urlsplit

from mcp_operator.serve.asgi import Send, respond_plain

LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1")


def _bracket_ipv6(pattern: str) -> str:
    """``fd00::5`` -> ``[fd00::5]``: the form a Host header carries an IPv6 address in
    (a Pod IP passed as ``--allowed-host=$(POD_IP)`` on an IPv6 cluster, say)."""
    if pattern.count(":") >= 2 and not pattern.startswith("["):
        return f"[{pattern}]"
    return pattern


class HostPolicy:
    """DNS rebinding protection: which Host and Origin headers are accepted (results cached)."""

    def __init__(self, allowed_hosts: tuple[str, ...], allowed_origins: tuple[str, ...]) -> None:
        self._any_host = "*" in allowed_hosts
        self._hosts = tuple(
            _bracket_ipv6(h.lower()) for h in (*LOCAL_HOSTS, *allowed_hosts) if h != "*"
        )
        self._origins = tuple(o.lower().rstrip("/") for o in allowed_origins)
        self._host_cache: dict[str, bool] = {}
        self._origin_cache: dict[str, bool] = {}

    def host_ok(self, host: str | None) -> bool:
        if self._any_host:
            return True
        if host is None:
            return False
        cached = self._host_cache.get(host)
        if cached is None:
            cached = self._match_host(host.lower())
            if len(self._host_cache) < 1024:
                self._host_cache[host] = cached
        return cached

    def _match_host(self, host: str) -> bool:
        name = host
        if host.startswith("["):
            name = host[: host.find("]") + 1] if "]" in host else host
        elif host.count(":") == 1:
            name = host.rsplit(":", 1)[0]
        for pattern in self._hosts:
            target = (
                host
                if (":" in pattern and not pattern.startswith("[")) or "]:" in pattern
                else name
            )
            if target == pattern or ("*" in pattern and fnmatch.fnmatchcase(target, pattern)):
                return True
        return False

    def origin_ok(self, origin: str | None) -> bool:
        if origin is None:
            return True
        cached = self._origin_cache.get(origin)
        if cached is None:
            cached = self._match_origin(origin.lower().rstrip("/"))
            if len(self._origin_cache) < 1024:
                self._origin_cache[origin] = cached
        return cached

    def _match_origin(self, origin: str) -> bool:
        if any(o == origin or ("*" in o and fnmatch.fnmatchcase(origin, o)) for o in self._origins):
            return True
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False
        return self._match_host(parts.netloc)

    async def refused(self, headers: dict[bytes, str], send: Send) -> bool:
        """Answer 421 for a foreign Host or 403 for a foreign Origin (DNS rebinding)."""
        if not self.host_ok(headers.get(b"host")):
            await respond_plain(send, 421, b"Invalid Host header")
            return True
        if not self.origin_ok(headers.get(b"origin")):
            await respond_plain(send, 403, b"Invalid Origin header")
            return True
        return False
