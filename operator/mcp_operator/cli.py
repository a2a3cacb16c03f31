"""The ``mcp-operator`` command line: one entry point, one subcommand per program.

Each subcommand lives in ``mcp_operator.commands.<name>`` and exposes
``add_arguments(parser)`` and ``run(args) -> int``; this module only wires them.
Command modules import their heavy dependencies inside ``run`` so that
``mcp-operator adapter`` does not pay for kopf and kubernetes at start-up.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from mcp_operator import __version__

SUBCOMMANDS: dict[str, str] = {
    "run": "Run the operator (reconciles MCPServers and AgentRuns)",
    "probe": "Probe an MCP server and print what the operator would write into status",
    "adapter": "Serve a stdio MCP server over Streamable HTTP",
    "bridge": "Serve an AgentRun's MCP servers to its agent as one governed endpoint",
    "dev": "Local development helpers (a real control plane on loopback)",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-operator",
        description="Run and govern Model Context Protocol servers on Kubernetes.",
    )
    parser.add_argument("--version", action="version", version=f"mcp-operator {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, help_text in SUBCOMMANDS.items():
        module = importlib.import_module(f"mcp_operator.commands.{name}")
        command = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(command)
        command.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(argv) if argv is not None else sys.argv[1:])
    return int(args._module.run(args))
