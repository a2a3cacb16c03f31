"""Runs the adapter: uvicorn around the ASGI front, SIGTERM handled, exit code decided.

Owns process-level behaviour: logging setup, the choice of uvicorn's fastest
available event loop and HTTP parser, and graceful shutdown. On SIGTERM or
SIGINT the streams are closed first (so that long-lived GET streams do not
hold the shutdown), uvicorn stops accepting and finishes in-flight requests,
then the child's whole process group is terminated.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from typing import Any

from mcp_operator import tracing
from mcp_operator.adapter.auth import build_gate
from mcp_operator.adapter.config import AdapterConfig
from mcp_operator.adapter.core import AdapterCore
from mcp_operator.adapter.front import HttpFront
from mcp_operator.adapter.front_pool import PoolFront
from mcp_operator.adapter.metrics import AdapterMetrics
from mcp_operator.adapter.upstream import UpstreamFront
from mcp_operator.serve import process
from mcp_operator.serve.process import QuietServer

logger = logging.getLogger("mcp_operator.adapter")


def _listening(app: Any, config: AdapterConfig, stop: Callable[[], None], what: str) -> QuietServer:
    """The uvicorn server of ``app`` with the configuration's limits, SIGTERM/SIGINT calling
    ``stop``; logs what it serves."""
    server = process.server(
        app,
        host=config.host,
        port=config.port,
        log_level=config.log_level,
        grace_seconds=config.shutdown_grace_seconds,
        header_timeout_seconds=config.header_timeout_seconds,
        body_timeout_seconds=config.body_timeout_seconds,
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    host = f"[{config.host}]" if ":" in config.host else config.host
    logger.info("Serving %s on http://%s:%d%s", what, host, config.port, config.path)
    return server


async def serve_front(config: AdapterConfig) -> int:
    """Front mode (``--upstream-url``): serve until SIGTERM/SIGINT; the exit code."""
    metrics = AdapterMetrics(sessions=lambda: 0, inflight=lambda: 0, restarts=lambda: 0)
    try:
        front = UpstreamFront(config, build_gate(config, metrics), metrics)
    except ValueError as error:
        logger.error("Refused to start: %s", error)
        return 2

    def stop() -> None:
        server.should_exit = True

    server = _listening(front, config, stop, str(config.upstream_url))
    await server.serve()
    return 0


async def serve(config: AdapterConfig) -> int:
    """Serve until SIGTERM/SIGINT or a crash loop; returns the process exit code."""
    if config.upstream_url is not None:
        return await serve_front(config)
    server: QuietServer | None = None

    def stop() -> None:
        core.close_streams()
        if server is not None:
            server.should_exit = True

    core: AdapterCore | PoolFront
    front: HttpFront | PoolFront
    try:
        if config.child_per_session:
            core = front = PoolFront(config)
        else:
            core = AdapterCore(config, on_fatal=stop)
            front = HttpFront(core)
    except ValueError as error:  # the access configuration: unreadable, not JSON, not ours
        logger.error("Refused to start: %s", error)
        return 2
    server = _listening(front, config, stop, " ".join(config.command))
    try:
        await server.serve()
    finally:
        await core.stop()
    return 1 if core.failed else 0


def run(config: AdapterConfig) -> int:
    """Configure logging (and tracing, when the OTEL_* variables ask), pick the event loop,
    serve."""
    tracing.configure("mcp-operator-adapter")
    return process.run(serve(config), config.log_level)
