"""Discovery: handshake, then every page of ``tools/list``, as one :class:`Discovery`.

:func:`discover` is the probe: it connects within one overall deadline,
``timeout_seconds``, and walks the tool list with a :class:`Paginator` (the cursor rules,
without I/O). Every failure comes out as
one :class:`~mcp_operator.mcp.errors.ProbeError`. Every server (either era, Streamable HTTP
or the legacy HTTP+SSE transport) is probed by the one client of
:mod:`~mcp_operator.mcp.probe_client`.

Bounds: at most ``MAX_PAGES`` pages and ``MAX_DISCOVERED_TOOLS`` tools; a
server past either bound fails the probe (``TooManyPages`` / ``TooManyTools``)
rather than yield a silently partial list; a cursor seen twice fails it
(``PaginationLoop``). What is kept of each tool is the caller's choice
(:class:`Keep`): whole, with its ``inputSchema`` (for a caller that validates
arguments), or cut as soon as a page arrives to what the caller will show (the
operator's probe keeps no more of each tool than status can hold, so that many
probes at once hold little).

Header values (credentials) never appear in messages, logs or reprs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import anyio
from mcp_types import METHOD_NOT_FOUND

from mcp_operator.mcp import bounds, challenge
from mcp_operator.mcp.definitions import DIGEST_META
from mcp_operator.mcp.errors import ProbeError, ProbeState, reraise_cancellation, scrub
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.naming import MAX_TOOL_NAME_CHARS, cut
from mcp_operator.mcp.pages import MAX_DISCOVERED_TOOLS, Keep
from mcp_operator.mcp.probe_bodies import probe_state
from mcp_operator.mcp.probe_client import probe_client
from mcp_operator.mcp.scrub import Scrubber
from mcp_operator.mcp.translation import translate
from mcp_operator.net.tls import tls_context

__all__ = ["MAX_DISCOVERED_TOOLS", "DiscoveredTool", "Discovery", "Keep", "Paginator", "discover"]
from mcp_operator.mcp.target import ProbeTarget, check_target

MAX_PAGES = bounds.MAX_PAGES
"""A ``tools/list`` walk longer than this fails with ``TooManyPages``."""


@dataclass(frozen=True)
class DiscoveredTool:
    """A tool as the server listed it: the fields the operator and the bridge use.

    The ``repr`` shows the name only (cut to 129 characters): the rest may run to megabytes.
    """

    name: str
    description: str | None = field(default=None, repr=False)
    annotations: dict[str, Any] | None = field(default=None, repr=False)
    """The annotations in full, camelCase, without absent hints (untrusted: hints only)."""
    title: str | None = field(default=None, repr=False)
    """The tool's display name (2025-06-18 and later); it takes precedence over
    ``annotations.title``."""
    input_schema: dict[str, Any] = field(default_factory=dict, repr=False)
    """The ``inputSchema`` JSON object as the server sent it (the bridge validates
    arguments against it)."""
    sha256: str | None = field(default=None, repr=False)
    """The digest of the whole definition as the server listed it
    (:func:`~mcp_operator.mcp.definitions.definition_digest`), when the caller's ``Keep``
    asked for digests."""


@dataclass(frozen=True)
class Discovery:
    """What a probe saw: who the server is, which era it speaks and its tools."""

    server_name: str | None
    server_version: str | None
    protocol_version: str
    tools: list[DiscoveredTool]
    list_changed: bool
    """The server advertises ``tools.listChanged`` (it will notify when its tools change)."""


class Paginator(bounds.Paginator):
    """The session's one pagination rule (:class:`~mcp_operator.mcp.bounds.Paginator`),
    its bounds failing the probe as a :class:`~mcp_operator.mcp.errors.ProbeError`."""

    def advance(self, next_cursor: str | None, page_tools: int) -> str | None:
        try:
            return super().advance(next_cursor, page_tools)
        except McpFailure as failure:
            raise ProbeError(failure.limit or "ProbeFailed", failure.message) from None


async def discover(target: ProbeTarget, keep: Keep | None = None) -> Discovery:
    """Handshake with the server at ``target`` and list all its tools, keeping ``keep`` of each.

    Raises:
        ProbeError: on any failure, within ``target.timeout_seconds`` (plus the
            time it takes to close connections).
    """
    check_target(target)
    state = probe_state(target)
    try:
        with anyio.fail_after(target.timeout_seconds):
            found = await _discover(target, state, keep or Keep())
    except Exception as error:  # boundary: every failure becomes one ProbeError
        reraise_cancellation()
        failure = await _with_authorization_servers(translate(error, state), error, target)
        raise scrub(failure, target.headers) from None
    return scrubbed(found, Scrubber(target.headers.values()))


async def _with_authorization_servers(
    failure: ProbeError, error: BaseException, target: ProbeTarget
) -> ProbeError:
    """An ``AuthRequired``/``InsufficientScope`` whose challenge names RFC 9728 metadata,
    with the authorization servers that metadata lists (fetched under the target's egress
    policy, within the probe's own timeout); any other failure as it is."""
    if failure.reason not in ("AuthRequired", "InsufficientScope"):
        return failure
    refusal = next(
        (leaf for leaf in _failures(error) if leaf.status in (401, 403) and leaf.challenge),
        None,
    )
    found = challenge.parse(refusal.challenge) if refusal is not None else None
    if refusal is None or found is None or found.resource_metadata is None:
        return failure
    servers = await challenge.authorization_servers(
        found.resource_metadata,
        target.egress,
        seconds=min(challenge.METADATA_SECONDS, target.timeout_seconds),
        ssl_context=tls_context(target.verify_tls),
    )
    if not servers:
        return failure
    where = failure.message.partition(" answered HTTP")[0]
    return ProbeError(failure.reason, challenge.explain(where, refusal.status or 0, found, servers))


def _failures(error: BaseException) -> list[McpFailure]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _failures(inner)]
    return [error] if isinstance(error, McpFailure) else []


def scrubbed(discovery: Discovery, mask: Scrubber) -> Discovery:
    """``discovery`` with every server-chosen string masked by ``mask`` (header values a
    server echoed back never reach status, Events, logs or the CLI's output)."""
    if not mask:
        return discovery

    def text(value: str | None) -> str | None:
        return mask(value) if isinstance(value, str) else value

    tools = [
        replace(
            tool,
            name=mask(tool.name),
            description=text(tool.description),
            title=text(tool.title),
            annotations=(
                {k: text(v) if isinstance(v, str) else v for k, v in tool.annotations.items()}
                if tool.annotations
                else tool.annotations
            ),
        )
        for tool in discovery.tools
    ]
    return replace(
        discovery,
        server_name=text(discovery.server_name),
        server_version=text(discovery.server_version),
        tools=tools,
    )


async def _discover(target: ProbeTarget, state: ProbeState, keep: Keep) -> Discovery:
    async with probe_client(target, state, keep) as client:
        capabilities = client.server_capabilities
        info = client.server_info
        version = client.negotiated_version
        walk = Paginator()
        tools: list[DiscoveredTool] = []
        cursor: str | None = None
        while True:
            state.phase = f"tools/list (page {walk.pages + 1})"
            try:
                page = await client.list_tools(cursor=cursor)
            except McpFailure as error:
                if error.code == METHOD_NOT_FOUND and capabilities.tools is None and not tools:
                    break  # a server without the tools capability: no tools, not a failure
                raise
            tools.extend(_discovered_tool(tool, keep) for tool in page.tools)
            next_cursor, count = page.next_cursor, len(page.tools)
            del page  # the parsed page is released before anything else can fail
            cursor = walk.advance(next_cursor, count)
            if cursor is None:
                break
        discovery = Discovery(
            server_name=info.name if info is not None else None,
            server_version=info.version if info is not None else None,
            protocol_version=version,
            tools=tools,
            list_changed=bool(capabilities.tools and capabilities.tools.list_changed),
        )
        state.phase = "closing the session"
    return discovery


def _discovered_tool(tool: Any, keep: Keep) -> DiscoveredTool:
    """The SDK's tool as the caller keeps it.

    A name longer than a valid one is cut to one character past the limit, so that
    it stays invalid and is reported, without being kept whole.
    """
    annotations = (
        tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else None
    )
    if annotations and isinstance(annotations.get("title"), str):
        annotations["title"] = _cut(annotations["title"], keep.title_chars)
    title = getattr(tool, "title", None)
    description = tool.description if isinstance(tool.description, str) else None
    return DiscoveredTool(
        name=tool.name[: MAX_TOOL_NAME_CHARS + 1],
        description=_cut(description, keep.description_chars),
        annotations=annotations or None,
        title=_cut(title, keep.title_chars) if isinstance(title, str) else None,
        input_schema=tool.input_schema if keep.input_schema else {},
        sha256=_digest(tool) if keep.digests else None,
    )


def _digest(tool: Any) -> str | None:
    """The digest the page's slimming took over the raw definition (``Keep.digests``)."""
    meta = getattr(tool, "meta", None)
    digest = meta.get(DIGEST_META) if isinstance(meta, dict) else None
    return digest if isinstance(digest, str) else None


def _cut(text: str | None, limit: int | None) -> str | None:
    return text if text is None or limit is None else cut(text, limit)
