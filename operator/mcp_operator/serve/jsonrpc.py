"""JSON-RPC over HTTP: compact encoding, error objects, reading one message from a body.

Owns the JSON side of a request and a response: how a message is encoded
(compact, UTF-8), what an error response looks like, and how a POSTed body
becomes one decoded message (or a 415/413/400 answer). Leaves what the
message means to the endpoint that reads it.
"""

from __future__ import annotations

from typing import Any

from mcp_types.jsonrpc import PARSE_ERROR

from mcp_operator.net import jsoncodec
from mcp_operator.serve.asgi import (
    BodyTooLargeError,
    ClientGoneError,
    Receive,
    Send,
    read_body,
    respond_json,
    respond_plain,
)

RequestId = str | int
"""A JSON-RPC request id as MCP allows it (never null)."""


def dumps(message: Any) -> bytes:
    """Compact UTF-8 JSON (:func:`~mcp_operator.net.jsoncodec.dumps`: a text holding a lone
    surrogate, which JSON can carry but UTF-8 cannot, is written with ``\\u`` escapes)."""
    return jsoncodec.dumps(message)


def error_response(request_id: RequestId | None, code: int, message: str) -> dict[str, Any]:
    """A JSON-RPC error response."""
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


async def read_json(
    headers: dict[bytes, str], receive: Receive, send: Send, limit: int
) -> tuple[bool, Any]:
    """The decoded body, or (False, None) after answering 413/415/400 itself."""
    content_type = headers.get(b"content-type", "")
    if not content_type.lower().startswith("application/json"):
        await respond_plain(send, 415, b"Content-Type must be application/json")
        return False, None
    try:
        body = await read_body(headers, receive, limit)
    except BodyTooLargeError:
        await respond_plain(send, 413, b"Request body too large")
        return False, None
    except ClientGoneError:
        return False, None
    try:
        return True, jsoncodec.loads(body)
    except ValueError:
        await respond_json(send, 400, dumps(error_response(None, PARSE_ERROR, "Parse error")))
        return False, None
