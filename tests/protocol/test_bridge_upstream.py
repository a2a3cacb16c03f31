"""The bridge's upstream sessions (mcp/session.py, as bridge/upstreams.py builds them) against
real MCP servers of both eras, and hostile ones."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from mcp_operator.bridge.egress import BRIDGE_EGRESS
from mcp_operator.bridge.upstreams import list_tools, upstream_session
from mcp_operator.mcp.failures import McpFailure as UpstreamError
from mcp_operator.mcp.session import McpSession, Pool, session_pool
from tests.support import peers


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


@pytest.fixture
async def lean() -> AsyncIterator[Pool]:
    """The bridge's keep-alive connections."""
    pool = session_pool(BRIDGE_EGRESS)
    yield pool
    await pool.aclose()


class Upstream:
    """One upstream as the bridge's pool makes it: a session, listed and called."""

    def __init__(
        self, name: str, url: str, *, http1: Pool, headers: dict[str, str] | None = None
    ) -> None:
        self.session: McpSession = upstream_session(name, url, http1, headers)

    def __repr__(self) -> str:
        return repr(self.session)

    def __getattr__(self, name: str) -> object:
        return getattr(self.session, name)

    async def list_tools(self, seconds: float) -> list[dict[str, object]]:
        return await list_tools(self.session, seconds)

    async def call_tool(self, name: str, arguments: dict[str, object], seconds: float) -> Any:
        return await self.session.request(
            "tools/call", {"name": name, "arguments": arguments}, seconds
        )


async def test_a_legacy_server_is_reached_through_the_handshake_and_its_tools_are_called(
    everything_url: str, http: httpx.AsyncClient, lean: Pool
) -> None:
    upstream = Upstream("everything", everything_url, http1=lean)
    tools = await upstream.list_tools(seconds=10)
    assert not upstream.modern and upstream.session_id
    assert "echo" in {tool["name"] for tool in tools}
    echo = next(tool for tool in tools if tool["name"] == "echo")
    assert echo["inputSchema"]["type"] == "object"  # schemas come through whole
    result = await upstream.call_tool("echo", {"message": "hi there"}, seconds=10)
    assert result["content"][0]["text"] == "Echo: hi there"


async def test_a_lost_legacy_session_is_re_established_once_without_failing_the_call(
    everything_url: str, http: httpx.AsyncClient, lean: Pool
) -> None:
    upstream = Upstream("everything", everything_url, http1=lean)
    await upstream.call_tool("echo", {"message": "one"}, seconds=10)
    old = upstream.session_id
    assert old is not None
    gone = await http.delete(everything_url, headers={"mcp-session-id": old})
    assert gone.status_code < 300
    result = await upstream.call_tool("echo", {"message": "two"}, seconds=10)
    assert result["content"][0]["text"] == "Echo: two"
    assert upstream.session_id not in (None, old)


async def test_a_server_that_speaks_2026_07_28_is_used_statelessly(
    time_url: str, http: httpx.AsyncClient, lean: Pool
) -> None:
    upstream = Upstream("time", time_url, http1=lean)
    tools = await upstream.list_tools(seconds=10)
    assert upstream.protocol_version == "2026-07-28" and upstream.session_id is None
    assert {"get_current_time", "convert_time"} <= {tool["name"] for tool in tools}
    result = await upstream.call_tool("get_current_time", {"timezone": "UTC"}, seconds=10)
    assert "UTC" in result["content"][0]["text"]


async def test_a_server_that_hangs_times_out_as_a_transient_failure(
    http: httpx.AsyncClient, lean: Pool
) -> None:
    with peers.hostile_server("hang") as url:
        upstream = Upstream("hang", url, http1=lean)
        with pytest.raises(UpstreamError) as caught:
            await upstream.list_tools(seconds=0.5)
    assert caught.value.kind == "timeout" and caught.value.transient


@pytest.mark.parametrize(
    ("mode", "args", "kind"),
    [("garbage", (), "error"), ("status", ("--status", "503"), "unavailable")],
)
async def test_garbage_and_gateway_errors_become_clear_upstream_errors(
    http: httpx.AsyncClient,
    lean: Pool,
    mode: str,
    args: tuple[str, ...],
    kind: str,
) -> None:
    with peers.hostile_server(mode, *args) as url:
        upstream = Upstream(mode, url, http1=lean)
        with pytest.raises(UpstreamError) as caught:
            await upstream.list_tools(seconds=5)
    assert caught.value.kind == kind


async def test_an_unreachable_server_is_unavailable(http: httpx.AsyncClient, lean: Pool) -> None:
    upstream = Upstream("nobody", f"http://127.0.0.1:{peers.free_port()}/mcp", http1=lean)
    with pytest.raises(UpstreamError) as caught:
        await upstream.call_tool("echo", {}, seconds=5)
    assert caught.value.kind == "unavailable"
    assert "could not connect to nobody" in caught.value.message


async def test_header_values_reach_the_server_but_never_the_repr(
    http: httpx.AsyncClient, lean: Pool
) -> None:
    with peers.hostile_server(
        "ok", "--require-header", "Authorization: Bearer s3cret-token"
    ) as url:
        refused = Upstream("ok", url, http1=lean)
        with pytest.raises(UpstreamError):
            await refused.list_tools(seconds=5)
        upstream = Upstream("ok", url, headers={"Authorization": "Bearer s3cret-token"}, http1=lean)
        assert len(await upstream.list_tools(seconds=5)) == 3
    assert "s3cret" not in repr(upstream)
