"""The operator's own HTTP endpoints: ``/healthz`` and the Prometheus metrics.

Served from start to exit by every replica, leader or follower (kopf's own
liveness endpoint exists only while kopf runs, that is on the leader alone).
Owns parsing the endpoint URLs and serving them with aiohttp (kopf's own HTTP
stack, so nothing new is installed); what the metrics say is
:mod:`mcp_operator.controller.metrics`' business. ``/healthz`` answers while
the event loop is responsive, which is what a liveness probe should know: a
follower is healthy while it waits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from aiohttp import web

from mcp_operator.controller.metrics import OperatorMetrics
from mcp_operator.controller.settings import EndpointSettings
from mcp_operator.serve.metrics import CONTENT_TYPE

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Listen:
    """Where one endpoint is served."""

    host: str
    port: int
    path: str


def parse_url(url: str) -> Listen:
    """``http://HOST:PORT/PATH`` as a :class:`Listen`; ``ValueError`` says what is wrong."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or parts.port is None:
        raise ValueError(f"{url!r} is not http://HOST:PORT/PATH")
    return Listen(parts.hostname, parts.port, parts.path or "/")


class Endpoints:
    """The running servers; :meth:`close` stops them."""

    def __init__(self, runners: list[web.AppRunner]) -> None:
        self._runners = runners

    async def close(self) -> None:
        for runner in self._runners:
            await runner.cleanup()


async def serve(
    settings: EndpointSettings,
    metrics: OperatorMetrics,
    *,
    healthy: Callable[[], bool] = lambda: True,
) -> Endpoints:
    """Start serving the endpoints of ``settings`` (one server per distinct host and port)."""
    routes: dict[tuple[str, int], list[web.RouteDef]] = {}

    async def healthz(_: web.Request) -> web.Response:
        if healthy():
            return web.Response(text="ok\n")
        return web.Response(status=503, text="unhealthy\n")

    async def scrape(_: web.Request) -> web.Response:
        response = web.Response(body=metrics.exposition())
        response.headers["Content-Type"] = CONTENT_TYPE
        return response

    for url, handler in ((settings.liveness, healthz), (settings.metrics, scrape)):
        if url is None:
            continue
        listen = parse_url(url)
        routes.setdefault((listen.host, listen.port), []).append(web.get(listen.path, handler))
    runners = []
    try:
        for (host, port), served in routes.items():
            app = web.Application()
            app.add_routes(served)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            runners.append(runner)
            await web.TCPSite(runner, host, port).start()
            paths = ", ".join(route.path for route in served)
            logger.info("Serving %s on %s:%d", paths, host, port)
    except BaseException:
        await Endpoints(runners).close()
        raise
    return Endpoints(runners)
