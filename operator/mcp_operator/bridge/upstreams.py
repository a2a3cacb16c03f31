"""The run's upstream servers: one session each, their tool listings, and when to list again.

Owns the live side of the configured servers: one MCP session per server
(:class:`~mcp_operator.mcp.session.McpSession`, the client the probe uses too; the bridge has
no client of its own; a server of the legacy HTTP+SSE transport gets its
:class:`~mcp_operator.mcp.legacy_sse.LegacySseSession`), all over one pool of keep-alive
connections; the last tool listing of
each server; the catalog built from those listings
(:func:`~mcp_operator.bridge.catalog.build_catalog`); and the schedule of listings:

- every server is listed when it is configured (at start and when a reload adds or changes
  it), when it says ``notifications/tools/list_changed`` on its change stream
  (:func:`~mcp_operator.mcp.session_changes.follow`), and every ``relist_seconds`` while it is up;
- a server that cannot be listed, or whose call could not reach it, is *down*: it is listed
  again on a timer with exponential back-off (1 s doubling to 60 s), and its return is noticed
  by the first listing that succeeds.

**A server that is down keeps its tools listed** (the last listing it gave): the agent's view
does not flicker while a server restarts, and a call to one of its tools returns the
pipeline's ``upstream_unavailable`` or ``circuit_open`` error with a hint saying which server
is down and for how long, which a model can act on; a tool that silently vanished could not be
explained. A server that was never listed contributes no tools until its first listing.

``on_change`` is called with the new catalog whenever the listing the agent sees changes.
Header values from ``valueFile`` are read when a server is configured and never logged; every
value in use masks the call pipeline's failures and this module's log lines of a server's
failures, whose words a server chooses (:attr:`UpstreamPool.scrubber`). **A header
value that cannot be sent** (a control character such as CR/LF, which would forge the
request's head) fails that one server: it is never contacted, it is down with the reason in
``/readyz``, the metrics (``mcp_bridge_upstream_misconfigured``) and the hint of every call to
it, and the other servers keep working. So does a ``valueFile`` that cannot be read (a
Secret not mounted, a key missing): the server is not called without the header.
A server's ``tokenFile`` (the run's projected ServiceAccount token for that server's audience)
becomes the session's :class:`~mcp_operator.mcp.credentials.TokenFileCredentials`: sent on
every request, re-read as the kubelet rotates it, never logged.
Calling a tool through the pipeline is :meth:`UpstreamPool.call`; what a failure means for
the agent is the pipeline's job.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from mcp.shared.inbound import x_mcp_header_map

from mcp_operator import __version__
from mcp_operator.api.bridge import BridgeConfig, UpstreamServer
from mcp_operator.bridge import relay
from mcp_operator.bridge.auth import credentials_for
from mcp_operator.bridge.catalog import Catalog, build_catalog, server_key
from mcp_operator.bridge.egress import BRIDGE_EGRESS
from mcp_operator.bridge.errors import UpstreamMisconfigured, UpstreamUnavailable
from mcp_operator.bridge.prompts import PromptCatalog, build_prompts
from mcp_operator.mcp.bounds import capped
from mcp_operator.mcp.credentials import Credentials, TokenFileCredentials
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.legacy_sse import LegacySseSession
from mcp_operator.mcp.oauth import OAuthCredentials
from mcp_operator.mcp.scrub import NOTHING, Scrubber
from mcp_operator.mcp.session import McpSession, Pool, session_pool
from mcp_operator.mcp.session_changes import follow
from mcp_operator.net.headers import header_refusal
from mcp_operator.serve import era

logger = logging.getLogger(__name__)

LIST_TIMEOUT_SECONDS = 10.0
"""Deadline of one server's ``tools/list`` (all pages)."""
CLIENT_INFO = {"name": "mcp-operator-bridge", "version": __version__}
MAX_ANSWER_BYTES = 8 * 1024 * 1024
"""The largest answer (JSON body or SSE stream up to the response) read from an upstream."""
FIRST_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 60.0
TICK_SECONDS = 0.5
"""How often the timer looks for servers due to be listed."""
STOP_CLOSE_SECONDS = 1.0
"""How long the bridge, stopping, gives each server to hear its session ended."""


Transport = Literal["streamable-http", "sse"]
"""How a server is reached (``UpstreamServer.transport``)."""

Misconfiguration = Literal["InvalidHeader", "UnreadableHeader"]
"""Why a server cannot be called as configured: a header value it must not send, or a
``valueFile`` that could not be read."""
MISCONFIGURATIONS: tuple[Misconfiguration, ...] = get_args(Misconfiguration)


@dataclass(frozen=True)
class Problem:
    """Why a server cannot be called at all: never listed nor called until it is fixed."""

    reason: Misconfiguration
    message: str
    """A sentence for ``/readyz``, logs and hints; never a header value."""


def read_headers(server: UpstreamServer) -> tuple[dict[str, str], Problem | None]:
    """The server's headers, ``valueFile`` values read from their files (never logged), and
    the first header that could not be read: without it the server would be called
    unauthenticated, or as someone it is not, so it is not called at all."""
    headers: dict[str, str] = {}
    for header in server.headers:
        if header.value is not None:
            headers[header.name] = header.value
            continue
        assert header.value_file is not None
        try:
            headers[header.name] = Path(header.value_file).read_text(encoding="utf-8").strip()
        except OSError as error:
            return headers, Problem(
                "UnreadableHeader",
                f"header {header.name} could not be read from {header.value_file} "
                f"({error.strerror}), so the bridge does not call server {server_key(server)} "
                "(check the Secret and its mount)",
            )
    return headers, None


def header_problem(server: UpstreamServer, headers: Mapping[str, str]) -> Problem | None:
    """Why the server cannot be called with these headers (the probe's rule: a value must not
    forge the request's head); never the value."""
    for name, value in headers.items():
        refusal = header_refusal(name, value)
        if refusal is not None:
            return Problem(
                "InvalidHeader",
                f"{refusal}, so the bridge does not call server {server_key(server)} "
                "(fix the header's value or its Secret)",
            )
    return None


def backoff_seconds(failures: int) -> float:
    """The wait before listing a down server again after ``failures`` failed listings."""
    return float(min(MAX_BACKOFF_SECONDS, FIRST_BACKOFF_SECONDS * 2 ** max(0, failures - 1)))


@dataclass
class ServerState:
    """One configured server as the bridge knows it now."""

    server: UpstreamServer
    upstream: McpSession
    headers_signature: str
    tools: list[dict[str, Any]] | None = None
    """The last listing it gave (kept while the server is down)."""
    prompts: list[dict[str, Any]] | None = None
    """Its last prompt listing, when it offers prompts (kept like ``tools``)."""
    listed_once: bool = False
    """Its first listing was tried (successful or not): readiness waits for this."""
    problem: Problem | None = None
    """Why it cannot be called at all (:func:`read_headers`, :func:`header_problem`)."""
    up: bool = False
    failures: int = 0
    """Failed listings in a row."""
    due: float = 0.0
    """Monotonic time of its next listing."""
    listing: asyncio.Task[None] | None = field(default=None, repr=False)
    follower: asyncio.Task[None] | None = field(default=None, repr=False)
    """Follows the server's ``tools/list_changed``
    (:func:`~mcp_operator.mcp.session_changes.follow`)."""
    oauth: OAuthCredentials | None = field(default=None, repr=False)
    """The server's OAuth credentials (``auth``), whose token the session presents."""

    def tasks(self) -> list[asyncio.Task[None]]:
        return [task for task in (self.listing, self.follower) if task is not None]


def _pins(server: UpstreamServer) -> tuple[object, object]:
    """What the operator's probe last saw of a server's tools (its names and digests)."""
    return server.tools, server.tool_digests


def _connection_signature(server: UpstreamServer, headers: Mapping[str, str]) -> str:
    """What forces a new upstream session when it changes (values hashed into the text)."""
    auth = server.auth.model_dump(mode="json") if server.auth is not None else None
    return json.dumps(
        [
            server.url,
            server.transport,
            server.protocol_version,
            sorted(headers.items()),
            server.token_file,
            auth,
        ],
        separators=(",", ":"),
    )


class UpstreamPool:
    """Every configured server's session, listing and schedule, and the catalog they make."""

    def __init__(
        self,
        *,
        on_change: Callable[[Catalog], Awaitable[None] | None],
        relist_seconds: float = 300.0,
        on_listed: Callable[[str, bool], None] | None = None,
        on_problem: Callable[[str, Misconfiguration | None], None] | None = None,
        on_notice: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> None:
        self.http1 = session_pool(BRIDGE_EGRESS)
        """The connections of every server's calls, listings and change streams."""
        self.on_change = on_change
        self.on_listed = on_listed
        self.on_problem = on_problem
        """Called with a server's key and the reason of its :attr:`ServerState.problem` (None:
        it has none) on each configure."""
        self.scrubber = NOTHING
        """Masks every header value of the configured servers (in every form it knows)."""
        self.relist_seconds = relist_seconds
        self.states: dict[str, ServerState] = {}
        self.servers: list[UpstreamServer] = []
        self.catalog = Catalog(entries={})
        self.prompts = PromptCatalog(entries={})
        """The prompts of every server, named and filtered (:mod:`~mcp_operator.bridge.prompts`)."""
        self.on_notice = on_notice
        """Called with a server's key and every other notification its change stream carries
        (resource updates, log messages, list changes of prompts and resources)."""
        self._shown = ""
        self._timer: asyncio.Task[None] | None = None
        self._retiring: dict[asyncio.Task[None], McpSession] = {}
        """Sessions of servers a reload replaced or removed, ending once their calls did."""

    # -- configuration -----------------------------------------------------------------------

    async def configure(self, config: BridgeConfig) -> None:
        """Take the servers of ``config``: keep the unchanged, (re)connect the new or changed,
        drop the removed; list the new ones, and the kept ones whose pins changed (the
        operator's probe saw other definitions than the bridge last listed, whether or not
        the server announced it); rebuild the catalog."""
        states: dict[str, ServerState] = {}
        fresh: list[ServerState] = []
        secrets: list[str] = []
        for server in config.servers:
            key = server_key(server)
            headers, unreadable = read_headers(server)
            secrets.extend(headers.values())
            signature = _connection_signature(server, headers)
            state = self.states.get(key)
            if state is not None and state.headers_signature == signature:
                if _pins(state.server) != _pins(server) and state.problem is None:
                    fresh.append(state)  # the operator saw other definitions: list again
                state.server = server
                states[key] = state
                continue
            problem = unreadable or header_problem(server, headers)
            hint = server.protocol_version
            sent = {} if problem is not None else headers
            oauth = credentials_for(server.auth, self.http1)
            credentials: Credentials | None = oauth
            if server.token_file:
                credentials = TokenFileCredentials(server.token_file)
            upstream = upstream_session(
                key, server.url, self.http1, sent, hint, credentials, server.transport
            )
            if self.on_notice is not None:
                upstream.on_notice = _bound(self.on_notice, key)
                upstream.listen_filter.update(promptsListChanged=True, resourcesListChanged=True)
            state = ServerState(
                server=server, upstream=upstream, headers_signature=signature, oauth=oauth
            )
            states[key] = state
            if problem is None:
                fresh.append(state)
            else:
                logger.error("Could not use server %s: %s", key, problem.message)
                state.problem, state.listed_once, state.due = problem, True, math.inf
        self.scrubber = Scrubber(secrets)
        if self.on_problem is not None:
            for key, state in states.items():
                self.on_problem(key, state.problem.reason if state.problem else None)
        for key, old in self.states.items():
            if states.get(key) is not old:
                for task in old.tasks():
                    task.cancel()
                self._retire(old)
        self.states = states
        self.servers = list(config.servers)
        await asyncio.gather(*(self._list(state) for state in fresh))
        await self._rebuild()

    @property
    def ready(self) -> bool:
        """Every configured server's first listing was tried."""
        return all(state.listed_once for state in self.states.values())

    # -- listing -----------------------------------------------------------------------------

    async def _list(self, state: ServerState) -> bool:
        """List one server's tools now; returns whether its listing changed."""
        if state.problem is not None:
            return False
        key = server_key(state.server)
        try:
            tools = await list_tools(state.upstream, LIST_TIMEOUT_SECONDS)
        except McpFailure as error:
            state.listed_once = True
            was_up = state.up
            self._mark_down(state)
            if was_up or state.failures == 1:
                told = self.scrubber(error.message)
                logger.warning("Could not list the tools of server %s: %s", key, told)
            if self.on_listed is not None:
                self.on_listed(key, False)
            return False
        if not state.up and state.listed_once:
            logger.info("Server %s is back with %d tools", key, len(tools))
        prompts = await self._list_prompts(state)
        changed = tools != state.tools or prompts != state.prompts
        state.prompts = prompts
        state.tools, state.listed_once, state.up, state.failures = tools, True, True, 0
        state.due = time.monotonic() + self.relist_seconds
        if state.follower is None and state.upstream.announces_notices:
            state.follower = asyncio.get_running_loop().create_task(
                follow(state.upstream, lambda: self.relist(key))
            )
        if self.on_listed is not None:
            self.on_listed(key, True)
        return changed

    async def _list_prompts(self, state: ServerState) -> list[dict[str, Any]] | None:
        """The server's prompts when it offers any; a failed prompt listing keeps the last."""
        if state.upstream.capabilities.prompts is None:
            return None
        try:
            return await list_tools(state.upstream, LIST_TIMEOUT_SECONDS, "prompts")
        except McpFailure as error:
            told = self.scrubber(error.message)
            logger.warning("Could not list the prompts of server %s: %s", state.upstream.name, told)
            return state.prompts

    def refollow(self, key: str) -> None:
        """Open the server's change stream again (what it should carry changed)."""
        state = self.states.get(key)
        if state is None or state.problem is not None:
            return
        if state.follower is not None:
            state.follower.cancel()
        state.follower = asyncio.get_running_loop().create_task(
            follow(state.upstream, lambda: self.relist(key))
        )

    def _mark_down(self, state: ServerState) -> None:
        state.up = False
        state.failures += 1
        state.upstream.reset()
        state.due = time.monotonic() + backoff_seconds(state.failures)

    async def relist(self, *keys: str) -> None:
        """List these servers again now, concurrently (one said its tools changed, they are
        due, or one came back); the catalog is rebuilt once, and only when a listing changed."""
        states = [self.states[key] for key in keys if key in self.states]
        changed = await asyncio.gather(*(self._list(state) for state in states))
        if any(changed):
            await self._rebuild()

    async def _rebuild(self) -> None:
        listed = {key: state.tools for key, state in self.states.items() if state.tools is not None}
        catalog = build_catalog(self.servers, listed, previous=self.catalog)
        for collision in catalog.collisions:
            logger.warning("Left out a colliding tool: %s", collision)
        prompted = {k: s.prompts for k, s in self.states.items() if s.prompts is not None}
        prompts = build_prompts(self.servers, prompted, previous=self.prompts)
        for collision in prompts.collisions:
            logger.warning("Left out a colliding prompt: %s", collision)
        shown = json.dumps([catalog.listing(), prompts.listing()], sort_keys=True, default=repr)
        self.catalog, self.prompts = catalog, prompts
        if shown != self._shown:
            self._shown = shown
            outcome = self.on_change(catalog)
            if outcome is not None:
                await outcome

    # -- the timer ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start the timer that lists servers when they are due."""
        if self._timer is None:
            self._timer = asyncio.get_running_loop().create_task(self._tick_forever())

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            now = time.monotonic()
            due = [
                state
                for state in self.states.values()
                if state.due <= now and (state.listing is None or state.listing.done())
            ]
            if due:
                task = asyncio.get_running_loop().create_task(
                    self.relist(*(server_key(state.server) for state in due))
                )
                for state in due:
                    state.listing = task

    def _retire(self, old: ServerState) -> None:
        """End a replaced or removed server's session in the background: its calls in flight
        finish first (within the server's call deadline), then the server hears the session
        is over (a legacy session's ``DELETE``, an SSE stream closed)."""
        session = old.upstream
        task = asyncio.get_running_loop().create_task(
            session.retire(old.server.policy.timeout_seconds)
        )
        self._retiring[task] = session
        task.add_done_callback(lambda done: self._retiring.pop(done, None))

    async def stop(self) -> None:
        """Stop the timer and every listing in flight, then end every session (within
        ``STOP_CLOSE_SECONDS``: the calls were drained before, and a server that does not
        answer is no reason to linger)."""
        tasks = [self._timer] if self._timer is not None else []
        tasks += [task for state in self.states.values() for task in state.tasks()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._timer = None
        retiring, self._retiring = self._retiring, {}
        for task in retiring:
            task.cancel()
        sessions = [*retiring.values(), *(state.upstream for state in self.states.values())]
        await asyncio.gather(
            *retiring,
            *(session.close(STOP_CLOSE_SECONDS) for session in sessions),
            return_exceptions=True,
        )
        await self.http1.aclose()

    # -- calls -------------------------------------------------------------------------------

    async def call(
        self, server: UpstreamServer, tool: str, arguments: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """The pipeline's upstream call: ``tools/call`` on the server's session (through the
        agent call's relay, :mod:`~mcp_operator.bridge.relay`, when the front gave it one).

        A failure is the session's :class:`~mcp_operator.mcp.failures.McpFailure` as it came
        off the wire (the pipeline makes the agent's tool error of it, ``rpcCode``
        included); one that means the server is unreachable also marks it down, so the timer
        notices its return. Running out of time is the pipeline's deadline.
        """
        state = self.states.get(server_key(server))
        if state is None:
            raise UpstreamUnavailable(f"server {server_key(server)} is no longer configured")
        if state.problem is not None:
            raise UpstreamMisconfigured(state.problem.message)
        relayed = relay.current()
        try:
            if relayed is not None:  # an agent's call: what the server asks goes to that agent
                relayed.scrubber = self.scrubber
                result = await relayed.call(state.upstream, tool, arguments)
            else:
                result = await state.upstream.request(
                    "tools/call", {"name": tool, "arguments": arguments}
                )
        except McpFailure as error:
            if state.oauth is not None:  # a server may echo the token it was sent
                mask = Scrubber(state.oauth.secrets())
                error.message = mask(error.message)
                error.detail = mask(error.detail) if error.detail else error.detail
            if error.kind == "unavailable" and state.up:
                told = self.scrubber(error.message)
                logger.warning("Lost server %s: %s", state.upstream.name, told)
                self._mark_down(state)
                if self.on_listed is not None:
                    self.on_listed(state.upstream.name, False)
            raise
        if not state.up:
            state.due = 0.0  # it answered: list it again at once to notice its return
        # The bridge answers its agent itself: no era's stamp of the server's stays on it.
        return era.plain_result(result)  # type: ignore[no-any-return]

    def identity(self, key: str) -> tuple[str | None, str | None]:
        """The subject and actor of the token the server ``key`` is called with (its claims
        when it is a JWT, for the audit line; never the token), or ``(None, None)``."""
        state = self.states.get(key)
        token = state.oauth.token if state is not None and state.oauth is not None else None
        return (token.subject, token.actor) if token is not None else (None, None)


def upstream_session(
    name: str,
    url: str,
    pool: Pool,
    headers: Mapping[str, str] | None = None,
    protocol_hint: str | None = None,
    credentials: Credentials | None = None,
    transport: Transport = "streamable-http",
) -> McpSession:
    """The session of one upstream server (``protocol_hint``: the version its status gave;
    ``credentials``: its projected token, or its OAuth token), on its ``transport``:
    Streamable HTTP, or the legacy HTTP+SSE transport's
    :class:`~mcp_operator.mcp.legacy_sse.LegacySseSession` (the same interface)."""
    kind = LegacySseSession if transport == "sse" else McpSession
    return kind(
        url,
        pool,
        name=name,
        headers=headers,
        credentials=credentials,
        client_info=CLIENT_INFO,
        protocol_hint=protocol_hint,
        read_body=capped(MAX_ANSWER_BYTES, name),
        capabilities=relay.UPSTREAM_CAPABILITIES,
    )


async def list_tools(
    session: McpSession, seconds: float, what: str = "tools"
) -> list[dict[str, Any]]:
    """Every tool (or prompt: ``what``) of every page, within ``seconds`` for them all (the
    one pagination rule: a bound passed fails the listing, it is never cut short)."""
    tools: list[dict[str, Any]] = []
    try:
        async with asyncio.timeout(seconds):
            async for page in session.pages(f"{what}/list", what):
                tools.extend(tool for tool in page if isinstance(tool, dict))
    except TimeoutError:
        raise McpFailure(
            "timeout", f"{session.name} did not answer {what}/list within {seconds:g}s"
        ) from None
    if what == "tools":
        session.param_headers = param_header_maps(tools)
    return tools


def param_header_maps(tools: list[dict[str, Any]]) -> dict[str, dict[tuple[str, ...], str]]:
    """The ``x-mcp-header`` maps of the tools whose input schema declares one."""
    maps: dict[str, dict[tuple[str, ...], str]] = {}
    for tool in tools:
        name, schema = tool.get("name"), tool.get("inputSchema")
        if isinstance(name, str) and isinstance(schema, dict) and "x-mcp-header" in str(schema):
            try:
                header_map = x_mcp_header_map(schema)
            except (ValueError, TypeError, AttributeError):
                continue
            if header_map:
                maps[name] = header_map
    return maps


def _bound(
    on_notice: Callable[[str, dict[str, Any]], None], key: str
) -> Callable[[dict[str, Any]], None]:
    return lambda message: on_notice(key, message)
