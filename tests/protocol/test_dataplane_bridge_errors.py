"""The JSON-RPC errors of prompts, resources and completion, on both bridges.

An unknown resource is refused naming its URI in the message and in ``data.uri`` (SEP-2164's
SHOULD, which the official conformance suite checks as ``sep-2164-resource-not-found``); the
upstream here is ``tests/support/conformance_server.py`` behind our adapter, unprefixed, and
the agent speaks 2026-07-28 over plain HTTP so that the test reads the error as sent.
"""

from __future__ import annotations

import pytest

from tests.protocol.test_adapter import Adapter
from tests.protocol.test_adapter_modern import conformance, post
from tests.support import needs
from tests.support.bridge_run import bridge_of, server_entry

pytestmark = [pytest.mark.timeout(120), needs.mark(needs.node_missing())]

__all__ = ["conformance"]

MISSING = "test://nonexistent-resource-for-conformance-testing"


async def test_an_unknown_resource_is_refused_with_its_uri_in_data(
    program: str, conformance: Adapter
) -> None:
    async with bridge_of([server_entry("conformance", conformance.url, "")]) as bridge:
        static = "test://static-text"
        known = post(bridge.url, "resources/read", {"uri": static}, **{"mcp-name": static})
        answer = post(bridge.url, "resources/read", {"uri": MISSING}, **{"mcp-name": MISSING})
    assert known.status_code == 200, known.text
    error = answer.json()["error"]
    assert error["code"] in (-32602, -32002), error
    assert MISSING in error["message"]
    assert error["data"]["uri"] == MISSING
