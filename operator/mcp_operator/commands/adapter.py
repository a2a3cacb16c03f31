"""``mcp-operator adapter``: serve a stdio MCP server over Streamable HTTP.

Usage: ``mcp-operator adapter --port 8080 [--host ::] [--path /mcp]
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

    if args.make_fifos:
        from mcp_operator.adapter.child import make_fifos

        if not args.stdio_fifo_dir:
            print("mcp-operator adapter: --make-fifos needs --stdio-fifo-dir", file=sys.stderr)
            return 2
        make_fifos(args.stdio_fifo_dir)
        return 0

    try:
        config = from_args(args)
    except ValueError as error:
        print(f"mcp-operator adapter: {error}", file=sys.stderr)
        return 2
    from mcp_operator.adapter.server import run as serve

    return serve(config)
