"""``mcp-operator adapter``: serve a stdio MCP server over Streamable HTTP.

Usage: ``mcp-operator adapter --port 8080 [--host 0.0.0.0] [--path /mcp]
[--allowed-host NAME ...] [--sse] -- npx -y @modelcontextprotocol/server-everything``.
The flags and their environment variables are documented in docs/adapter.md.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mcp_operator.adapter.config import add_arguments as add

    add(parser)


def run(args: argparse.Namespace) -> int:
    from mcp_operator.adapter.config import from_args

    try:
        config = from_args(args)
    except ValueError as error:
        print(f"mcp-operator adapter: {error}", file=sys.stderr)
        return 2
    from mcp_operator.adapter.server import run as serve

    return serve(config)
