"""The AgentRun controller: every AgentRun this operator watches, each on its own worker.

kopf hands every AgentRun event to :meth:`Runs.observe`, where the body is parsed
into its model (once per generation). This module wires the parts, each of which
owns one job:

- :class:`~mcp_operator.controller.worker.Worker`: when each run is reconciled
  (at once, when woken, again after the delay a pass asks for, with back-off
  while failing);
- :mod:`~mcp_operator.controller.agentrun.reconcile`: what one pass does;
- :mod:`~mcp_operator.controller.agentrun.status`: what status says (pure);
- :class:`~mcp_operator.controller.status_writer.StatusWriter`: writing it and
  posting Events on transitions;
- the wake index here: which runs a change of an MCPServer (its creation, its
  status, its access list) or of a run's Pod wakes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp_operator.api import AgentRun
from mcp_operator.controller.agentrun import reconcile, resolve
from mcp_operator.controller.agentrun.status import events
from mcp_operator.controller.conditions import WantedCondition, merge
from mcp_operator.controller.events import ObjectRef
from mcp_operator.controller.metrics import OperatorMetrics, count_ready
from mcp_operator.controller.parsing import InvalidSpec, parse
from mcp_operator.controller.settings import AgentRunSettings
from mcp_operator.controller.status_writer import StatusWriter
from mcp_operator.controller.worker import Clock, Next, Worker
from mcp_operator.kube import AGENTRUNS, Kube, NotFound

logger = logging.getLogger(__name__)

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


@dataclass
class _Run:
    """What the controller keeps of one AgentRun between its reconciles."""

    parsed: AgentRun | InvalidSpec
    ref: ObjectRef
    status: Mapping[str, Any] | None


class Runs:
    """Every AgentRun this operator watches, each with its own worker."""

    def __init__(
        self,
        kube: Kube,
        settings: AgentRunSettings | None = None,
        *,
        clock: Clock | None = None,
        metrics: OperatorMetrics | None = None,
    ) -> None:
        self.kube = kube
        self.settings = settings or AgentRunSettings()
        self.metrics = metrics or OperatorMetrics()
        self._worker: Worker[_Run] = Worker(
            self._reconcile,
            self.settings.schedule,
            kind="AgentRun",
            describe=lambda run: str(run.ref),
            clock=clock,
            on_end=self._ended,
            observe_wait=self.metrics.queue_waited("AgentRun"),
        )
        self.metrics.watch(
            "AgentRun",
            states=lambda: count_ready(run.status for run in self._worker.items()),
            queue_depth=lambda: self._worker.limit.waiting,
        )
        self._status = StatusWriter(
            kube, AGENTRUNS, events, stamp={"admission": self.settings.admission}
        )
        self._servers: dict[str, frozenset[resolve.ServerKey]] = {}
        """Run uid → the MCPServers it references (a change of one wakes the run)."""

    # -- kopf side -------------------------------------------------------------------

    def observe(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """Take one AgentRun watch event: start, wake or stop its worker."""
        metadata = body.get("metadata") or {}
        uid = metadata.get("uid")
        if not uid:
            return
        if event_type == "DELETED" or metadata.get("deletionTimestamp"):
            self._worker.forget(uid)
            return
        known = self._worker.get(uid)
        if known is None:
            entry = self._entry(body)
            self._track(uid, entry.parsed)
            self._worker.start(uid, entry)
            return
        known.ref = ObjectRef.of(body)
        if metadata.get("generation") != known.parsed.metadata.generation:
            known.parsed = self._entry(body).parsed
            self._track(uid, known.parsed)
            self._worker.wake(uid, changed=True)

    def server_changed(self, namespace: str, name: str) -> None:
        """Reconcile now every run that references MCPServer ``namespace/name``."""
        for uid, servers in list(self._servers.items()):
            if (namespace, name) in servers:
                self._worker.wake(uid, changed=True)

    def pod_changed(self, body: Mapping[str, Any]) -> None:
        """Reconcile the run that owns this Pod (its phase decides the run's status)."""
        for owner in (body.get("metadata") or {}).get("ownerReferences") or ():
            if owner.get("kind") == "AgentRun" and owner.get("controller"):
                self._worker.wake(str(owner.get("uid")))

    async def stop(self) -> None:
        await self._worker.stop()

    def __len__(self) -> int:
        return len(self._worker)

    def _track(self, uid: str, parsed: AgentRun | InvalidSpec) -> None:
        """Remember which MCPServers the run references (an invalid run references none)."""
        keys = resolve.keys(parsed) if isinstance(parsed, AgentRun) else []
        self._servers[uid] = frozenset(keys)

    def _ended(self, uid: str) -> None:
        self._servers.pop(uid, None)

    def _entry(self, body: Mapping[str, Any]) -> _Run:
        parsed = parse(AgentRun, body)
        if isinstance(parsed, InvalidSpec):
            logger.warning(
                "AgentRun %s/%s is invalid: %s",
                parsed.metadata.namespace,
                parsed.metadata.name,
                parsed.message,
            )
        return _Run(parsed, ObjectRef.of(body), body.get("status"))

    # -- one run -----------------------------------------------------------------------

    async def _reconcile(self, run: _Run) -> Next:
        started = time.monotonic()
        written: Mapping[str, Any] | None = None  # None: the status could not be written
        try:
            asked = await self._reconcile_once(run)
            written = None if asked.failed else run.status
            return asked
        except NotFound:
            written = run.status  # deleted after its TTL, or gone: not a failure
            raise
        finally:
            self.metrics.reconciled("AgentRun", written, time.monotonic() - started)

    async def _reconcile_once(self, run: _Run) -> Next:
        now = self._worker.clock.now()
        parsed = run.parsed
        if isinstance(parsed, InvalidSpec):
            wanted = [WantedCondition("Ready", "False", "InvalidSpec", parsed.message)]
            patch: dict[str, Any] = {
                "observedGeneration": parsed.metadata.generation,
                "conditions": merge(
                    (run.status or {}).get("conditions"),
                    wanted,
                    now=now.strftime(TIME_FORMAT),
                    generation=parsed.metadata.generation,
                ),
            }
            written = await self._status.write(run.ref, run.status, patch)
            if written is not None:
                run.status = written
            return Next(None, failed=written is None)
        done = await reconcile.reconcile(
            self.kube, parsed, dict(run.status or {}), self.settings.render, now=now
        )
        written = await self._status.write(run.ref, run.status, done.patch)
        if written is None:
            return Next(None, failed=True)
        run.status = written
        if done.delete:
            logger.info(
                "Deleting AgentRun %s: finished more than ttlSecondsAfterFinished ago", run.ref
            )
            await self.kube.delete(AGENTRUNS, run.ref.namespace, run.ref.name)
            raise NotFound(404, "deleted after ttlSecondsAfterFinished")
        return Next(done.delay)
