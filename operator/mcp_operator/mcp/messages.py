"""The JSON-RPC messages of an MCP session, and the URL they go to.

This module owns the small rules of the messages a session sends and reads: a request's
bytes (:func:`body`), a body decoded (:func:`loads`, :data:`NOT_JSON`), what is a
notification and what answers which request (strictly by id type and value), an answer's
media type, the parts of a ``-32022`` error and a ``serverInfo``, ``ttlMs`` clamped, and of
the server's URL the form safe to show (:func:`display_url`) and its userinfo as Basic
credentials. Pure.
"""

from __future__ import annotations

import base64
import urllib.parse
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from pydantic import ValidationError

from mcp_operator.net import jsoncodec
from mcp_operator.net.http1 import Http1Response

NOT_JSON = object()
"""What :func:`loads` gives for a body that is not JSON."""


def loads(text: bytes) -> Any:
    """The JSON value of ``text``, or :data:`NOT_JSON`."""
    try:
        return jsoncodec.loads(text)
    except ValueError:
        return NOT_JSON


def is_notice(message: Any) -> bool:
    """Whether ``message`` is a notification (a method, no id)."""
    return (
        isinstance(message, dict) and isinstance(message.get("method"), str) and "id" not in message
    )


def media(answer: Http1Response) -> str:
    """The answer's media type, lowercase, without parameters."""
    return answer.headers.get("content-type", "").partition(";")[0].strip().lower()


def body(request_id: int, method: str, params: Mapping[str, Any]) -> bytes:
    """The bytes of a JSON-RPC request."""
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return jsoncodec.dumps(message)


def answers(message: Mapping[str, Any], request_id: int) -> bool:
    """Whether ``message`` is the response to ``request_id``: the same type and value
    (``true`` and ``"1"`` are not ``1``)."""
    answer_id = message.get("id")
    return (
        type(answer_id) is int
        and answer_id == request_id
        and ("result" in message or "error" in message)
    )


def display_url(url: str) -> str:
    """``url`` without userinfo, query and fragment: safe to show in messages and logs."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<invalid URL>"
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path}"


def clamped(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` with a negative ``ttlMs`` floored to 0, as the SDK does (a caching SHOULD)."""
    ttl = raw.get("ttlMs")
    if isinstance(ttl, int | float) and not isinstance(ttl, bool) and ttl < 0:
        raw["ttlMs"] = 0
    return raw


def supported(data: Any) -> list[str] | None:
    """``supported`` of a -32022 error's data, if it has one."""
    try:
        return types.UnsupportedProtocolVersionErrorData.model_validate(data).supported
    except ValidationError:
        return None


def implementation(data: Any) -> types.Implementation | None:
    """``data`` as an ``Implementation`` (a server's ``serverInfo``), if it is one."""
    try:
        return types.Implementation.model_validate(data) if data is not None else None
    except ValidationError:
        return None


def userinfo_auth(url: str) -> dict[str, str]:
    """Basic credentials from the URL's userinfo (``https://user:secret@host/mcp``), as httpx
    sends them; a configured ``Authorization`` header replaces them."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return {}
    user = urllib.parse.unquote(parts.username)
    secret = urllib.parse.unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{secret}".encode()).decode("ascii")
    return {"authorization": f"Basic {token}"}
