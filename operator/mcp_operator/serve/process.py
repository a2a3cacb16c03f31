"""Serving an ASGI app in our processes: uvicorn on its fastest parts, without its signals.

Owns what the adapter and the bridge do alike to put an ASGI app on a port: uvicorn
with the fastest HTTP parser installed (``httptools``, else ``h11``), no access log
and no server header, a bounded graceful shutdown, and no signal handlers of its own
(each program installs its own on the loop, to close its streams first), and the
process start: logging, and the fastest event loop installed (``uvloop``, else
asyncio's). Leaves what is served and when to stop to the program.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
from collections.abc import Coroutine, Generator
from typing import Any

import uvicorn


class QuietServer(uvicorn.Server):
    """uvicorn without its own signal handlers: the program installs its own on the loop."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def fastest(module: str, fallback: str) -> str:
    """``module`` when it is installed, else ``fallback``."""
    return module if importlib.util.find_spec(module) is not None else fallback


def server(app: Any, *, host: str, port: int, log_level: str, grace_seconds: float) -> QuietServer:
    """A uvicorn server for ``app`` on ``host:port`` (it starts serving when awaited)."""
    return QuietServer(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            lifespan="on",
            http=fastest("httptools", "h11"),
            loop="none",
            log_level=log_level.lower(),
            access_log=False,
            server_header=False,
            timeout_graceful_shutdown=int(grace_seconds) or 1,
            timeout_keep_alive=30,
        )
    )


def run(main: Coroutine[Any, Any, int], log_level: str) -> int:
    """Configure logging, then run ``main`` on the fastest event loop installed."""
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if importlib.util.find_spec("uvloop") is not None:
        import uvloop  # type: ignore[import-not-found,unused-ignore]

        return int(uvloop.run(main))
    return asyncio.run(main)
