"""``mcp-operator bridge``: the AgentRun's MCP sidecar, one governed endpoint for the agent.

Usage: ``mcp-operator bridge --config /etc/mcp-bridge/config.yaml --health-port 7801
[--log-level INFO]``. The flags are documented in docs/bridge.md; the configuration file's
format is :mod:`mcp_operator.api.bridge`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        required=True,
        metavar="FILE",
        help="the BridgeConfig file (re-read when its content changes)",
    )
    parser.add_argument(
        "--health-port",
        type=int,
        default=7801,
        metavar="N",
        help="port of /healthz, /readyz and /metrics, on every address",
    )
    parser.add_argument(
        "--metrics-access",
        default=None,
        metavar="FILE",
        help="who may scrape /metrics: issuer keys and the scrapers' ServiceAccounts (the "
        "access configuration's format); a scrape needs a token of the audience "
        "metrics.mcp-operator.dev; unset: every client",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        type=str.upper,
        help="log level of the bridge's own log lines (audit lines are always written)",
    )
    parser.add_argument(
        "--relist-seconds",
        type=float,
        default=300.0,
        metavar="S",
        help="list every server's tools again this often while it is up",
    )
    parser.add_argument(
        "--reload-seconds",
        type=float,
        default=2.0,
        metavar="S",
        help="how often the configuration file is checked for a new content",
    )


def run(args: argparse.Namespace) -> int:
    from mcp_operator.bridge.server import BridgeSettings
    from mcp_operator.bridge.server import run as serve

    if not 0 < args.health_port < 65536:
        print("mcp-operator bridge: --health-port must be a TCP port", file=sys.stderr)
        return 2
    settings = BridgeSettings(
        config_path=Path(args.config),
        health_port=args.health_port,
        metrics_access=args.metrics_access,
        log_level=args.log_level,
        relist_seconds=max(1.0, args.relist_seconds),
        reload_seconds=max(0.1, args.reload_seconds),
    )
    return serve(settings)
