"""Real MCP peers for the protocol tests, started once per session on loopback; and which
bridge a test starts (``compiled_bridge``, ``program``: ``tests.support.bridge_choice``)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # `tests.support` is imported by path from the repository root
    sys.path.insert(0, str(REPO))

from tests.support import needs, peers  # noqa: E402
from tests.support.bridge_choice import compiled_bridge, program  # noqa: E402, F401 (fixtures)


@pytest.fixture(scope="session")
def everything_url() -> Iterator[str]:
    """server-everything over its own Streamable HTTP transport."""
    needs.require(needs.node_missing())
    with peers.server_everything("streamableHttp") as url:
        yield url


@pytest.fixture(scope="session")
def everything_sse_url() -> Iterator[str]:
    """server-everything over the legacy HTTP+SSE transport."""
    needs.require(needs.node_missing())
    with peers.server_everything("sse") as url:
        yield url


@pytest.fixture(scope="session")
def time_url() -> Iterator[str]:
    """mcp-server-time over the SDK's Streamable HTTP transport (both eras)."""
    with peers.mcp_server_time() as url:
        yield url
