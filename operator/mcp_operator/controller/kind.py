"""The controller of one kind: what MCPServer and AgentRun share, from watch event to status.

kopf hands every event of a kind to :meth:`KindController.observe`. This module owns what
is the same for every kind, so that each kind (the MCPServer
:class:`~mcp_operator.controller.mcpserver.fleet.Fleet`, the AgentRun
:class:`~mcp_operator.controller.agentrun.runs.Runs`) keeps only its reconcile, its wake
index and its status decisions:

- **observe**: a new object starts its worker; a new generation is parsed again and wakes
  it at once, its back-off started over (the API server bumps the generation on every
  change of the spec, and only then: the echoes of our own status writes are not parsed
  again); a deleted object, or one being deleted, stops it;
- **parse once per generation** (and when an annotation the kind names as an input changes,
  :attr:`KindController.inputs_in_annotations`), through the kind's
  :meth:`KindController.parse` (which
  says what of the body the model gets);
- **InvalidSpec**, the same for every kind: an object that does not parse is logged
  once, its status says ``Ready=False, reason=InvalidSpec`` and why
  (:func:`~mcp_operator.controller.conditions.invalid_spec`), the kind's reconcile is
  not called, and nothing happens until a new generation;
- **the worker** (:class:`~mcp_operator.controller.worker.Worker`: when each object is
  reconciled), **the metrics** (each reconcile's outcome and duration, objects by their
  Ready status, the queue depth) and **the status writer**
  (:class:`~mcp_operator.controller.status_writer.StatusWriter`), wired once;
- **the end of an object**: its worker stops and the kind's wake index forgets it
  (:meth:`KindController.ended`), whether it was deleted, vanished (a status write
  answered 404) or deleted by the controller itself (:meth:`KindController.delete`,
  whose :class:`~mcp_operator.controller.worker.Next` ends the worker: a return value,
  not an exception).

Memory per object is what the fleet of 10,000 servers was tuned for: one :class:`Known`
(slotted: the parsed model, the object's reference, the status as the kind remembers it)
next to the worker's entry and its one task. Nothing here adds a task or a closure per
object.
"""

from __future__ import annotations

import abc
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from mcp_operator import tracing
from mcp_operator.api import ObjectMeta
from mcp_operator.controller.conditions import invalid_spec, merge, timestamp
from mcp_operator.controller.events import ObjectRef
from mcp_operator.controller.metrics import OperatorMetrics, count_ready
from mcp_operator.controller.parsing import InvalidSpec
from mcp_operator.controller.settings import ScheduleSettings
from mcp_operator.controller.slots import Slots
from mcp_operator.controller.status_writer import StatusWriter, Transitions
from mcp_operator.controller.worker import Clock, Next, Worker
from mcp_operator.kube import Kube, Resource

logger = logging.getLogger(__name__)


class Parsed(Protocol):
    """A kind's model, as far as this module reads it."""

    @property
    def metadata(self) -> ObjectMeta: ...


M = TypeVar("M", bound=Parsed)

Reconciled = tuple[Mapping[str, Any] | None, Next]
"""What one reconcile wrote (the status as stored; ``None``: it could not be written, which
the metrics count as an error) and what it asks of the schedule."""


@dataclass(slots=True)
class Known(Generic[M]):
    """What a controller keeps of one object between its reconciles."""

    parsed: M | InvalidSpec
    """The object parsed at its current generation."""
    ref: ObjectRef
    """Who it is, as of its last event."""
    status: Mapping[str, Any] | None
    """Its status as last written (or as it arrived), as much as the kind keeps of it
    (:meth:`KindController.remember`)."""


def _describe(known: Known[Any]) -> str:
    return str(known.ref)


class KindController(abc.ABC, Generic[M]):
    """Every object of one kind that this operator watches, each on its own worker."""

    inputs_in_annotations: tuple[str, ...] = ()
    """Annotations that are inputs of the reconcile like the spec (a change of one is parsed
    again and wakes the object, though the generation stays)."""

    def __init__(
        self,
        kube: Kube,
        *,
        kind: str,
        resource: Resource,
        transitions: Transitions,
        schedule: ScheduleSettings,
        clock: Clock | None = None,
        metrics: OperatorMetrics | None = None,
        stamp: Mapping[str, Any] | None = None,
    ) -> None:
        """``stamp``: status fields written with every status patch (which admission layer
        applied, say)."""
        self.kube = kube
        self.kind = kind
        self.resource = resource
        self.metrics = metrics or OperatorMetrics()
        self._worker: Worker[Known[M]] = Worker(
            self._reconcile,
            schedule,
            kind=kind,
            describe=_describe,
            clock=clock,
            on_end=self.ended,
            observe_wait=self.metrics.queue_waited(kind),
        )
        self.metrics.watch(
            kind,
            states=lambda: count_ready(known.status for known in self._worker.items()),
            queue_depth=lambda: self._worker.limit.waiting,
        )
        self._status = StatusWriter(kube, resource, transitions, stamp=stamp)

    # -- what each kind supplies ---------------------------------------------------------

    @abc.abstractmethod
    def parse(self, body: Mapping[str, Any]) -> M | InvalidSpec:
        """The object's model (:func:`~mcp_operator.controller.parsing.parse`), or why its
        spec is invalid."""

    @abc.abstractmethod
    async def reconcile_object(self, known: Known[M], parsed: M) -> Reconciled:
        """Reconcile one valid object once and write its status (:meth:`write`)."""

    def track(self, uid: str, parsed: M | InvalidSpec, *, new: bool) -> None:
        """Index what the object references, for the kind's wake-ups; called when it
        arrives (``new``) and on every new generation."""

    def ended(self, uid: str) -> None:
        """The object's worker ended (deleted, gone, or ended by its run): forget it."""

    def remember(self, status: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        """What to keep of a status between reconciles (all of it, unless the kind says)."""
        return status

    # -- kopf side -----------------------------------------------------------------------

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
            self.track(uid, parsed, new=True)
            status = self.remember(body.get("status"))
            self._worker.start(uid, Known(parsed, ObjectRef.of(body), status))
            return
        known.ref = ObjectRef.of(body)
        annotations = metadata.get("annotations") or {}
        before = known.parsed.metadata.annotations or {}
        if metadata.get("generation") != known.parsed.metadata.generation or any(
            annotations.get(key) != before.get(key) for key in self.inputs_in_annotations
        ):
            known.parsed = self._parse(body)
            self.track(uid, known.parsed, new=False)
            self._worker.wake(uid, changed=True)

    def wake(self, uid: str, *, changed: bool = False) -> None:
        """Reconcile the object now; ``changed`` (an input changed) also starts its back-off
        over."""
        self._worker.wake(uid, changed=changed)

    async def stop(self) -> None:
        """Cancel every worker and wait for them to end."""
        await self._worker.stop()

    def __len__(self) -> int:
        return len(self._worker)

    def known(self) -> list[Known[M]]:
        """Every object with a worker, as last seen."""
        return list(self._worker.items())

    # -- for the kind's reconcile --------------------------------------------------------

    @property
    def limit(self) -> Slots:
        """The global concurrency limit of this kind's reconciles (the probe slots)."""
        return self._worker.limit

    @property
    def clock(self) -> Clock:
        return self._worker.clock

    def now(self) -> str:
        """The time to put into status, now."""
        return timestamp(self._worker.clock.now())

    async def write(self, known: Known[M], patch: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """Patch the status, remember it and post the Events of the change; the status as
        stored, or ``None`` when the write failed (logged). Raises
        :class:`~mcp_operator.kube.NotFound` when the object is gone (its worker ends)."""
        previous = known.status
        written = await self.patch(known, patch)
        if written is not None:
            await self.announce(known, previous, written)
        return written

    async def patch(self, known: Known[M], patch: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """Only the patch of :meth:`write` (and remembering it): the Events are the caller's
        to :meth:`announce`, when it no longer holds a slot."""
        written = await self._status.patch(known.ref, patch)
        if written is not None:
            known.status = self.remember(written)
        return written

    async def announce(
        self, known: Known[M], previous: Mapping[str, Any] | None, written: Mapping[str, Any]
    ) -> None:
        """Post the Events that the change from ``previous`` to ``written`` deserves."""
        await self._status.announce(known.ref, previous, written)

    async def delete(self, known: Known[M], why: str) -> Next:
        """Delete the object (its children follow by garbage collection); what to return to
        the schedule, which then ends the object's worker."""
        logger.info("Deleting %s %s: %s", self.kind, known.ref, why)
        await self.kube.delete(self.resource, known.ref.namespace, known.ref.name)
        return Next(None, ended=True)

    # -- one reconcile -------------------------------------------------------------------

    def _parse(self, body: Mapping[str, Any]) -> M | InvalidSpec:
        parsed = self.parse(body)
        if isinstance(parsed, InvalidSpec):
            logger.warning(
                "%s %s/%s is invalid: %s",
                self.kind,
                parsed.metadata.namespace,
                parsed.metadata.name,
                parsed.message,
            )
        return parsed

    async def _reconcile(self, known: Known[M]) -> Next:
        started = time.monotonic()
        written: Mapping[str, Any] | None = None
        ref = known.ref
        try:
            with tracing.internal(
                f"reconcile {self.kind}", k8s_namespace_name=ref.namespace, k8s_object_name=ref.name
            ):
                parsed = known.parsed
                if isinstance(parsed, InvalidSpec):
                    written, asked = await self._invalid(known, parsed)
                else:
                    written, asked = await self.reconcile_object(known, parsed)
        finally:
            self.metrics.reconciled(self.kind, written, time.monotonic() - started)
        return asked

    async def _invalid(self, known: Known[M], invalid: InvalidSpec) -> Reconciled:
        """Say why the spec is invalid; wait for a new generation (or retry a failed write)."""
        generation = invalid.metadata.generation
        conditions = merge(
            (known.status or {}).get("conditions"),
            [invalid_spec(invalid.message)],
            now=self.now(),
            generation=generation,
        )
        written = await self.write(
            known, {"observedGeneration": generation, "conditions": conditions}
        )
        return written, Next(None, failed=written is None)
