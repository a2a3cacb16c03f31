"""Writing an object's status, and posting the Events its change deserves.

The controller decides the patch (pure, with the previous status and ``now``)
and which status changes deserve an Event (pure, ``transitions``); this module
does the I/O: a merge patch of the ``status`` subresource through
:mod:`mcp_operator.kube`, then the Events, on transitions only (each also
logged; :mod:`mcp_operator.kube` logs rather than raises when posting fails).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mcp_operator.controller.events import Event, ObjectRef
from mcp_operator.kube import Kube, KubeError, NotFound, Resource

logger = logging.getLogger(__name__)

Transitions = Callable[[Mapping[str, Any] | None, Mapping[str, Any]], Sequence[Event]]
"""Which Events the change from the old status to the new deserves (none for a repetition)."""


class EventPoster:
    """Posts Events about our objects, each also logged in the operator's own log."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    async def post(self, about: ObjectRef, events: Sequence[Event]) -> None:
        for event in events:
            log = logger.warning if event.type == "Warning" else logger.info
            log("%s %s: %s: %s", about.kind, about, event.reason, event.message)
        involved = about.involved()
        await asyncio.gather(
            *(
                self.kube.post_event(
                    involved, type_=event.type, reason=event.reason, message=event.message
                )
                for event in events
            )
        )


class StatusWriter:
    """Patches the status of one kind of object and announces its transitions."""

    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        transitions: Transitions,
        *,
        stamp: Mapping[str, Any] | None = None,
    ) -> None:
        self.kube = kube
        self.resource = resource
        self.transitions = transitions
        self.stamp: Mapping[str, Any] = dict(stamp or {})
        """Fields written with every patch, the same for every object (``admission``)."""
        self.events = EventPoster(kube)

    async def write(
        self, about: ObjectRef, previous: Mapping[str, Any] | None, patch: Mapping[str, Any]
    ) -> Mapping[str, Any] | None:
        """The status as stored after ``patch``, or ``None`` when the write failed (logged);
        the Events of the change are posted before it returns.

        Raises :class:`~mcp_operator.kube.NotFound` when the object is gone.
        """
        status = await self.patch(about, patch)
        if status is not None:
            await self.announce(about, previous, status)
        return status

    async def patch(self, about: ObjectRef, patch: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """Only the patch of :meth:`write`: the caller owes :meth:`announce` of the change."""
        patch = {**self.stamp, **patch}
        try:
            updated = await self.kube.patch_status(
                self.resource, about.namespace, about.name, patch
            )
        except KubeError as error:
            if error.status == 404:
                raise NotFound(404, str(error)) from None
            logger.warning("Could not write status of %s %s: %s", about.kind, about, error)
            return None
        status: Mapping[str, Any] = (updated or {}).get("status") or patch
        return status

    async def announce(
        self, about: ObjectRef, previous: Mapping[str, Any] | None, status: Mapping[str, Any]
    ) -> None:
        """Post the Events that the change from ``previous`` to ``status`` deserves."""
        await self.events.post(about, self.transitions(previous, status))
