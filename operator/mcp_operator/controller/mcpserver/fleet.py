"""The MCPServer fleet: every MCPServer this operator watches, each on its own worker.

kopf hands every MCPServer event to :meth:`Fleet.observe`, where the body is
parsed into its model (once per generation); the model flows down to the
reconcile. This module wires the parts, each of which owns one job:

- :class:`~mcp_operator.controller.worker.Worker`: when each server is
  reconciled (at once, on its probe interval with jitter, with back-off while
  failing, sooner when woken) and how many probes run at once;
- :mod:`~mcp_operator.controller.mcpserver.reconcile`: what one reconcile
  does and decides;
- :mod:`~mcp_operator.controller.mcpserver.status`: what status says (pure);
- :class:`~mcp_operator.controller.status_writer.StatusWriter`: writing it
  and posting Events on transitions;
- :mod:`~mcp_operator.controller.mcpserver.wake`: which Secret or Deployment
  change wakes which server;
- :mod:`~mcp_operator.controller.mcpserver.listeners`: listening for
  ``tools/list_changed`` on servers that advertise it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp_operator.api import MCPServer
from mcp_operator.controller.events import ObjectRef
from mcp_operator.controller.mcpserver import reconcile
from mcp_operator.controller.mcpserver.listeners import Listeners
from mcp_operator.controller.mcpserver.status import events, remembered, status_patch
from mcp_operator.controller.mcpserver.wake import RolloutState, WakePolicy
from mcp_operator.controller.metrics import OperatorMetrics, count_ready
from mcp_operator.controller.parsing import InvalidSpec, parse
from mcp_operator.controller.settings import FleetSettings
from mcp_operator.controller.status_writer import StatusWriter
from mcp_operator.controller.worker import Clock, Next, Worker
from mcp_operator.kube import MCPSERVERS, Kube
from mcp_operator.oci.client import RegistryClient

logger = logging.getLogger(__name__)

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


@dataclass
class _Server:
    """What the fleet keeps of one MCPServer between its reconciles."""

    parsed: MCPServer | InvalidSpec
    ref: ObjectRef
    status: Mapping[str, Any] | None
    """What the next patch needs of the status as last written (or as it arrived):
    :func:`~mcp_operator.controller.mcpserver.status.remembered`."""


class Fleet:
    """Every MCPServer this operator watches, each with its own worker."""

    def __init__(
        self,
        kube: Kube,
        settings: FleetSettings | None = None,
        *,
        clock: Clock | None = None,
        metrics: OperatorMetrics | None = None,
    ) -> None:
        self.kube = kube
        self.settings = settings or FleetSettings()
        self.metrics = metrics or OperatorMetrics()
        self._worker: Worker[_Server] = Worker(
            self._reconcile,
            self.settings.schedule,
            kind="MCPServer",
            describe=lambda server: str(server.ref),
            clock=clock,
            on_end=self._ended,
            observe_wait=self.metrics.queue_waited("MCPServer"),
        )
        self.metrics.watch(
            "MCPServer",
            states=lambda: count_ready(server.status for server in self._worker.items()),
            queue_depth=lambda: self._worker.limit.waiting,
        )
        self._wake = WakePolicy()
        self._listeners = Listeners(self.settings.listeners)
        self._status = StatusWriter(
            kube, MCPSERVERS, events, stamp={"admission": self.settings.admission}
        )
        self._registry = RegistryClient(self.settings.registry)

    # -- kopf side -------------------------------------------------------------------

    def observe(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """Take one watch event: start, wake or stop the object's worker."""
        metadata = body.get("metadata") or {}
        uid = metadata.get("uid")
        if not uid:
            return
        if event_type == "DELETED" or metadata.get("deletionTimestamp"):
            self._worker.forget(uid)
            return
        known = self._worker.get(uid)
        if known is None:
            parsed = self._parse(body)
            self._wake.track(uid, parsed)
            status = remembered(body.get("status"))
            self._worker.start(uid, _Server(parsed, ObjectRef.of(body), status))
            return
        known.ref = ObjectRef.of(body)
        if metadata.get("generation") != known.parsed.metadata.generation:
            # The API server bumps the generation on every change of the spec, and only then.
            known.parsed = self._parse(body)
            self._wake.track(uid, known.parsed)
            self._listeners.stop(uid)  # the target may have changed; the next probe re-arms it
            self._worker.wake(uid, changed=True)

    def deployment_changed(self, uid: str, state: RolloutState) -> None:
        """Reconcile a managed server now if its Deployment's rollout state moved."""
        if self._wake.woken_by_rollout(uid, state):
            self._worker.wake(uid)

    def secret_changed(self, namespace: str, name: str) -> None:
        """Reconcile now every server in ``namespace`` that references Secret ``name``."""
        for uid in self._wake.woken_by_secret(namespace, name):
            self._listeners.stop(uid)  # it may hold a rotated-out credential
            self._worker.wake(uid, changed=True)

    async def stop(self) -> None:
        """Cancel every worker and listener and wait for them to end."""
        await self._listeners.stop_all()
        await self._worker.stop()
        await self._registry.aclose()

    def __len__(self) -> int:
        return len(self._worker)

    def _parse(self, body: Mapping[str, Any]) -> MCPServer | InvalidSpec:
        # Without the status: the fleet keeps what it needs of that apart (``remembered``),
        # and a parsed tool list per server would be most of the fleet's memory.
        parsed = parse(MCPServer, {key: value for key, value in body.items() if key != "status"})
        if isinstance(parsed, InvalidSpec):
            logger.warning(
                "MCPServer %s/%s is invalid: %s",
                parsed.metadata.namespace,
                parsed.metadata.name,
                parsed.message,
            )
        return parsed

    def _ended(self, uid: str) -> None:
        self._wake.forget(uid)
        self._listeners.stop(uid)

    # -- one run -----------------------------------------------------------------------

    async def _reconcile(self, server: _Server) -> Next:
        started = time.monotonic()
        written: Mapping[str, Any] | None = None
        try:
            written, asked = await self._reconcile_once(server)
        finally:
            self.metrics.reconciled("MCPServer", written, time.monotonic() - started)
        return asked

    async def _reconcile_once(self, server: _Server) -> tuple[Mapping[str, Any] | None, Next]:
        # One slot covers the probe and the status patch that reports it: a probe's result
        # waits in memory for the patch, so when the API server is the slower side, probes
        # wait for patches instead of a fleet's worth of results piling up in the operator.
        # The change's Events (a few hundred bytes each) are posted after the slot is free.
        previous = server.status
        async with self._worker.limit:
            result = await reconcile.mcpserver(
                self.kube,
                server.parsed,
                probe_slots=contextlib.nullcontext(),  # held already
                render_settings=self.settings.render,
                registry=self._registry,
                egress_settings=self.settings.egress,
            )
            written = await self._write(server, result)
        if written is None:
            return None, Next(None, failed=True)
        await self._status.announce(server.ref, previous, written)
        if result.outcome.kind == "failed":
            return written, Next(result.interval, failed=True)
        if result.watch is not None:
            uid = server.ref.uid
            self._listeners.listen(
                uid,
                result.watch,
                max_seconds=result.interval or 300.0,
                name=str(server.ref),
                on_change=lambda: self._worker.wake(uid),
            )
        return written, Next(result.interval)

    async def _write(self, server: _Server, result: reconcile.Result) -> Mapping[str, Any] | None:
        """Patch the status the result calls for; the status as written, or ``None`` (its
        Events are the caller's to announce)."""
        parsed = server.parsed
        patch = status_patch(
            server.status,
            result.outcome,
            generation=parsed.metadata.generation,
            url=result.url,
            now=self._worker.clock.now().strftime(TIME_FORMAT),
        )
        if result.probe_seconds is not None:
            probed = result.outcome.kind == "probed"
            reason = result.outcome.reason
            if probed:
                warned = bool(result.outcome.warnings)
                reason = "ToolsDiscoveredWithWarnings" if warned else "ToolsDiscovered"
            self.metrics.probed(probed, reason, result.probe_seconds)
        written = await self._status.patch(server.ref, patch)
        if written is not None:
            server.status = remembered(written)
        return written
