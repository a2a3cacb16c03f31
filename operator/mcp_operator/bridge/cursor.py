"""The bridge's own pagination cursors: opaque to the agent, signed, bound to one listing.

A listing the bridge serves from several servers (``resources/list``,
``resources/templates/list``) is walked one server's page at a time; the agent's cursor says
where the walk is: which server (by key) and that server's own cursor. This module owns the
cursor's form, as pure code (the key is the caller's):

- :meth:`CursorCodec.encode` — ``base64url(JSON) "." base64url(HMAC-SHA256)[:16 bytes]``,
  the JSON naming the method, the server and the upstream cursor;
- :meth:`CursorCodec.decode` — the position back, or :class:`InvalidCursor` for anything the
  codec did not make for that method: a forged, altered, truncated or oversized cursor, one
  of another listing, or one of an earlier run of the bridge (the key is per process). The
  bridge answers that with JSON-RPC invalid params (-32602), as the spec asks.

An upstream's cursor is carried, never interpreted: only the upstream judges it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass

MAX_CURSOR_CHARS = 8192
"""A longer cursor is refused unread (an upstream's cursor is carried inside it)."""
MAC_BYTES = 16


class InvalidCursor(ValueError):
    """A cursor the bridge did not issue for this listing."""


@dataclass(frozen=True)
class Position:
    """Where a listing across servers goes on."""

    server: str
    """The key (``namespace/name``) of the server whose page comes next."""
    cursor: str | None
    """That server's own cursor (``None``: its first page)."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class CursorCodec:
    """Makes and checks cursors under one secret key (random per process by default)."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key is not None else secrets.token_bytes(32)

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()[:MAC_BYTES]

    def encode(self, method: str, position: Position) -> str:
        payload = json.dumps(
            {"m": method, "s": position.server, "c": position.cursor},
            separators=(",", ":"),
            ensure_ascii=True,
        ).encode("ascii")
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def decode(self, method: str, cursor: object) -> Position:
        if not isinstance(cursor, str) or not 0 < len(cursor) <= MAX_CURSOR_CHARS:
            raise InvalidCursor("the cursor is not one this listing gave")
        body, _, mac = cursor.partition(".")
        try:
            payload, signature = _unb64(body), _unb64(mac)
        except (binascii.Error, ValueError):
            raise InvalidCursor("the cursor is not one this listing gave") from None
        if _b64(payload) != body or _b64(signature) != mac:
            # base64's last character may carry padding bits: only the text we wrote is ours
            raise InvalidCursor("the cursor is not one this listing gave")
        if not hmac.compare_digest(signature, self._mac(payload)):
            raise InvalidCursor("the cursor is not one this listing gave")
        data = json.loads(payload)  # ours: signed, so well formed
        if data.get("m") != method:
            raise InvalidCursor(f"the cursor belongs to {data.get('m')}, not {method}")
        return Position(server=data["s"], cursor=data["c"])
