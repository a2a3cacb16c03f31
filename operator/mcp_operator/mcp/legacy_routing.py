"""Where the legacy HTTP+SSE transport's messages go, and whose answer each one is (pure).

This module owns the two ties of that transport (:mod:`.legacy_sse`): the ``POST`` endpoint
the stream's ``endpoint`` event names, resolved against the stream's URL and refused unless
it is on the stream's origin (:func:`endpoint_url`: the session's headers and tokens go
there), and the keys that tie what comes back on the stream to a request: a response's
JSON-RPC id, strictly by type and value (:func:`answered_id`), and a progress token
(:func:`token_key`).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.messages import display_url

MAX_ENDPOINT_CHARS = 2048
"""A longer ``endpoint`` is refused."""
DEFAULT_PORTS = {"http": 80, "https": 443}


def endpoint_url(stream_url: str, data: str) -> str:
    """The URL the ``endpoint`` event's ``data`` names, resolved against the stream's URL,
    without userinfo or fragment.

    Raises:
        McpFailure: the endpoint is on another origin than the stream (it would send the
            session's headers there), is empty, too long, or could not be sent as it is.
    """
    text = data.strip()
    if not text or len(text) > MAX_ENDPOINT_CHARS:
        raise McpFailure("mcp", "the event stream named an endpoint that is empty or too long")
    resolved = urllib.parse.urljoin(stream_url, text)
    if any(ord(char) <= 0x20 or ord(char) >= 0x7F for char in resolved):
        raise McpFailure("mcp", "the event stream named an endpoint that is not a plain URL")
    if _origin(resolved) != _origin(stream_url):
        raise McpFailure(
            "mcp",
            f"the event stream named an endpoint on another origin ({display_url(resolved)}), "
            "which is refused: the session's headers and credentials would go there",
        )
    parts = urllib.parse.urlsplit(resolved)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path or "/", parts.query, ""))


def _origin(url: str) -> tuple[str, str, int] | None:
    """A URL's scheme, host and port (the default port of its scheme when it names none)."""
    try:
        parts = urllib.parse.urlsplit(url)
        scheme = parts.scheme.lower()
        port = parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        return None
    if scheme not in DEFAULT_PORTS or not parts.hostname or port is None:
        return None
    return scheme, parts.hostname.lower(), port


def answered_id(message: Mapping[str, Any]) -> int | None:
    """The id of the request ``message`` answers: only a response (a result or an error)
    whose id is an integer (our ids are; ``true`` and ``"1"`` are not ``1``)."""
    answer_id = message.get("id")
    answers = "result" in message or "error" in message
    if type(answer_id) is int and "method" not in message and answers:
        return answer_id
    return None


def token_key(token: Any) -> tuple[type, str | int] | None:
    """A progress token as a key that keeps its type (``1`` and ``"1"`` differ)."""
    if isinstance(token, str | int) and not isinstance(token, bool):
        return type(token), token
    return None
