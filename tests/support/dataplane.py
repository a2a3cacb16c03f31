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
from typing import TYPE_CHECKING

from mcp_operator.dev.processes import CACHE_DIR
from tests.support import bridge_run, needs

if TYPE_CHECKING:
    import pytest

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


def use_bridge(patch: pytest.MonkeyPatch, which: str) -> None:
    """Make ``tests.support.bridge_run`` start the ``compiled`` bridge (this binary, which
    the test then needs) or the ``python`` one from now on, until ``patch`` is undone; both
    take the same flags."""
    if which == "compiled":
        needs.require(missing())
        patch.setattr(bridge_run, "PROGRAM", bridge_command())
    else:
        patch.setattr(bridge_run, "PROGRAM", list(bridge_run.PYTHON_PROGRAM))
