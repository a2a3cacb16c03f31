"""Reload without restart: the configuration file is read again when its content changes.

A ConfigMap mounted as a volume is updated by the kubelet through a symlink swap (a new
timestamped directory, then ``..data`` pointed at it), so the file's inode and even its
directory change: the watcher polls the *path* every few seconds and compares the content,
not an inode or an mtime. A new file that does not load is logged and the running
configuration is kept; a valid one is handed to ``apply``. What applying means is the
bridge core's job.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from mcp_operator.api.bridge import BridgeConfig, BridgeConfigError, parse_bridge_config

logger = logging.getLogger(__name__)

POLL_SECONDS = 2.0


class ConfigWatcher:
    """Polls one configuration file and applies each new valid content once."""

    def __init__(
        self,
        path: str | Path,
        apply: Callable[[BridgeConfig], Awaitable[None]],
        *,
        seen: bytes | None = None,
        poll_seconds: float = POLL_SECONDS,
        on_result: Callable[[bool], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.apply = apply
        self.seen = seen
        """The content last read (applied or refused): the same content is not read twice."""
        self.poll_seconds = poll_seconds
        self.on_result = on_result

    async def check(self) -> bool | None:
        """Read the file once: ``True`` applied, ``False`` refused, ``None`` unchanged."""
        try:
            content = self.path.read_bytes()
        except OSError as error:
            if self.seen != b"":
                logger.error(
                    "Could not read %s, kept the running configuration: %s",
                    self.path,
                    error.strerror,
                )
                self.seen = b""
            return None
        if content == self.seen:
            return None
        self.seen = content
        try:
            config = parse_bridge_config(content.decode("utf-8", "replace"), str(self.path))
        except BridgeConfigError as error:
            logger.error("Refused the new configuration, kept the running one: %s", error)
            if self.on_result is not None:
                self.on_result(False)
            return False
        await self.apply(config)
        logger.info(
            "Applied the new configuration of %s/%s with %d servers",
            config.run.namespace,
            config.run.name,
            len(config.servers),
        )
        if self.on_result is not None:
            self.on_result(True)
        return True

    async def run(self) -> None:
        """Check every ``poll_seconds`` until cancelled."""
        while True:
            await asyncio.sleep(self.poll_seconds)
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("Failed to apply the new configuration of %s", self.path)
