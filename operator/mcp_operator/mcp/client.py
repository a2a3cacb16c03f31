"""The bounded HTTP client of the probe, and :func:`connect`: an SDK client after the handshake.

Bounds, so that a slow, broken or hostile server cannot sink the operator
(documented in ``docs/status-bounds.md``): at most ``MAX_RESPONSE_BYTES`` in
one HTTP response body (and one SSE event), and ``MAX_PROBE_BYTES`` in all
responses of one probe together. A verifying TLS context is built once and
reused by every probe.

:func:`connect` speaks either era: ``server/discover`` (2026-07-28) first, the
``initialize`` handshake (2025-11-25 and older) when the server does not answer
it; over Streamable HTTP or the legacy HTTP+SSE transport. What to do with the
session is left to :mod:`~mcp_operator.mcp.discovery` and
:mod:`~mcp_operator.mcp.watch`; what a failure means, to
:mod:`~mcp_operator.mcp.errors`.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import httpx2
import mcp
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation

from mcp_operator import __version__
from mcp_operator.mcp.errors import ProbeState, ResponseTooLarge
from mcp_operator.mcp.target import ProbeTarget, display_url

MAX_RESPONSE_BYTES = 16 * 1024 * 1024
"""One HTTP response body (or SSE event) larger than this fails with ``ResponseTooLarge``."""

MAX_PROBE_BYTES = 64 * 1024 * 1024
"""All response bodies of one probe together: more fails with ``ResponseTooLarge``. This
also bounds what the SDK's session keeps per tool (it caches output schemas)."""


def probe_state(target: ProbeTarget) -> ProbeState:
    """A fresh :class:`ProbeState` for one probe of ``target``."""
    return ProbeState(display_url(target.url), target.timeout_seconds)


class _LimitedStream(httpx2.AsyncByteStream):
    """A response body stream that fails once more than ``limit`` bytes went through."""

    def __init__(self, inner: httpx2.AsyncByteStream, state: ProbeState, limit: int) -> None:
        self._inner = inner
        self._state = state
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        received = 0
        async for chunk in self._inner:
            received += len(chunk)
            self._state.received += len(chunk)
            if received > self._limit:
                self._state.response_limit = self._limit
                raise ResponseTooLarge(self._limit)
            if self._state.received > MAX_PROBE_BYTES:
                self._state.probe_limit = MAX_PROBE_BYTES
                raise ResponseTooLarge(MAX_PROBE_BYTES)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


@functools.cache
def _default_tls() -> ssl.SSLContext:
    """One verifying TLS context for every probe: loading the CA bundle costs ~25 ms of CPU,
    which a fleet of a thousand servers would otherwise pay on every probe."""
    return ssl.create_default_context()


def _tls(verify: bool | ssl.SSLContext) -> bool | ssl.SSLContext:
    return _default_tls() if verify is True else verify


def http_client(
    target: ProbeTarget, state: ProbeState, timeout: httpx2.Timeout | None = None
) -> httpx2.AsyncClient:
    """An httpx2 client for ``target`` that counts and bounds every response body in ``state``."""

    async def on_response(response: httpx2.Response) -> None:
        if response.request.method == "POST":
            status = response.status_code
            state.error_status = status if status >= 400 else None
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > MAX_RESPONSE_BYTES:
            state.response_limit = MAX_RESPONSE_BYTES
            raise ResponseTooLarge(MAX_RESPONSE_BYTES)
        if isinstance(response.stream, httpx2.AsyncByteStream):
            response.stream = _LimitedStream(response.stream, state, MAX_RESPONSE_BYTES)

    # identity: a compressed body could inflate past the bound after it was counted.
    headers = {"accept-encoding": "identity", **target.headers}
    return httpx2.AsyncClient(
        headers=headers,
        timeout=timeout or httpx2.Timeout(target.timeout_seconds),
        verify=_tls(target.verify_tls),
        event_hooks={"response": [on_response]},
    )


async def connect(
    stack: AsyncExitStack,
    target: ProbeTarget,
    state: ProbeState,
    *,
    message_handler: Any = None,
    http_timeout: httpx2.Timeout | None = None,
) -> mcp.Client:
    """An SDK client after the handshake (2026 discovery first, then ``initialize``).

    The client and its connections close with ``stack``.
    """
    transport: Any
    if target.transport == "sse":

        def factory(*_args: Any, **_kwargs: Any) -> httpx2.AsyncClient:
            return http_client(target, state, http_timeout)  # sse_client enters and closes it

        transport = sse_client(
            target.url,
            timeout=target.timeout_seconds,
            sse_read_timeout=target.timeout_seconds if http_timeout is None else 86400,
            httpx_client_factory=factory,
        )
    else:
        http = await stack.enter_async_context(http_client(target, state, http_timeout))
        transport = streamable_http_client(
            target.url, http_client=http, max_sse_event_size=MAX_RESPONSE_BYTES
        )
    client_info = Implementation(name="mcp-operator-probe", version=__version__)
    state.phase = "the handshake"
    client: mcp.Client = await stack.enter_async_context(
        mcp.Client(
            transport,
            mode="auto",
            cache=None,
            client_info=client_info,
            message_handler=message_handler,
        )
    )
    return client
