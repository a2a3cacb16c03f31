"""The ASGI entry of ``--child-per-session``: one child (and its core and front) per session.

Owns the routing of a request to the child that serves it, the spawn of a new child when
a session begins, and the reaping of children; what each child's front answers is the
shared adapter's own (``front``, ``core``), unchanged. Per era:

- **legacy**: a POST ``initialize`` without ``Mcp-Session-Id`` reserves a slot in the
  pool (``pool``), spawns a child, waits until it is ready and hands it the request; the
  session id the child's front answers with is bound to that slot. Later requests with
  that id go to that child (an unknown id: 404); a DELETE ends the session and reaps the
  child.
- **2026-07-28**: a caller's requests go to the caller's own child, spawned on its
  first request. The caller is the key sessions are counted by (``serve.sessions``'s
  ``CallerKey``: the client's network address until authenticated identities exist),
  refined by the value of the ``Mcp-Operator-Caller`` header when the request has one,
  so that several callers behind one address (a gateway, tests) can hold children of
  their own. Without authentication that header is a name, not a proof: it keeps
  cooperating callers apart, not hostile ones. A caller that disconnects while a
  request of its child is open, and has no other open, has its child reaped.

Each child's front attributes its child's requests to its one caller by construction
(``attribution``'s sole-caller rule). Bounds: ``--max-children`` (a full pool makes
room among idle children by the fair rule, else answers 503 with ``Retry-After``, at
once, never waiting), ``--child-idle-seconds`` (a child serving no request that long
is stopped), ``--spawn-timeout-seconds`` (a child that is not ready in time is killed:
503). Spawn time is measured (``mcp_adapter_child_spawn_seconds``). The byte budget of
bodies in flight and the call metrics are shared by every child's front.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from mcp_operator.adapter.auth import build_gate
from mcp_operator.adapter.budget import BodyBudget
from mcp_operator.adapter.config import AdapterConfig
from mcp_operator.adapter.core import AdapterCore
from mcp_operator.adapter.front import BUDGET_SPENT, HttpFront
from mcp_operator.adapter.metrics import AdapterMetrics
from mcp_operator.adapter.pool import CALLER_KEY, SESSION_KEY, ChildPool, ChildSlot, PoolFullError
from mcp_operator.adapter.socket_child import spawn_socket
from mcp_operator.serve.asgi import (
    BodyTooLargeError,
    ClientGoneError,
    Message,
    Receive,
    Scope,
    Send,
    disconnect_watch,
    read_body,
    request_headers,
    respond_json,
    respond_plain,
    serve_lifespan,
)
from mcp_operator.serve.auth.gate import AuthGate, identity_key
from mcp_operator.serve.auth.scrapers import MetricsAccess
from mcp_operator.serve.era import is_modern
from mcp_operator.serve.hosts import HostPolicy
from mcp_operator.serve.jsonrpc import dumps, error_response
from mcp_operator.serve.sessions import CallerKey, Headers, client_address

logger = logging.getLogger(__name__)

CALLER_HEADER = b"mcp-operator-caller"
"""Names one caller among several behind one caller key (2026-07-28)."""
MAX_CALLER_NAME = 128
SPAWN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
"""From a local interpreter (tens of milliseconds) to an ``npx``/``uvx`` cold start."""
_READY_POLL_SECONDS = 0.01
_REAP_PERIOD_SECONDS = 1.0


def pool_caller(caller_key: CallerKey, scope: Mapping[str, Any], headers: Headers) -> str:
    """The key of a 2026-07-28 caller's child: the caller key, refined by the
    ``Mcp-Operator-Caller`` header when the request has one (at most 128 characters)."""
    base = caller_key(scope, headers)
    for name, value in scope.get("headers", ()):
        if name == CALLER_HEADER:
            return f"{base}|{value.decode('latin-1')[:MAX_CALLER_NAME]}"
    return base


@dataclasses.dataclass(eq=False, slots=True)
class Child:
    """What runs in one slot: the child's core and the front that serves it."""

    core: AdapterCore
    front: HttpFront


class PoolMetrics(AdapterMetrics):
    """The adapter's metrics summed over every child, with the pool's own."""

    def __init__(self, pool: ChildPool) -> None:
        def children() -> list[AdapterCore]:
            return [slot.child.core for slot in pool if slot.child is not None]

        self._retired_unattributed = {"log": 0, "request": 0}
        self._retired_restarts = 0

        def unattributed() -> dict[str, int]:
            total = dict(self._retired_unattributed)
            for core in children():
                for kind, count in core.router.unattributed.items():
                    total[kind] = total.get(kind, 0) + count
            return total

        super().__init__(
            sessions=lambda: sum(len(core.sessions) for core in children()),
            inflight=lambda: sum(core.inflight for core in children()),
            restarts=lambda: (
                self._retired_restarts + sum(core.supervisor.restart_count for core in children())
            ),
            unattributed=unattributed,
        )
        self.spawn_seconds = self.histogram(
            "mcp_adapter_child_spawn_seconds",
            "Time from spawning a child (--child-per-session) to its answer to initialize.",
            [],
            SPAWN_BUCKETS,
        )
        self.spawns = self.counter(
            "mcp_adapter_child_spawns",
            "Children spawned (--child-per-session), by outcome (ready, timeout, failed).",
            ["outcome"],
        )
        self.pool_refused = self.counter(
            "mcp_adapter_pool_refused",
            "Requests refused with 503 because every child's place was busy.",
        )
        self.reaped = self.counter(
            "mcp_adapter_children_reaped",
            "Children stopped, by reason (deleted, idle, disconnected, evicted, exited).",
            ["reason"],
        )
        self.registry.register(_PoolGauge(pool))

    def retire(self, core: AdapterCore) -> None:
        """A child is stopped: its counts stay in the totals (counters never go down)."""
        for kind, count in core.router.unattributed.items():
            self._retired_unattributed[kind] = self._retired_unattributed.get(kind, 0) + count
        self._retired_restarts += core.supervisor.restart_count


class _PoolGauge(Collector):
    def __init__(self, pool: ChildPool) -> None:
        self._pool = pool

    def collect(self) -> list[GaugeMetricFamily]:
        return [
            GaugeMetricFamily(
                "mcp_adapter_children",
                "Children running or starting (--child-per-session).",
                value=len(self._pool),
            )
        ]


class PoolFront:
    """The ASGI application of ``--child-per-session``."""

    def __init__(
        self,
        config: AdapterConfig,
        caller_key: CallerKey | None = None,
        gate: AuthGate | None = None,
    ) -> None:
        """``gate``: who may call (``serve.auth``), else built from ``--auth``; every request
        passes it before a child is looked up or spawned, so an unauthenticated caller never
        costs a child. ``caller_key``: by default the verified caller's identity (else the
        client's address): a 2026-07-28 caller's child is its identity's."""
        self.config = config
        self._child_config = dataclasses.replace(config, max_sessions=1)
        self.policy = HostPolicy(config.allowed_hosts, config.allowed_origins)
        self.pool = ChildPool(
            max_children=config.max_children, idle_seconds=config.child_idle_seconds
        )
        self.metrics = PoolMetrics(self.pool)
        self.gate = gate if gate is not None else build_gate(config, self.metrics)
        self.metrics_access = MetricsAccess(config.metrics_access)
        if caller_key is None:
            caller_key = identity_key if self.gate.enabled else client_address
        self._caller_key = caller_key
        self.budget = BodyBudget(
            limit_bytes=config.max_inflight_bytes, max_body_bytes=config.max_body_bytes
        )
        self.failed = False
        """Never set: one child's crash loop ends that child, not the adapter."""
        self._reaper: asyncio.Task[None] | None = None
        self._stopping: set[asyncio.Task[None]] = set()
        self._starting: dict[str, asyncio.Event] = {}
        """2026-07-28 callers whose child is being spawned: their other requests wait for it."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            path = scope["path"]
            if path == self.config.path or path == self.config.path + "/":
                await self._mcp(scope, receive, send)
            elif path == "/healthz" or path == "/readyz":
                await self._health(path, send)
            elif path == "/metrics":
                await self.metrics_access.serve(scope, send, self.metrics.exposition)
            elif not await self.gate.serve_metadata(path, send):
                await respond_plain(send, 404, b"Not Found")
        elif kind == "lifespan":
            await serve_lifespan(receive, send, start=self.start, stop=self.stop)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        await self.gate.prepare()
        if self._reaper is None:
            self._reaper = asyncio.create_task(self._reap_idle(), name="adapter-child-reaper")

    def close_streams(self) -> None:
        """Begin shutdown: end every child's session streams."""
        for slot in self.pool:
            if slot.child is not None:
                slot.child.core.close_streams()

    async def stop(self) -> None:
        """Stop every child (each one's process group, SIGTERM then SIGKILL)."""
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        slots = self.pool.clear()
        await asyncio.gather(*(self._stop_child(slot) for slot in slots))
        if self._stopping:
            await asyncio.gather(*self._stopping, return_exceptions=True)

    async def _reap_idle(self) -> None:
        while True:
            await asyncio.sleep(_REAP_PERIOD_SECONDS)
            now = time.monotonic()
            for slot in self.pool.expire(now):
                self._reap(slot, "idle")
            for slot in list(self.pool):
                if not slot.spawning and slot.open_requests == 0 and self._ended(slot):
                    self.pool.release(slot)
                    self._reap(slot, "exited")

    def _ended(self, slot: ChildSlot) -> bool:
        """Whether the slot's child can serve no more: it died, or its session is gone."""
        child: Child | None = slot.child
        if child is None:
            return True
        core = child.core
        if core.failed or not core.alive:
            return True
        if slot.key.startswith(SESSION_KEY):
            return core.sessions.get(slot.key[len(SESSION_KEY) :], time.monotonic()) is None
        return False

    def _reap(self, slot: ChildSlot, reason: str) -> None:
        """Stop a dropped slot's child in the background (its process group is killed)."""
        self.metrics.reaped.labels(reason).inc()
        logger.debug("Reaped a child (%s): %s", reason, slot.key or slot.id)
        task = asyncio.create_task(self._stop_child(slot))
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    async def _stop_child(self, slot: ChildSlot) -> None:
        child: Child | None = slot.child
        slot.child = None
        if child is not None:
            await child.core.stop()
            self.metrics.retire(child.core)

    # ------------------------------------------------------------------ requests

    async def _mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = request_headers(scope)
        if await self.policy.refused(headers, send):
            return
        if await self.gate.admit(scope, headers, send) is None:
            return  # refused (401/403) before any child is looked up or spawned
        now = time.monotonic()
        if is_modern(headers.get(b"mcp-protocol-version")):
            if scope["method"] != "POST":  # the stateless endpoint's answer, without a child
                await respond_plain(send, 405, b"Method Not Allowed", [(b"allow", b"POST")])
                return
            key = CALLER_KEY + pool_caller(self._caller_key, scope, headers)
            starting = self._starting.get(key)
            if starting is not None:
                await starting.wait()
            slot = self.pool.get(key, now)
            if slot is None:
                self._starting[key] = done = asyncio.Event()
                try:
                    # fair shares by who asks (the caller key), not by the name it gives
                    slot = await self._spawn(self._caller_key(scope, headers), send, None)
                    if slot is not None:
                        self.pool.bind(slot, key, time.monotonic())
                finally:
                    del self._starting[key]
                    done.set()
                if slot is None:
                    return
            await self._serve(slot, scope, receive, send, reap_on_disconnect=True)
            return
        session_id = headers.get(b"mcp-session-id")
        method = scope["method"]
        if session_id is not None:
            slot = self.pool.get(SESSION_KEY + session_id, now)
            if slot is None:
                await self._session_not_found(method, send)
                return
            await self._serve(slot, scope, receive, send)
            if method == "DELETE" and self._ended(slot) and slot.open_requests == 0:
                self.pool.release(slot)
                self._reap(slot, "deleted")
            return
        if method != "POST":
            await respond_plain(send, 400, b"Missing Mcp-Session-Id header")
            return
        await self._initialize(scope, headers, receive, send)

    async def _initialize(
        self, scope: Scope, headers: Headers, receive: Receive, send: Send
    ) -> None:
        """A POST without a session: an ``initialize`` gets a child of its own. Its body is
        admitted against the shared byte budget while it is read and its child spawns; then
        the child's front admits it as any other."""
        budget = self.budget
        cost = budget.cost(headers.get(b"content-length"))
        if cost is None:
            await respond_plain(send, 413, b"Request body too large")
            return
        if not budget.reserve(cost):
            await respond_json(send, 503, BUDGET_SPENT, [(b"retry-after", b"1")])
            return
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                budget.release(cost)

        try:
            await self._admitted_initialize(scope, headers, receive, send, release)
        finally:
            release()

    async def _admitted_initialize(
        self,
        scope: Scope,
        headers: Headers,
        receive: Receive,
        send: Send,
        release: Callable[[], None],
    ) -> None:
        try:
            body = await read_body(headers, receive, self.config.max_body_bytes)
        except BodyTooLargeError:
            await respond_plain(send, 413, b"Request body too large")
            return
        except ClientGoneError:
            return
        try:
            message = json.loads(body)
        except (ValueError, RecursionError):
            await respond_json(send, 400, dumps(error_response(None, PARSE_ERROR, "Parse error")))
            return
        if not isinstance(message, dict) or message.get("method") != "initialize":
            request_id = message.get("id") if isinstance(message, dict) else None
            text = "Missing Mcp-Session-Id header"
            await respond_json(send, 400, dumps(error_response(request_id, INVALID_REQUEST, text)))
            return
        slot = await self._spawn(self._caller_key(scope, headers), send, message.get("id"))
        if slot is None:
            return
        session_id: list[str] = []

        async def capture(event: Message) -> None:
            if event["type"] == "http.response.start":
                for name, value in event.get("headers", ()):
                    if name == b"mcp-session-id":
                        session_id.append(value.decode())
            await send(event)

        release()  # the child's front admits the body itself
        await self._serve(slot, scope, _replay(body, receive), capture, spawned=True)
        if session_id:
            self.pool.bind(slot, SESSION_KEY + session_id[0], time.monotonic())
        else:  # initialize was refused: nothing will reach this child again
            self.pool.release(slot)
            self._reap(slot, "refused")

    async def _spawn(self, caller: str, send: Send, request_id: Any) -> ChildSlot | None:
        """A new slot with a ready child, or None after answering 503 (pool full, spawn
        failed or too slow)."""
        try:
            slot, dropped = self.pool.reserve(caller, time.monotonic())
        except PoolFullError:
            self.metrics.pool_refused.inc()
            text = f"All {self.pool.max_children} MCP server processes are busy; retry later"
            await _unavailable(send, request_id, text)
            return None
        for old in dropped:
            self._reap(old, "evicted")
        core = AdapterCore(self._child_config)
        core.metrics = self.metrics
        core.router.sole_caller = True
        slot.child = Child(
            core,
            HttpFront(
                core,
                self._caller_key,
                budget=self.budget,
                gate=self.gate,
                metrics_access=self.metrics_access,
            ),
        )
        started = time.perf_counter()
        await core.start()
        deadline = started + self.config.spawn_timeout_seconds
        while not core.ready and not core.failed and time.perf_counter() < deadline:  # noqa: ASYNC110 - the core has no ready event; bounded by the timeout
            await asyncio.sleep(_READY_POLL_SECONDS)
        if core.ready:
            self.metrics.spawn_seconds.observe(time.perf_counter() - started)
            self.metrics.spawns.labels("ready").inc()
            return slot
        outcome = "failed" if core.failed else "timeout"
        self.metrics.spawns.labels(outcome).inc()
        logger.warning(
            "A new MCP server process did not become ready within %.0fs (%s); stopped it",
            self.config.spawn_timeout_seconds,
            outcome,
        )
        self.pool.release(slot)
        await self._stop_child(slot)
        await _unavailable(send, request_id, "The MCP server did not start in time")
        return None

    async def _serve(
        self,
        slot: ChildSlot,
        scope: Scope,
        receive: Receive,
        send: Send,
        *,
        spawned: bool = False,
        reap_on_disconnect: bool = False,
    ) -> None:
        """Hand a request to the slot's child, the slot busy meanwhile."""
        child: Child | None = slot.child
        if child is None:
            await respond_plain(send, 404, b"Session not found")
            return
        gone = False
        answered = False

        def lost() -> None:
            nonlocal gone
            gone = gone or not answered

        async def watched_receive() -> Message:
            event = await receive()
            if event["type"] == "http.disconnect":
                lost()
            return event

        async def watched_send(event: Message) -> None:
            nonlocal answered
            if event["type"] == "http.response.body" and not event.get("more_body", False):
                answered = True
            await send(event)

        # Told by the server (the child's front may never read the disconnect), or seen here.
        watch = disconnect_watch(scope)
        stop_watching = watch(lost) if watch is not None else None
        slot.open_requests += 1
        slot.spawning = slot.spawning and not spawned
        try:
            await child.front(scope, watched_receive, watched_send)
        finally:
            if stop_watching is not None:
                stop_watching()
            slot.open_requests -= 1
            slot.last_active = time.monotonic()
        if reap_on_disconnect and gone and slot.open_requests == 0 and not slot.closed:
            self.pool.release(slot)
            self._reap(slot, "disconnected")

    def _can_spawn(self) -> bool:
        """Whether a child could be started now: in a managed Pod, once the server
        container's spawn helper listens."""
        directory = self.config.stdio_fifo_dir
        return directory is None or os.path.exists(spawn_socket(directory))

    async def _session_not_found(self, method: str, send: Send) -> None:
        if method == "POST":
            body = dumps(error_response(None, INVALID_REQUEST, "Session not found"))
            await respond_json(send, 404, body)
        else:
            await respond_plain(send, 404, b"Session not found")

    async def _health(self, path: str, send: Send) -> None:
        pool = self.pool
        ok = path == "/healthz" or (pool.can_admit() and self._can_spawn())
        body = {
            "status": "ok" if ok else "unavailable",
            "mode": "perSession",
            "children": len(pool),
            "sessions": sum(
                len(slot.child.core.sessions) for slot in pool if slot.child is not None
            ),
            "limits": {
                "maxChildren": pool.max_children,
                "childrenEvicted": pool.evicted,
                "inflightBytes": self.budget.in_use,
                "maxInflightBytes": self.budget.limit_bytes,
                "refusedForBytes": self.budget.refused,
            },
        }
        await respond_json(send, 200 if ok else 503, dumps(body))


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that yields the body read already once, then the client's own events."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _unavailable(send: Send, request_id: Any, text: str) -> None:
    body = dumps(error_response(request_id, INTERNAL_ERROR, text))
    await respond_json(send, 503, body, [(b"retry-after", b"1")])
