"""The running bridge: configuration, upstream pool, call pipeline, sessions, audit, metrics.

Owns what joins the pure parts into one program: it applies a configuration (at start and
on every reload) to the upstream pool and the pipeline, keeps the encoded ``tools/list``
answer of the current catalog, runs a ``tools/call`` through :class:`CallPipeline` and writes
its audit line and metrics, and tells the agent's open streams when the catalog changed.
The HTTP side is :mod:`~mcp_operator.bridge.front`; the process (uvicorn, signals) is
:mod:`~mcp_operator.bridge.server`.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import IO, Any, Final

from mcp_types.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from mcp_operator import __version__, tracing
from mcp_operator.api.bridge import ApprovalConfig, BridgeConfig
from mcp_operator.bridge import aggregate, discovery
from mcp_operator.bridge.approval import AgentApprover, WebhookApprover
from mcp_operator.bridge.audit import AuditRecord
from mcp_operator.bridge.catalog import Catalog, server_key
from mcp_operator.bridge.hooks import Hook, default_hooks
from mcp_operator.bridge.metrics import BridgeMetrics
from mcp_operator.bridge.pipeline import CallPipeline
from mcp_operator.bridge.relay import BridgeSession
from mcp_operator.bridge.upstreams import UpstreamPool
from mcp_operator.serve import listeners
from mcp_operator.serve.audit import AuditWriter
from mcp_operator.serve.events import EventStore
from mcp_operator.serve.jsonrpc import RequestId, error_response
from mcp_operator.serve.sessions import SessionTable

logger = logging.getLogger(__name__)

SERVER_INFO: Final[dict[str, str]] = {"name": "mcp-operator-bridge", "version": __version__}
INSTRUCTIONS: Final = (
    "Tools of several MCP servers, named <prefix>_<tool>. A failed call returns a structured "
    "error with a code and a hint that says what to change."
)
INITIALIZE_RESULT: Final[dict[str, Any]] = {
    "protocolVersion": LATEST_HANDSHAKE_VERSION,
    "capabilities": {"tools": {"listChanged": True}},
    "serverInfo": SERVER_INFO,
    "instructions": INSTRUCTIONS,
}
"""The bridge's own identity as a server, as a legacy session's ``initialize`` gets it (at
the version negotiated per client, ``serve.era.initialize_result``)."""
DISCOVERED: Final[dict[str, Any]] = {**INITIALIZE_RESULT, "capabilities": {"tools": {}}}
"""What ``server/discover`` is derived from: no list-changed stream in 2026-07-28 (no
``subscriptions/listen``)."""

MAX_SESSIONS = 256
"""Most concurrent legacy sessions of the agent (shared fairly among callers)."""
REPLAY_TOTAL_BYTES = 8 * 1024 * 1024
"""Most bytes of SSE events kept for replay over all of the agent's streams."""
IDLE_SECONDS = 3600.0
"""A session without a GET stream that is not used for this long is dropped."""

LIST_CHANGED = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
PROMPTS_CHANGED = {"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"}
RESOURCES_CHANGED = "notifications/resources/list_changed"


class SystemClock:
    """The pipeline's clock: the real one."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class BridgeCore:
    """One bridge: what the front asks of it, and the configuration it runs with."""

    def __init__(
        self,
        config: BridgeConfig,
        *,
        relist_seconds: float = 300.0,
        hooks: Sequence[Hook] | None = None,
        metrics: BridgeMetrics | None = None,
        audit_stdout: IO[str] | None = None,
    ) -> None:
        self.config = config
        self.metrics = metrics or BridgeMetrics()
        self.sessions: SessionTable[BridgeSession] = SessionTable(
            max_sessions=MAX_SESSIONS, idle_seconds=IDLE_SECONDS, replace_own_idle=False
        )
        """The agent's legacy sessions; a caller at its share waits for its own to expire."""
        self.events = EventStore(max_total_bytes=REPLAY_TOTAL_BYTES)
        """The legacy GET streams' events, for an agent that resumes with ``Last-Event-ID``
        (``serve.events``; the per-stream bounds are the store's defaults)."""
        self.pool = UpstreamPool(
            on_change=self._catalog_changed,
            relist_seconds=relist_seconds,
            on_listed=self.metrics.observe_listing,
            on_problem=self.metrics.observe_problem,
            on_notice=self._notice,
        )
        self.aggregator = aggregate.Aggregator(self.pool)
        """Prompts, resources, completion and logging (:mod:`~mcp_operator.bridge.aggregate`)."""
        self._prompts_shown: list[dict[str, Any]] = []
        self.listeners: dict[str, listeners.Listener] = {}
        """The agent's open 2026-07-28 ``subscriptions/listen`` streams, by key."""
        self._listened = 0
        self._relisting: set[asyncio.Task[None]] = set()
        self.pipeline = CallPipeline(
            config,
            Catalog(entries={}),
            upstream=self.pool.call,
            clock=SystemClock(),
            random=random.random,
            hooks=default_hooks() if hooks is None else hooks,
        )
        self.pipeline.upstream_identity = self.pool.identity
        self.pipeline.approver = self._approver(config)
        self._audit_stdout = audit_stdout if audit_stdout is not None else sys.stdout
        self.audit = self._audit_writer(config)
        self.listing_result: dict[str, Any] = {"tools": []}
        self.started = False
        self.inflight = 0
        self.audited = 0
        """Audit lines written so far (the front audits a refusal no call step audited)."""

    def _approver(self, config: BridgeConfig) -> AgentApprover:
        """The agent (elicitation) when it can be asked, waiting the run's time, else the
        approval webhook's asker, on the upstreams' pool (their egress policy)."""
        approval = config.approval if config.approval is not None else ApprovalConfig()
        clock = self.pipeline.clock
        fallback = (
            WebhookApprover(
                config, approval.webhook, self.pool.http1, monotonic=clock.monotonic, now=clock.now
            )
            if approval.webhook is not None
            else None
        )
        seconds = float(approval.elicitation.timeout_seconds)
        return AgentApprover(fallback, monotonic=clock.monotonic, seconds=seconds)

    def _audit_writer(self, config: BridgeConfig) -> AuditWriter:
        stdout = self._audit_stdout if config.audit.stdout else None
        return AuditWriter(stdout, config.audit.file)

    # -- life --------------------------------------------------------------------------------

    async def start(self) -> None:
        """List every server once (successful or not), then keep listing on the timer."""
        await self.apply(self.config)
        self.pool.start()
        self.started = True

    @property
    def ready(self) -> bool:
        """Configuration loaded and every server's first listing done."""
        return self.started and self.pool.ready

    async def apply(self, config: BridgeConfig) -> None:
        """Take a (new) configuration without a restart."""
        if config.listen != self.config.listen:
            logger.warning(
                "Kept listening on %s:%d%s: a new listen address needs a restart",
                self.config.listen.host,
                self.config.listen.port,
                self.config.listen.path,
            )
        if config.audit != self.config.audit:
            self.audit.close()
            self.audit = self._audit_writer(config)
        gone = {server_key(s) for s in self.config.servers} - {
            server_key(s) for s in config.servers
        }
        self.config = config
        self.pipeline.reconfigure(config, self.pipeline.catalog)
        await self.pool.configure(config)
        self.pipeline.scrubber = self.pool.scrubber
        self.pipeline.problems = {
            key: state.problem.message
            for key, state in self.pool.states.items()
            if state.problem is not None
        }
        self.pipeline.reconfigure(config, self.pool.catalog)
        self.pipeline.approver = self._approver(config)
        # New rules can hide or show tools without any server's list changing.
        self.listing_result = {"tools": self.pool.scrubber.json(self.pipeline.listing())}
        for key in gone:
            self.metrics.forget_server(key)

    async def stop(self) -> None:
        await self.pool.stop()
        self.sessions.close_streams()
        self.audit.close()

    def _catalog_changed(self, catalog: Catalog) -> None:
        self.pipeline.reconfigure(self.config, catalog)
        # A server can echo the header values it was sent into its tools' texts.
        self.listing_result = {"tools": self.pool.scrubber.json(self.pipeline.listing())}
        self.metrics.catalog_tools.set(len(catalog.entries))
        logger.info("Listed %d tools of %d servers", len(catalog.entries), len(self.config.servers))
        prompts = self.pool.prompts.listing()
        prompts_changed, self._prompts_shown = prompts != self._prompts_shown, prompts
        if self.started:
            self._broadcast(LIST_CHANGED)
            if prompts_changed:
                self._broadcast(PROMPTS_CHANGED)

    def _broadcast(self, message: dict[str, Any]) -> None:
        """A list change to every legacy session's stream and every listen stream that asked
        for it."""
        for stream in self.sessions.streams():
            stream.push(message)
        for listener in list(self.listeners.values()):
            if listener.wants(str(message["method"]), {}):
                listener.stream.push(listener.tagged(message))

    async def open_listener(self, listener: listeners.Listener) -> str:
        """Register an agent's 2026-07-28 listen stream; its key (for :meth:`close_listener`)."""
        self._listened += 1
        key = f"listen:{self._listened}"
        await self.aggregator.listen(key, listener.uris)
        self.listeners[key] = listener
        return key

    async def close_listener(self, key: str) -> None:
        self.listeners.pop(key, None)
        await self.aggregator.forget(key)

    def _notice(self, server: str, message: dict[str, Any]) -> None:
        """An upstream's notification: a resource list change to every agent stream, a
        resource update or a log message to the sessions :mod:`aggregate` names."""
        if message.get("method") == RESOURCES_CHANGED:
            self._broadcast({"jsonrpc": "2.0", "method": RESOURCES_CHANGED})
            return
        if message.get("method") == PROMPTS_CHANGED["method"]:
            # Listed again: the agent hears of it when the catalog's prompts changed.
            task = asyncio.get_running_loop().create_task(self.pool.relist(server))
            self._relisting.add(task)
            task.add_done_callback(self._relisting.discard)
            return
        for session_id, sent in self.aggregator.notice(server, message):
            session = self.sessions.get(session_id, time.monotonic())
            listener = self.listeners.get(session_id)
            if listener is not None:
                if listener.wants(str(sent["method"]), sent["params"]):
                    listener.stream.push(listener.tagged(sent))
            elif session is None:
                self.aggregator.interests.pop(session_id, None)  # it ended or expired
            elif session.stream is not None:
                session.stream.push(sent)

    def initialize_result(self) -> dict[str, Any]:
        """The bridge's InitializeResult, with the capabilities its upstreams have."""
        caps = aggregate.capabilities(self.pool.states, modern=False)
        return {**INITIALIZE_RESULT, "capabilities": caps}

    def discovered(self) -> dict[str, Any]:
        """What ``server/discover`` is derived from, with the upstreams' capabilities."""
        caps = aggregate.capabilities(self.pool.states, modern=True)
        return {**DISCOVERED, "capabilities": caps}

    # -- requests ----------------------------------------------------------------------------

    async def answer(
        self, request_id: RequestId, method: str, params: Any, session: str | None = None
    ) -> dict[str, Any]:
        """The JSON-RPC response to one request of the agent (either era, before shaping):
        ``tools/call`` through the pipeline, ``tools/list`` from the catalog, ``ping``, the
        other features through :mod:`~mcp_operator.bridge.aggregate` (``session``: the
        legacy session asking, to whom its subscriptions and logs go); any other method
        -32601. A server span when tracing is on (:mod:`~mcp_operator.tracing`)."""
        if tracing.ENABLED:
            work = self._answer(request_id, method, params, session)
            return await tracing.serve(
                method, params, work, request_id=request_id, session_id=session
            )
        return await self._answer(request_id, method, params, session)

    async def _answer(
        self, request_id: RequestId, method: str, params: Any, session: str | None
    ) -> dict[str, Any]:
        if method in aggregate.METHODS:
            return await self.aggregator.answer(request_id, method, params, session)
        if method == "tools/call":
            problem = _unreadable_call(params)
            if problem is not None:
                sent = params.get("name") if isinstance(params, dict) else params
                self.record(self.pipeline.unreadable(sent))
                return error_response(request_id, INVALID_PARAMS, f"Invalid params: {problem}")
            result = await self.call_tool(params)
        elif method == "tools/list":
            searching = self.config.discovery == "search"
            result = {"tools": discovery.TOOLS} if searching else self.listing_result
        elif method == "ping":
            result = {}
        else:
            return error_response(request_id, METHOD_NOT_FOUND, f"Method not found: {method}")
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    async def call_tool(self, params: dict[str, Any]) -> dict[str, Any]:
        """A ``tools/call`` through the pipeline; the ``CallToolResult`` for the agent. In
        ``search`` discovery, the bridge's two tools: search answered from the listing, and
        call-by-name through the pipeline like any call."""
        if self.config.discovery == "search":
            if params["name"] == discovery.SEARCH_TOOL:
                return discovery.search_result(
                    self.listing_result["tools"], params.get("arguments")
                )
            if params["name"] == discovery.CALL_TOOL:
                inner = params.get("arguments")
                inner = inner if isinstance(inner, dict) else {}
                name = inner.get("name")
                params = {
                    "name": name if isinstance(name, str) else "",
                    "arguments": inner.get("arguments"),
                }
        self.inflight += 1
        try:
            report = await self.pipeline.call(params["name"], params.get("arguments"))
        finally:
            self.inflight -= 1
        self.record(report.audit)
        return report.result

    def record(self, audit: AuditRecord) -> None:
        """Write one audit line and count it in the metrics."""
        self.audited += 1
        self.audit.write(audit)
        self.metrics.observe_call(audit)

    def record_refused(self, status: int) -> None:
        """Audit a request the front refused before any call step saw it (bad JSON, a body
        too large, a wrong content type, a missing session header)."""
        self.record(self.pipeline.unreadable(f"HTTP {status}"))


def _unreadable_call(params: Any) -> str | None:
    """Why ``params`` cannot be a ``tools/call`` (the arguments' shape is the pipeline's to
    judge, with a hint), or ``None``."""
    if not isinstance(params, dict):
        return "params must be an object"
    if not isinstance(params.get("name"), str):
        return "params.name must be a string"
    return None
