"""What to make of a stdout line of the child that is too long to read: the call it answers.

Pure: given the first and last bytes of a line over ``--max-line-bytes`` (the
middle was never kept), find whether it is a JSON-RPC response and to which
id, without parsing it. Serializers put the id either near the start
(``{"jsonrpc":"2.0","id":7,"result":…``, Python's SDK) or as the last member
(``{"result":…,"jsonrpc":"2.0","id":7}``, the TypeScript SDK); the first
member other than ``jsonrpc`` and ``id`` must be ``result`` or ``error``, so
that a request from the child (whose id is in the child's own id space) is
never taken for an answer. The last member before the final ``}`` belongs to
the outermost object, so an ``"id"`` there is the message's own, never one
nested in the result. When no id is found, no call is failed: the call waits
for its timeout as before (the caller logs that). The error that fails the
call is built here too; it says how long the line was, never what it said.
"""

from __future__ import annotations

import re
from typing import Any

from mcp_types.jsonrpc import INTERNAL_ERROR

EDGE_BYTES = 1024
"""How much of each end of an oversized line is kept to look for the id."""

_ID = rb'(-?\d{1,18}|"(?:[^"\\]|\\.){0,256}")'
_JSONRPC = rb'"jsonrpc"\s*:\s*"2\.0"\s*,\s*'
_HEAD = re.compile(
    rb"\s*\{\s*(?:" + _JSONRPC + rb")?(?:\"id\"\s*:\s*" + _ID + rb"\s*,\s*)?(?:" + _JSONRPC + rb")?"
    rb'"(?:result|error)"\s*:'
)
_TAIL = re.compile(rb'[,{]\s*"id"\s*:\s*' + _ID + rb'\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$')


def _decode_id(raw: bytes) -> int | str | None:
    if raw.startswith(b'"'):
        try:
            text = raw[1:-1].decode()
        except UnicodeDecodeError:
            return None
        return text if "\\" not in text else None
    return int(raw)


def response_id(head: bytes, tail: bytes) -> int | str | None:
    """The id of the response whose line starts with ``head`` and ends with ``tail``, if any."""
    start = _HEAD.match(head)
    if start is None:
        return None
    if start.group(1) is not None:
        return _decode_id(start.group(1))
    end = _TAIL.search(tail)
    return _decode_id(end.group(1)) if end is not None else None


def too_large_answer(request_id: int | str, size: int, limit: int) -> dict[str, Any]:
    """The error response that stands in for an answer of ``size`` bytes over ``limit``."""
    text = (
        f"The MCP server's answer was at least {size} bytes, over the adapter's limit of "
        f"{limit} bytes (--max-line-bytes)"
    )
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": INTERNAL_ERROR, "message": text}}
