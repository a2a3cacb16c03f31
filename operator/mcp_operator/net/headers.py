"""Which request headers the wire sends: the one rule for every caller's configured headers.

A header that would break, forge or reframe a request's head is refused where it is
configured (the probe's target, the bridge's upstreams) and again by the pool before it
writes; the value is never shown, since it may be a credential.
"""

from __future__ import annotations

import re


def header_refusal(name: str, value: str) -> str | None:
    """Why a header cannot be sent as it is (it would break, forge or reframe the request's
    head), or ``None``. The value is never shown: it may be a credential."""
    if _TOKEN.fullmatch(name) is None:
        return f"the header name {name!r} is not a valid HTTP token"
    lowered = name.lower()
    if lowered in FRAMING_HEADERS:
        return f"the header {name!r} frames the request, which only the client may do"
    if lowered == "expect":
        return f"the header {name!r} asks for an interim answer, which the client never awaits"
    if _VALUE.fullmatch(value) is None:
        return f"the value of header {name!r} holds a control character or non-Latin-1 text"
    return None


FRAMING_HEADERS = frozenset(
    {
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "proxy-connection",
    }
)
"""Headers that say how a request is framed: the pool writes its own, and a second one from a
caller would let an intermediary read another request than the server. (``Host`` may be
given: it replaces the URL's, once.)"""


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An HTTP token (RFC 9110 §5.6.2): printable ASCII but for spaces and separators."""
_VALUE = re.compile(r"[\t\x20-\x7e\xa1-\xac\xae-\xff]*")
"""A header value the pool sends: tab and printable Latin-1 (no control characters, no
non-breaking space or soft hyphen, nothing past U+00FF)."""
