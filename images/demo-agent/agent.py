"""The demo agent: a small real MCP client that an AgentRun runs next to its bridge.

It is what ``make demo`` shows the operator doing its main job for: an agent that reaches its
tools only through the ``mcp-bridge`` sidecar, at ``$MCP_BRIDGE_URL`` (set by the operator), with
the official Python SDK client (``mcp``). It

1. lists its tools (the bridge's catalog: ``<prefix>_<tool>``);
2. calls an ``echo`` tool and a ``get-sum`` tool (server-everything's), which the bridge lets
   through;
3. calls ``echo`` again with an e-mail address in its argument, which a bridge whose policy is
   PII mode ``block`` for arguments must refuse with a structured tool error
   (``isError: true``, ``structuredContent.code: pii_blocked``) and never send on;

prints what it got for each, and exits 0 only when the first two succeeded with the answers
server-everything gives and the third was refused as the bridge refuses PII; 1 otherwise, and
2 when it is not configured (no ``MCP_BRIDGE_URL``, or no such tools in the catalog).

The tools are found by their original names (the part after the server's prefix), so the
agent works whatever prefixes the run's MCPServers have. It writes nothing to disk (read-only
root filesystem) and needs nothing but the ``mcp`` package.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mcp import Client
from mcp_types import CallToolResult, Implementation, TextContent, Tool

BRIDGE_URL_ENV = "MCP_BRIDGE_URL"
ECHO_TOOL = "echo"
SUM_TOOL = "get-sum"
GREETING = "hello from the demo agent"
EMAIL = "jane.doe@example.com"
PII_REFUSAL = "pii_blocked"
CALL_TIMEOUT_SECONDS = 30.0
"""Each call's read timeout: a bridge that never answers fails the run, never hangs it."""

EXIT_OK = 0
EXIT_UNEXPECTED = 1
EXIT_MISCONFIGURED = 2


def say(text: str) -> None:
    print(f"agent: {text}", flush=True)


@dataclass(frozen=True)
class Planned:
    """One call the agent makes and what it must get back to count as expected."""

    tool: str
    arguments: dict[str, Any]
    refused_with: str | None
    """The ``structuredContent.code`` of the refusal it expects, or ``None`` for a success."""
    answer: str | None = None
    """For a success: text the answer must contain."""


def find_tool(tools: Sequence[Tool], original: str) -> str | None:
    """The exposed name ``<prefix>_<original>`` of the first such tool, sorted by name."""
    for tool in sorted(tools, key=lambda t: t.name):
        if tool.name.endswith(f"_{original}"):
            return tool.name
    return None


def text_of(result: CallToolResult) -> str:
    return " ".join(part.text for part in result.content if isinstance(part, TextContent))


def judge(planned: Planned, result: CallToolResult) -> tuple[bool, str]:
    """Whether ``result`` is what the plan expects, and a line that says what came back."""
    text = text_of(result)
    if result.is_error:
        code = (result.structured_content or {}).get("code")
        line = f"refused ({code}): {text}"
        return planned.refused_with is not None and code == planned.refused_with, line
    line = f"ok: {text}"
    if planned.refused_with is not None:
        return False, f"{line} (expected a refusal with {planned.refused_with})"
    return planned.answer is None or planned.answer in text, line


async def list_all_tools(client: Client) -> list[Tool]:
    tools: list[Tool] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            return tools


async def run(url: str) -> int:
    client_info = Implementation(name="mcp-operator-demo-agent", version="1")
    async with Client(url, client_info=client_info, read_timeout_seconds=CALL_TIMEOUT_SECONDS) as (
        client
    ):
        server = client.server_info
        name = f"{server.name} {server.version}" if server is not None else "unknown server"
        say(f"connected to {url} ({name}, protocol {client.protocol_version})")
        tools = await list_all_tools(client)
        say(f"{len(tools)} tools: {', '.join(sorted(t.name for t in tools))}")
        echo, add = find_tool(tools, ECHO_TOOL), find_tool(tools, SUM_TOOL)
        if echo is None or add is None:
            wanted = [f"*_{n}" for n, found in ((ECHO_TOOL, echo), (SUM_TOOL, add)) if not found]
            say(f"no tool {' or '.join(wanted)} in the catalog: check the run's toolsAllow")
            return EXIT_MISCONFIGURED
        plan = [
            Planned(echo, {"message": GREETING}, None, answer=GREETING),
            Planned(add, {"a": 2, "b": 3}, None, answer="5"),
            Planned(echo, {"message": f"please write to {EMAIL}"}, PII_REFUSAL),
        ]
        failures = 0
        for number, planned in enumerate(plan, start=1):
            result = await client.call_tool(planned.tool, planned.arguments)
            expected, line = judge(planned, result)
            failures += not expected
            arguments = json.dumps(planned.arguments)
            mark = "" if expected else "  <-- NOT AS EXPECTED"
            say(f"call {number}: {planned.tool} {arguments} -> {line}{mark}")
    if failures:
        say(f"{failures} of {len(plan)} calls did not go as expected")
        return EXIT_UNEXPECTED
    say("done: two calls answered, the one with an e-mail address refused by the bridge")
    return EXIT_OK


def main() -> int:
    url = os.environ.get(BRIDGE_URL_ENV)
    if not url:
        say(f"{BRIDGE_URL_ENV} is not set: run me in an AgentRun with the bridge enabled")
        return EXIT_MISCONFIGURED
    try:
        return asyncio.run(run(url))
    except Exception as error:  # any failure to talk to the bridge ends the run
        say(f"failed talking to the bridge at {url}: {type(error).__name__}: {error}")
        return EXIT_UNEXPECTED


if __name__ == "__main__":
    sys.exit(main())
