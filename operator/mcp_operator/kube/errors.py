"""What the API server's refusals become: the kube package's exceptions.

HTTP status codes become exceptions here and nowhere else (:func:`error_of`, which
:class:`~mcp_operator.kube.client.KubeClient` calls on every refusal), and so does a request
that got no answer at all (:class:`ApiUnreachable`: the HTTP client's failure, translated
once, where the client sends; no caller of the client sees the HTTP library's exceptions).
This module owns :class:`KubeError` and its kinds, and :class:`SecretReferenceError`, which
names a Secret and key that cannot be used, never a value.
"""

from __future__ import annotations

import httpx


class KubeError(RuntimeError):
    """The API server refused a request; ``status`` is the HTTP status code, ``fields`` the
    fields its answer names as the causes (``details.causes[].field``)."""

    def __init__(self, status: int, message: str, fields: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.fields = fields

    @property
    def summary(self) -> str:
        """The status and the message, as conditions and logs say it."""
        return f"HTTP {self.status}: {self}"


class NotFound(KubeError):
    pass


class ApiUnreachable(KubeError):
    """The request got no answer: no connection, a reset, a timeout, a broken TLS handshake.
    ``status`` is 0 (no HTTP status came); it may have reached the server (a lost answer)."""

    def __init__(self, cause: Exception) -> None:
        detail = str(cause) or type(cause).__name__
        super().__init__(0, f"The API server did not answer: {type(cause).__name__}: {detail}")

    @property
    def summary(self) -> str:
        return str(self)


class NameConflict(KubeError):
    """A child's name is taken by an object its owner does not control; nothing was written.

    The message names the object and its controller (:mod:`mcp_operator.kube.ownership`)."""

    reason = "NameConflict"

    def __init__(self, message: str) -> None:
        super().__init__(409, message)


class SecretReferenceError(RuntimeError):
    """A ``secretKeyRef`` cannot be resolved; the message names the Secret and key, no value."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def error_of(response: httpx.Response) -> KubeError:
    """The exception for an API server's refusal: its message and the fields it names."""
    fields: tuple[str, ...] = ()
    try:
        answer = response.json()
        message = str(answer.get("message", response.text))
        causes = (answer.get("details") or {}).get("causes") or ()
        fields = tuple(
            str(c.get("field")) for c in causes if isinstance(c, dict) and c.get("field")
        )
    except (ValueError, AttributeError):
        message = response.text[:500]
    if response.status_code == 404:
        return NotFound(404, message)
    return KubeError(response.status_code, message, fields)
