"""``Mcp-Param-*`` headers through both bridges.

A 2026-07-28 server whose tool annotates an argument with ``x-mcp-header`` refuses a call
whose ``Mcp-Param-*`` header is missing or disagrees with the argument (the spec's rule; our
adapter enforces it as the SDK's server does). The bridge sends such a server the headers of
each call, as the SDK's client does, computed from the arguments it sends; and, as a server
itself, checks a 2026-07-28 agent's headers against the tool it lists. The upstream here is
``tests/support/conformance_server.py`` (its ``test_custom_headers`` tool) behind our
adapter, which the bridge reaches at 2026-07-28.
"""

from __future__ import annotations

import mcp_types as types
import pytest
from mcp import Client

from tests.protocol.test_adapter import Adapter
from tests.protocol.test_adapter_modern import conformance, post
from tests.support import needs
from tests.support.bridge_run import bridge_of, server_entry

pytestmark = [pytest.mark.timeout(120), needs.mark(needs.node_missing())]

__all__ = ["conformance"]


@pytest.mark.parametrize("region", ["eu-west", "zürich", " padded"])
async def test_a_call_to_an_annotated_tool_carries_its_param_header(
    program: str, conformance: Adapter, region: str
) -> None:
    """Plain text, and values a header cannot carry as they are (base64 sentinel)."""
    servers = [server_entry("conformance", conformance.url, "c")]
    async with (
        bridge_of(servers) as bridge,
        Client(bridge.url, mode="auto") as agent,
    ):
        result = await agent.call_tool("c_test_custom_headers", {"region": region})
        listed = await agent.list_tools()
    assert not result.is_error, result
    (content,) = result.content
    assert isinstance(content, types.TextContent) and content.text == f"Region: {region}"
    (tool,) = [t for t in listed.tools if t.name == "c_test_custom_headers"]
    assert tool.input_schema["properties"]["region"]["x-mcp-header"] == "Region"


async def test_an_agents_param_header_that_disagrees_is_refused_before_the_server(
    program: str, conformance: Adapter
) -> None:
    """The bridge answers a 2026-07-28 agent as the SDK's server would: a missing, different
    or malformed ``Mcp-Param-Region`` is HTTP 400 with -32020 and nothing is sent upstream;
    an agreeing one (plain or base64) goes through."""
    call = {"name": "c_test_custom_headers", "arguments": {"region": "eu-west"}}
    async with bridge_of([server_entry("conformance", conformance.url, "c")]) as bridge:
        agreed = [
            post(bridge.url, "tools/call", call, **{"mcp-param-region": value})
            for value in ("eu-west", "=?base64?ZXUtd2VzdA==?=")
        ]
        wrong = ({}, {"mcp-param-region": "us-east"}, {"mcp-param-region": "=?base64?ZXU!?="})
        refused = [post(bridge.url, "tools/call", call, **headers) for headers in wrong]
        audited = [line["outcome"] for line in bridge.audit_lines()]
    for answer in agreed:
        assert answer.status_code == 200, answer.text
        assert "Region: eu-west" in answer.text
    for answer in refused:
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["code"] == -32020
    # The refused three are audited as requests the bridge refused, never sent.
    assert audited == ["ok", "ok", *["invalid_request"] * 3]
