"""Runs the bridge: its settings, the two HTTP servers, reloads, SIGTERM, the exit code.

Owns the process: the typed settings the command line builds (:class:`BridgeSettings`),
logging, uvicorn serving the agent's MCP
endpoint (``listen`` of the configuration) and the health port (on every address of both
families, ``[::]:health_port``: the kubelet probes the Pod IP, IPv4 or IPv6) on one event
loop, the configuration watcher, and graceful shutdown: on SIGTERM or SIGINT the
agent's GET streams are closed, both servers stop accepting and finish the calls in flight
(within ``shutdown_grace_seconds``), then the timers stop and the upstream connections close.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import disable_created_metrics

from mcp_operator import tracing
from mcp_operator.api.bridge import BridgeConfigError, load_bridge_config
from mcp_operator.bridge.core import BridgeCore
from mcp_operator.bridge.front import BridgeFront
from mcp_operator.bridge.health import HealthApp
from mcp_operator.bridge.reload import ConfigWatcher
from mcp_operator.serve import process
from mcp_operator.serve.auth.access import AccessConfigError
from mcp_operator.serve.auth.scrapers import MetricsAccess
from mcp_operator.serve.process import QuietServer

logger = logging.getLogger("mcp_operator.bridge")


@dataclass(frozen=True)
class BridgeSettings:
    """How ``mcp-operator bridge`` was asked to run (the command line, typed)."""

    config_path: Path
    health_port: int = 7801
    health_host: str = process.ALL_ADDRESSES
    metrics_access: str | None = None
    """Who may read ``/metrics`` (``serve.auth.scrapers``); ``None``: every client."""
    log_level: str = "INFO"
    relist_seconds: float = 300.0
    reload_seconds: float = 2.0
    shutdown_grace_seconds: float = 25.0


def _server(app: object, host: str, port: int, settings: BridgeSettings) -> QuietServer:
    return process.server(
        app,
        host=host,
        port=port,
        log_level=settings.log_level,
        grace_seconds=settings.shutdown_grace_seconds,
    )


async def serve(settings: BridgeSettings) -> int:
    """Serve until SIGTERM/SIGINT; returns the process exit code."""
    try:
        seen = settings.config_path.read_bytes()
        config = load_bridge_config(settings.config_path)
    except (OSError, BridgeConfigError) as error:
        logger.error("Could not load the configuration: %s", error)
        return 2
    try:
        scrapers = MetricsAccess(settings.metrics_access)
    except AccessConfigError as error:
        logger.error("Could not load who may read /metrics: %s", error)
        return 2
    core = BridgeCore(config, relist_seconds=settings.relist_seconds)
    listen = config.listen
    front = _server(BridgeFront(core), listen.host, listen.port, settings)
    health = _server(
        HealthApp(core, scrapers), settings.health_host, settings.health_port, settings
    )
    watcher = ConfigWatcher(
        settings.config_path,
        core.apply,
        seen=seen,
        poll_seconds=settings.reload_seconds,
        on_result=lambda ok: core.metrics.config_reloads.labels(
            "applied" if ok else "invalid"
        ).inc(),
    )

    def stop() -> None:
        logger.info("Stopping: finishing %d calls in flight", core.inflight)
        core.sessions.close_streams()
        front.should_exit = True
        health.should_exit = True

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    logger.info(
        "Serving AgentRun %s/%s on http://%s:%d%s, health on %s:%d",
        config.run.namespace,
        config.run.name,
        listen.host,
        listen.port,
        listen.path,
        settings.health_host,
        settings.health_port,
    )
    servers = [loop.create_task(front.serve()), loop.create_task(health.serve())]
    watching: asyncio.Task[None] | None = None
    try:
        await core.start()
        watching = loop.create_task(watcher.run())
        await asyncio.gather(*servers)
    finally:
        if watching is not None:
            watching.cancel()
        stop()
        await asyncio.gather(*servers, return_exceptions=True)
        await core.stop()
    failed = not front.started or not health.started
    return 1 if failed else 0


def run(settings: BridgeSettings) -> int:
    """Configure logging, pick the event loop, serve."""
    # One line per upstream request would drown the audit trail (and cost on every call).
    level = logging.getLevelName(settings.log_level.upper())
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, level))
    disable_created_metrics()  # type: ignore[no-untyped-call]
    tracing.configure("mcp-operator-bridge")
    return process.run(serve(settings), settings.log_level)
