"""Serving an ASGI app in our processes: uvicorn on its fastest parts, without its signals.

Owns what the adapter and the bridge do alike to put an ASGI app on a port: uvicorn
with the fastest HTTP parser installed (``httptools``, else ``h11``) and read
deadlines on it (``deadlines``: a slow client is cut off), no access log and no
server header, a bounded graceful shutdown, and no signal handlers of its own
(each program installs its own on the loop, to close its streams first); the
listening socket (``::`` means both IPv6 and IPv4, for single-stack clusters of
either family); and the process start: logging, and the fastest event loop
installed (``uvloop``, else asyncio's), with the imported heap frozen out of the
collector's walks, and every thread's stack printed on a crash or on SIGUSR1.
Leaves what is served and when to stop to the program.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import faulthandler
import gc
import importlib.util
import logging
import signal
import socket
from collections.abc import Coroutine, Generator
from typing import Any

import uvicorn

logger = logging.getLogger(__name__)

ALL_ADDRESSES = "::"
"""The listen address that means every address of both families (dual-stack)."""


class QuietServer(uvicorn.Server):
    """uvicorn without its own signal handlers: the program installs its own on the loop."""

    listeners: list[socket.socket] | None = None
    """Sockets bound here rather than by uvicorn (the dual-stack one); None: uvicorn binds."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        await super().serve(sockets=sockets if sockets is not None else self.listeners)


def dual_stack_socket(port: int) -> socket.socket:
    """A TCP socket on ``[::]:port`` that also takes IPv4 (``IPV6_V6ONLY`` off).

    On a kernel without IPv6 the socket is ``0.0.0.0:port`` instead: the same
    setting then serves IPv4-only, IPv6-only and dual-stack clusters alike.
    """
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    except OSError as error:
        if error.errno not in (errno.EAFNOSUPPORT, errno.EPROTONOSUPPORT):
            raise
        logger.info("Listening on IPv4 only: this kernel has no IPv6 (%s)", error)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("0.0.0.0", port))
        return sock
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    sock.bind(("::", port))
    return sock


def http_protocol(header_seconds: float, body_seconds: float) -> Any:
    """httptools with read deadlines; h11 (without them, said in the log) if it is missing."""
    if importlib.util.find_spec("httptools") is None:
        logger.warning("Serving without header and body read deadlines: httptools is missing")
        return "h11"
    from mcp_operator.serve.deadlines import with_deadlines

    return with_deadlines(header_seconds, body_seconds)


def server(
    app: Any,
    *,
    host: str,
    port: int,
    log_level: str,
    grace_seconds: float,
    header_timeout_seconds: float = 10.0,
    body_timeout_seconds: float = 30.0,
) -> QuietServer:
    """A uvicorn server for ``app`` on ``host:port`` (it starts serving when awaited).

    ``host`` ``::`` listens on IPv6 and IPv4 both (``dual_stack_socket``); a client
    slower than the header or body timeout has its connection closed (``deadlines``).
    """
    quiet = QuietServer(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            lifespan="on",
            http=http_protocol(header_timeout_seconds, body_timeout_seconds),
            loop="none",
            log_level=log_level.lower(),
            access_log=False,
            server_header=False,
            # The peer address is the caller's (sessions are counted by it): no
            # X-Forwarded-For from a process on the loopback stands in for it, and no
            # middleware reads those headers on every request.
            proxy_headers=False,
            timeout_graceful_shutdown=int(grace_seconds) or 1,
            timeout_keep_alive=30,
        )
    )
    if host == ALL_ADDRESSES:
        quiet.listeners = [dual_stack_socket(port)]
    return quiet


def run(main: Coroutine[Any, Any, int], log_level: str) -> int:
    """Configure logging, freeze the startup heap, then run ``main`` on the fastest
    event loop installed."""
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    freeze_startup_heap()
    return run_on_fastest_loop(main)


def freeze_startup_heap() -> None:
    """Move what exists once the modules are imported out of the collector's reach.

    A process of ours imports some hundred thousand objects (modules, classes,
    functions, pydantic's schemas) that live as long as it does. Each full collection
    walks every one of them again, and a busy server's allocations trigger one every
    few thousand calls: measured in the bridge bench, that walk is 25 to 50 µs of CPU
    per call (10-15 %). ``gc.freeze`` after one collection puts the survivors in a
    generation the collector never walks; objects made later are collected as before,
    so a cycle made while serving is still freed.
    """
    gc.collect()
    gc.freeze()


def run_on_fastest_loop(main: Coroutine[Any, Any, int]) -> int:
    """Run ``main`` on uvloop when it is installed (a fraction of asyncio's cost per
    callback and per socket operation), else on asyncio's own loop.

    Before it starts, a crash in native code (SIGSEGV, SIGABRT, …) is made to print every
    thread's Python stack to stderr instead of ending the process without a word, and
    SIGUSR1 prints them without stopping it: ``kill -USR1`` on a process whose loop no
    longer answers shows where it is blocked."""
    faulthandler.enable(all_threads=True)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    if importlib.util.find_spec("uvloop") is not None:
        import uvloop  # type: ignore[import-not-found,unused-ignore]

        return int(uvloop.run(main))
    return asyncio.run(main)
