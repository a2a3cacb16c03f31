"""An MCP server on the official SDK with prompts, resources, a template and an MCP App.

Run as ``python tests/support/catalog_server.py PORT LABEL`` (Streamable HTTP on
``127.0.0.1:PORT/mcp``, both eras). Two of them with different labels offer the same prompt
names and the same resource URIs, each answering with its label, so a test can tell which
server a request reached:

- prompts ``review`` (argument ``topic``, completed from ``alpha``, ``beta``) and
  ``secret_plan``;
- resources ``file:///README.md``, ``ui://chart/app.html`` (an MCP Apps resource of the SDK's
  ``Apps`` extension, with its ``_meta.ui``; the tool ``show_chart`` names it) and
  ``secret://key``; the template ``notes://{name}`` (``name`` completed from ``todo``,
  ``ideas``);
- the tool ``grow_prompt``, which adds the prompt ``added`` and announces it on
  ``subscriptions/listen`` streams;
- the tool ``touch(uri)``, which announces that ``uri`` was updated: to ``subscriptions/listen``
  streams (2026-07-28) and to the legacy sessions that subscribed (``resources/subscribe``).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import mcp_types as types
from mcp.server.apps import Apps
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer

PORT, LABEL = int(sys.argv[1]), sys.argv[2]
apps = Apps()
CHART_HTML = f"<!doctype html><title>chart {LABEL}</title>"


@apps.tool(resource_uri="ui://chart/app.html", description="Shows a chart")
def show_chart() -> str:
    return f"chart of {LABEL}"


apps.add_html_resource("ui://chart/app.html", CHART_HTML, prefers_border=True)
server = MCPServer(f"catalog-{LABEL}", extensions=[apps])
subscribed: dict[str, list[Any]] = {}


@server.prompt()
def review(topic: str) -> str:
    """Review something."""
    return f"{LABEL} reviews {topic}"


@server.prompt()
def secret_plan() -> str:
    """Not for agents."""
    return f"{LABEL} secret"


@server.resource("file:///README.md", mime_type="text/markdown")
def readme() -> str:
    return f"# README of {LABEL}"


@server.resource("secret://key")
def secret_key() -> str:
    return f"key of {LABEL}"


@server.resource("notes://{name}")
def note(name: str) -> str:
    return f"{LABEL} note {name}"


@server.completion()
async def complete(ref: Any, argument: Any, context: Any) -> types.Completion | None:
    if argument.name == "topic":
        values = ["alpha", "beta"]
    elif argument.name == "name":
        values = ["todo", "ideas"]
    else:
        return None
    return types.Completion(values=[f"{v}-{LABEL}" for v in values if v.startswith(argument.value)])


@server.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Announces that ``uri`` changed."""
    await ctx.notify_resource_updated(uri)
    for session in subscribed.get(uri, []):
        with contextlib.suppress(Exception):  # a session that is gone
            await session.send_resource_updated(uri)
    return f"touched {uri}"


@server.tool()
async def grow_prompt(ctx: Context) -> str:
    """Adds the prompt ``added`` and announces the change."""

    def added() -> str:
        return f"{LABEL} added"

    server.prompt(name="added")(added)
    await ctx.notify_prompts_changed()
    return "grown"


async def on_subscribe(
    ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
) -> types.EmptyResult:
    subscribed.setdefault(str(params.uri), []).append(ctx.session)
    return types.EmptyResult()


async def on_unsubscribe(
    ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
) -> types.EmptyResult:
    sessions = subscribed.get(str(params.uri), [])
    if ctx.session in sessions:
        sessions.remove(ctx.session)
    return types.EmptyResult()


lowlevel = server._lowlevel_server  # the SDK's high-level server has no subscribe handlers
lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, on_subscribe)
lowlevel.add_request_handler(
    "resources/unsubscribe", types.UnsubscribeRequestParams, on_unsubscribe
)
server.run("streamable-http", host="127.0.0.1", port=PORT)
