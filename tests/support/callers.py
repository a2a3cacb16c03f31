"""Callers the session tables tell apart: HTTP clients whose connections come from chosen
loopback addresses (127.0.0.2, 127.0.0.3, …).

The adapter and the bridge count legacy sessions per caller, by client address until
callers are authenticated (``serve.sessions.client_address``); a test of fairness needs
callers that really come from different addresses over real HTTP.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx


@contextlib.contextmanager
def caller(address: str) -> Iterator[httpx.Client]:
    """An HTTP client whose connections come from ``address``."""
    transport = httpx.HTTPTransport(local_address=address)
    with httpx.Client(transport=transport, timeout=10) as client:
        yield client
