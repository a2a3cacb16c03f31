"""The compiled data plane (``operator/dataplane``) as the tests start it.

``make dataplane`` builds ``mcp-dataplane`` into the cache's target directory; the protocol
tests drive its subcommands as programs over real HTTP and stdio, with the same assertions
as the programs they replace. ``MCP_DATAPLANE_BIN`` points the tests at another build;
otherwise the binary is where ``make dataplane`` puts it: ``$CARGO_TARGET_DIR/release`` (the
Makefile exports the variable, so a build into another target directory is the one tested).
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp_operator.dev.processes import CACHE_DIR

BINARY = Path(
    os.environ.get("MCP_DATAPLANE_BIN")
    or Path(os.environ.get("CARGO_TARGET_DIR") or CACHE_DIR / "dataplane-target")
    / "release"
    / "mcp-dataplane"
)


def missing() -> str | None:
    """Why the compiled data plane cannot run here, or ``None`` when it can."""
    if not BINARY.is_file():
        return f"{BINARY} is missing: run `make dataplane`"
    return None


def adapter_command() -> list[str]:
    """The compiled adapter's command line up to its flags."""
    return [str(BINARY), "adapter"]


def bridge_command() -> list[str]:
    """The compiled bridge's command line up to its flags."""
    return [str(BINARY), "bridge"]
