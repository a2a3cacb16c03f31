"""The MCPServer fleet: one asyncio worker per MCPServer that probes on its own schedule.

kopf tells us about every MCPServer event (:meth:`Fleet.observe`); this module
owns what happens next. Each object gets a worker task that reconciles it at
once, then again every ``spec.probe.intervalSeconds`` (with jitter), sooner
when the spec changes (a new ``metadata.generation`` wakes the worker), and
with doubling, capped back-off while the probe fails. Probes of all servers run
concurrently under one global limit, and nothing here blocks the event loop.
A server that advertises ``tools.listChanged`` also gets a listener that wakes
its worker when the server announces a new tool list (bounded in number).

Why not kopf daemons or timers: both need a finalizer per object (kopf's
daemons must be stopped before deletion), and a finalizer is for state that
garbage collection cannot reach; an in-memory schedule needs none. Why not
kopf's change handlers: they persist progress in annotations (an extra write
per change) and would re-run on every status patch we make.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp_operator.controller.mcpserver import reconcile
from mcp_operator.controller.mcpserver.render import RenderSettings
from mcp_operator.controller.mcpserver.status import events, status_patch
from mcp_operator.kube import MCPSERVERS, Kube, KubeError, NotFound
from mcp_operator.mcp.errors import ProbeError
from mcp_operator.mcp.target import ProbeTarget
from mcp_operator.mcp.watch import watch_tools

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FleetSettings:
    """How often and how many: the knobs of the probe schedule."""

    max_concurrent_probes: int = 64
    """Probes running at once across all servers; the rest wait their turn."""
    initial_backoff_seconds: float = 5.0
    """First retry delay after a failed probe; doubles on each further failure."""
    max_backoff_seconds: float = 300.0
    """Cap of the retry delay (also capped by the server's own interval)."""
    jitter: float = 0.1
    """Relative spread of the regular interval, so that servers created together drift apart."""
    max_listeners: int = 256
    """Servers listened to at once for ``tools/list_changed`` (each holds one connection);
    the others are re-probed on their timer only. 0 turns listening off."""
    render: RenderSettings = field(default_factory=RenderSettings)
    """How managed servers' children are rendered (adapter image, cluster domain)."""


@dataclass
class _Entry:
    body: Mapping[str, Any]
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    status: Mapping[str, Any] | None = None
    failures: int = 0
    seen_generation: int | None = None
    secrets: frozenset[str] = frozenset()
    """Names of the Secrets the spec references (their change wakes the worker)."""
    listener: asyncio.Task[None] | None = None
    """The ``tools/list_changed`` listener, while one runs."""
    deployment_state: tuple[Any, ...] | None = None
    """The rollout state of a managed server's Deployment when it last woke the worker."""


class Fleet:
    """Every MCPServer this operator watches, each with its own worker."""

    def __init__(
        self,
        kube: Kube,
        settings: FleetSettings | None = None,
        *,
        clock: Callable[[], datetime.datetime] | None = None,
    ) -> None:
        self.kube = kube
        self.settings = settings or FleetSettings()
        self._entries: dict[str, _Entry] = {}
        self._probe_slots = asyncio.Semaphore(self.settings.max_concurrent_probes)
        self._clock = clock or (lambda: datetime.datetime.now(datetime.UTC))

    # -- kopf side -------------------------------------------------------------------

    def observe(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """Take one watch event: start, wake or stop the object's worker."""
        uid = body.get("metadata", {}).get("uid")
        if not uid:
            return
        if event_type == "DELETED" or body.get("metadata", {}).get("deletionTimestamp"):
            self._forget(uid)
            return
        entry = self._entries.get(uid)
        generation = body.get("metadata", {}).get("generation")
        if entry is None:
            entry = _Entry(body=body, status=body.get("status"), seen_generation=generation)
            entry.secrets = referenced_secrets(body)
            self._entries[uid] = entry
            entry.task = asyncio.create_task(self._worker(uid, entry), name=f"mcpserver-{uid}")
            return
        entry.body = body
        if generation != entry.seen_generation:
            entry.seen_generation = generation
            entry.secrets = referenced_secrets(body)
            entry.failures = 0
            _cancel(entry.listener)  # the target may have changed; the next probe re-arms it
            entry.wake.set()

    def deployment_changed(self, uid: str, state: tuple[Any, ...]) -> None:
        """Reconcile a managed server now if its Deployment's rollout state moved.

        ``state`` is what the ``Deployed`` condition depends on (observed generation,
        replica counts); other status writes of the Deployment controller do not wake.
        """
        entry = self._entries.get(uid)
        if entry is not None and state != entry.deployment_state:
            entry.deployment_state = state
            entry.wake.set()

    def secret_changed(self, namespace: str, name: str) -> None:
        """Reconcile now every server in ``namespace`` that references Secret ``name``."""
        for entry in self._entries.values():
            if name in entry.secrets and entry.body["metadata"].get("namespace") == namespace:
                entry.failures = 0
                _cancel(entry.listener)  # it may hold a rotated-out credential
                entry.wake.set()

    async def stop(self) -> None:
        """Cancel every worker and listener and wait for them to end."""
        tasks = [
            task
            for e in self._entries.values()
            for task in (e.task, e.listener)
            if task is not None
        ]
        self._entries.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def __len__(self) -> int:
        return len(self._entries)

    def _forget(self, uid: str) -> None:
        entry = self._entries.pop(uid, None)
        if entry is not None:
            _cancel(entry.task)
            _cancel(entry.listener)

    # -- worker ----------------------------------------------------------------------

    async def _worker(self, uid: str, entry: _Entry) -> None:
        try:
            while True:
                entry.wake.clear()
                try:
                    delay = await self._reconcile(entry)
                except NotFound:
                    return  # the MCPServer is gone; its next event (if any) starts anew
                except Exception:
                    logger.exception(
                        "Reconcile of MCPServer %s failed unexpectedly", _name(entry.body)
                    )
                    entry.failures += 1
                    delay = self._backoff(entry)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(entry.wake.wait(), timeout=delay)
        finally:
            # A worker that ends for any reason leaves no entry behind: the next event of
            # the object (if it still exists) starts a new one instead of waking a dead one.
            if self._entries.get(uid) is entry:
                del self._entries[uid]
                _cancel(entry.listener)

    async def _reconcile(self, entry: _Entry) -> float | None:
        body = entry.body
        result = await reconcile.mcpserver(
            self.kube, body, probe_slots=self._probe_slots, render_settings=self.settings.render
        )
        now = self._clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        metadata = body["metadata"]
        patch = status_patch(
            entry.status,
            result.outcome,
            generation=metadata.get("generation"),
            url=result.url,
            now=now,
        )
        try:
            updated = await self.kube.patch_status(
                MCPSERVERS, metadata["namespace"], metadata["name"], patch
            )
        except KubeError as error:
            if error.status == 404:
                raise NotFound(404, str(error)) from None
            logger.warning("Could not write status of MCPServer %s: %s", _name(body), error)
            entry.failures += 1
            return self._backoff(entry)
        old_status, entry.status = entry.status, (updated or {}).get("status") or patch
        await self._post_events(body, old_status, entry.status)
        if result.outcome.kind == "failed":
            entry.failures += 1
            return min(self._backoff(entry), result.interval or self.settings.max_backoff_seconds)
        entry.failures = 0
        if result.watch is not None:
            self._listen(entry, result.watch, max_seconds=result.interval or 300.0)
        if result.outcome.kind == "probed" and result.interval:
            spread = result.interval * self.settings.jitter
            return result.interval + random.uniform(-spread, spread)
        return result.interval  # None: wait for a spec change

    def _listen(self, entry: _Entry, target: ProbeTarget, *, max_seconds: float) -> None:
        """Start a ``tools/list_changed`` listener for a server unless one runs (or too many)."""
        if entry.listener is not None:
            return
        running = sum(1 for e in self._entries.values() if e.listener is not None)
        if running >= self.settings.max_listeners:
            return
        entry.listener = asyncio.create_task(self._listener(entry, target, max_seconds))

    async def _listener(self, entry: _Entry, target: ProbeTarget, max_seconds: float) -> None:
        try:
            if await watch_tools(target, max_seconds=max_seconds):
                logger.info("MCPServer %s announced a new tool list", _name(entry.body))
                entry.wake.set()
        except ProbeError as error:
            logger.debug("Stopped listening to MCPServer %s: %s", _name(entry.body), error)
        finally:
            if entry.listener is asyncio.current_task():
                entry.listener = None

    def _backoff(self, entry: _Entry) -> float:
        exponent = min(max(entry.failures - 1, 0), 30)
        delay = self.settings.initial_backoff_seconds * float(2**exponent)
        return min(delay, self.settings.max_backoff_seconds)

    async def _post_events(
        self, body: Mapping[str, Any], old: Mapping[str, Any] | None, new: Mapping[str, Any]
    ) -> None:
        found = events(old, new)
        for event in found:
            log = logger.warning if event.type == "Warning" else logger.info
            log("MCPServer %s: %s: %s", _name(body), event.reason, event.message)
        await asyncio.gather(
            *(
                self.kube.post_event(body, type_=e.type, reason=e.reason, message=e.message)
                for e in found
            )
        )


def _cancel(task: asyncio.Task[None] | None) -> None:
    if task is not None:
        task.cancel()


def referenced_secrets(body: Mapping[str, Any]) -> frozenset[str]:
    """Secret names referenced by ``spec.headers`` and ``spec.deployment.env``."""
    spec = body.get("spec") or {}
    refs = [*(spec.get("headers") or []), *((spec.get("deployment") or {}).get("env") or [])]
    names = set()
    for ref in refs:
        secret = ((ref or {}).get("valueFrom") or {}).get("secretKeyRef") or {}
        if secret.get("name"):
            names.add(secret["name"])
    return frozenset(names)


def _name(body: Mapping[str, Any]) -> str:
    metadata = body.get("metadata", {})
    return f"{metadata.get('namespace')}/{metadata.get('name')}"
