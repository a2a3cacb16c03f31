"""Runs the adapter: uvicorn around the ASGI front, SIGTERM handled, exit code decided.

Owns process-level behaviour: logging setup, the choice of uvicorn's fastest
available event loop and HTTP parser, and graceful shutdown. On SIGTERM or
SIGINT the streams are closed first (so that long-lived GET streams do not
hold the shutdown), uvicorn stops accepting and finishes in-flight requests,
then the child's whole process group is terminated.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import signal
from collections.abc import Generator

import uvicorn

from mcp_operator.adapter.config import AdapterConfig
from mcp_operator.adapter.core import AdapterCore
from mcp_operator.adapter.front import HttpFront

logger = logging.getLogger("mcp_operator.adapter")


class _Server(uvicorn.Server):
    """uvicorn without its own signal handlers: the adapter installs its own on the loop."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def _fastest(module: str, fallback: str) -> str:
    return module if importlib.util.find_spec(module) is not None else fallback


async def serve(config: AdapterConfig) -> int:
    """Serve until SIGTERM/SIGINT or a crash loop; returns the process exit code."""
    server: _Server | None = None

    def stop() -> None:
        core.close_streams()
        if server is not None:
            server.should_exit = True

    core = AdapterCore(config, on_fatal=stop)
    front = HttpFront(core)
    uv_config = uvicorn.Config(
        front,
        host=config.host,
        port=config.port,
        lifespan="on",
        http=_fastest("httptools", "h11"),
        loop="none",
        log_level=config.log_level.lower(),
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=int(config.shutdown_grace_seconds) or 1,
        timeout_keep_alive=30,
    )
    server = _Server(uv_config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    logger.info(
        "Serving %s on http://%s:%d%s",
        " ".join(config.command),
        config.host,
        config.port,
        config.path,
    )
    try:
        await server.serve()
    finally:
        await core.stop()
    return 1 if core.failed else 0


def run(config: AdapterConfig) -> int:
    """Configure logging, pick the event loop, serve."""
    logging.basicConfig(
        level=config.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if importlib.util.find_spec("uvloop") is not None:
        import uvloop  # type: ignore[import-not-found,unused-ignore]

        return int(uvloop.run(serve(config)))
    return asyncio.run(serve(config))
