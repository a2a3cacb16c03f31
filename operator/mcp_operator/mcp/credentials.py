"""What a client presents to an MCP server on every request: the :class:`Credentials` protocol.

:class:`~mcp_operator.mcp.session.McpSession` asks its credentials for headers before every
request it sends (``POST``, the ``GET`` stream, ``DELETE``) and merges them after the
server's static headers. When the server refuses a request with ``401`` or ``403`` (the auth
layer's refusal: the server did not act on it), the session tells the credentials
(:meth:`Credentials.rejected`); only when they answer ``True`` (new headers are worth a try)
is that one request sent once more. Nothing else is ever sent twice.

This module owns the protocol and :class:`TokenFileCredentials`, a bearer token read from a
file that the kubelet rotates (a projected ServiceAccount token, the bridge's identity
towards a managed server). Other kinds live with their owners (OAuth: the outbound-auth
module). A token never appears in a message, a ``repr`` or :meth:`Credentials.describe`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

REREAD_SECONDS = 60.0
"""A token file is read again at least this often, whatever its metadata says."""
CHECK_SECONDS = 1.0
"""A token file's metadata (inode, mtime, size) is looked at most this often: the kubelet
renews a projected token at 80 % of its lifetime, so a second late costs nothing, and the
hot path does not pay a ``stat`` per request."""


class CredentialsError(Exception):
    """Credentials could not be produced; the message names where from, never a value."""


class Credentials(Protocol):
    """What a session presents on every request, kept fresh by the implementation."""

    def describe(self) -> str:
        """Safe words for messages (where the credential comes from), never a value."""
        ...

    async def headers(self) -> Mapping[str, str]:
        """The headers for the next request (fresh for every request).

        Raises:
            CredentialsError: nothing can be presented (the message says why).
        """
        ...

    async def rejected(self, status: int, challenge: str | None) -> bool:
        """The server refused a request with ``status`` (401 or 403) and the
        ``WWW-Authenticate`` ``challenge`` it sent: True when new headers are worth one
        more try of that request."""
        ...


class TokenFileCredentials:
    """``Authorization: Bearer <token>`` with the token read from ``path``.

    The file is read once, then again when its inode, mtime or size changed (the kubelet
    swaps a projected volume's files atomically) — looked at no more than every
    ``check_seconds`` — and at least every ``reread_seconds``. A refusal makes the next
    request read the file at once; it is worth a retry only if the token changed since it
    was sent. A missing, unreadable or empty file is a :class:`CredentialsError` naming
    the path.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        check_seconds: float = CHECK_SECONDS,
        reread_seconds: float = REREAD_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self.check_seconds = check_seconds
        self.reread_seconds = reread_seconds
        self._monotonic = monotonic
        self._token: str | None = None
        self._stamp: tuple[int, int, int] | None = None
        self._checked_at = 0.0
        self._read_at = 0.0

    def __repr__(self) -> str:
        return f"TokenFileCredentials(path={str(self.path)!r})"

    def describe(self) -> str:
        return f"the token in {self.path}"

    async def headers(self) -> Mapping[str, str]:
        return {"authorization": f"Bearer {self.token()}"}

    async def rejected(self, status: int, challenge: str | None) -> bool:
        if status not in (401, 403):
            return False
        sent = self._token
        self._stamp = None  # read again whatever the metadata says
        try:
            return self.token() != sent
        except CredentialsError:
            return False

    def token(self) -> str:
        """The current token (read again when the file changed or is due)."""
        now = self._monotonic()
        token = self._token
        if (
            token is not None
            and self._stamp is not None
            and now - self._read_at < self.reread_seconds
            and (now - self._checked_at < self.check_seconds or self._same_file(now))
        ):
            return token
        return self._read(now)

    def _same_file(self, now: float) -> bool:
        self._checked_at = now
        try:
            return _stamp(os.stat(self.path)) == self._stamp
        except OSError:
            return False

    def _read(self, now: float) -> str:
        try:
            with open(self.path, "rb") as file:
                stamp = _stamp(os.fstat(file.fileno()))
                raw = file.read(64 * 1024 + 1)
        except FileNotFoundError:
            raise CredentialsError(f"the token file {self.path} does not exist") from None
        except OSError as error:
            raise CredentialsError(
                f"the token file {self.path} cannot be read ({error.strerror})"
            ) from None
        if len(raw) > 64 * 1024:
            raise CredentialsError(f"the token file {self.path} is larger than 64 KiB")
        try:
            token = raw.decode("ascii").strip()
        except UnicodeDecodeError:
            raise CredentialsError(f"the token file {self.path} is not ASCII text") from None
        if not token:
            raise CredentialsError(f"the token file {self.path} is empty")
        if not token.isprintable() or any(c.isspace() for c in token):
            raise CredentialsError(f"the token file {self.path} holds more than one token")
        self._token = token
        self._stamp = stamp
        self._checked_at = self._read_at = now
        return token


def _stamp(info: os.stat_result) -> tuple[int, int, int]:
    return (info.st_ino, info.st_mtime_ns, info.st_size)
