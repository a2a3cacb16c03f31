"""How a session learns its server's era: ``server/discover``, else the ``initialize`` handshake.

:meth:`SessionHandshake.connect` follows the SDK's ``mode="auto"``: ``server/discover`` first
at the newest modern version (or straight to the handshake when the server's status said it
speaks a legacy one); ``-32022`` naming a mutual modern version is retried once at that
version, naming only modern versions we do not share fails; any other rejection, no answer
within ``discover_seconds``, or a result without a mutual modern version falls back to
``initialize``. The SDK's models validate what the server answered (``DiscoverResult``,
``InitializeResult``); the era, the server's capabilities and its identity are kept on the
session.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import mcp_types as types
from mcp_types import SERVER_INFO_META_KEY, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    LATEST_MODERN_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)
from pydantic import ValidationError

from mcp_operator.mcp import messages
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.session_exchange import SessionExchange


class SessionHandshake(SessionExchange):
    """A session's connecting: the era negotiated, once at a time."""

    async def connect(self) -> None:
        """Negotiate the era, once at a time (a no-op when connected)."""
        async with self._connecting:
            if self.connected:
                return
            legacy_hint = self.protocol_hint is not None and (
                self.protocol_hint not in MODERN_PROTOCOL_VERSIONS
            )
            if legacy_hint:
                await self._initialize()
            else:
                await self._negotiate()

    async def _negotiate(self) -> None:
        """``server/discover`` as the SDK's ``mode="auto"`` does; else the handshake."""
        version = LATEST_MODERN_VERSION
        for attempt in range(2):
            raw: dict[str, Any] | None = None
            try:
                # As the SDK: a server that never answers an unknown method is a legacy one.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.discover_seconds):
                        raw = await self._exchange("server/discover", {}, modern=version)
            except McpFailure as failure:
                if failure.fault in ("connect", "timeout", "limit") or failure.__cause__:
                    raise  # no answer at all (or too much of one): not a legacy server's sign
                if failure.status in (401, 403):
                    raise  # the auth layer refused: no sign of the era either
                if failure.code == UNSUPPORTED_PROTOCOL_VERSION:
                    supported = messages.supported(failure.data)
                    mutual = [v for v in MODERN_PROTOCOL_VERSIONS if v in (supported or ())]
                    if mutual and attempt == 0:
                        version = mutual[-1]
                        continue
                    legacy = set(supported or ()) & {*HANDSHAKE_PROTOCOL_VERSIONS}
                    if supported is not None and not legacy:
                        raise  # a modern-only server that shares no version with us
                await self._initialize()  # any other rejection: a legacy server
                return
            if raw is None:  # no answer in time
                await self._initialize()
                return
            try:
                result = types.DiscoverResult.model_validate(messages.clamped(raw))
            except ValidationError:
                await self._initialize()
                return
            mutual = [v for v in MODERN_PROTOCOL_VERSIONS if v in result.supported_versions]
            if not mutual:  # a discover-answering server that advertises only legacy versions
                await self._initialize()
                return
            self.session_id = None
            self.protocol_version = mutual[-1]
            self.capabilities = result.capabilities
            self.server_info = messages.implementation(
                (result.meta or {}).get(SERVER_INFO_META_KEY)
            )
            return

    async def _initialize(self) -> None:
        self.session_id = None
        params = {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": self.client_capabilities,
            "clientInfo": self._client_info,
        }
        raw = await self._exchange("initialize", params)
        try:
            result = types.InitializeResult.model_validate(raw)
        except ValidationError as error:
            raise McpFailure(
                "mcp", f"{self.name} answered initialize with a result that is not MCP"
            ) from error
        if result.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            raise McpFailure(
                "mcp",
                f"the server chose protocol version {result.protocol_version}, "
                "which this client does not speak",
            )
        self.protocol_version = result.protocol_version
        self.capabilities = result.capabilities
        self.server_info = result.server_info
        await self._notify("notifications/initialized")
