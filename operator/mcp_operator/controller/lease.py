"""Leader election on a ``coordination.k8s.io/v1`` Lease: what to do next. Pure, no I/O.

Owns the decision of one election round (:func:`decide`), the Lease's fields as
the decision reads and writes them (:class:`LeaseRecord`), and when a leader
must step down (:func:`must_step_down`). The rules are client-go's, so an
operator of ours behaves like every other controller in the cluster:

- nobody holds the Lease (absent, or released with an empty holder): take it;
- we hold it: renew it;
- somebody else holds it: wait until the record has not changed for the
  Lease's duration, *as measured by our own clock since we first saw that
  record* (never by comparing its ``renewTime`` with our clock: the two
  machines' clocks may disagree); then take it over;
- a leader that could not renew for the renew deadline steps down; that
  deadline is shorter than the Lease's duration, so the old leader stops
  before a follower may start.

Reading and writing the Lease (with optimistic concurrency on its
``resourceVersion``), and the loop around rounds, are
:mod:`mcp_operator.controller.leader`'s job. The caller passes the times.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from mcp_operator.controller.settings import LeaderElectionSettings

MICRO_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"


@dataclass(frozen=True)
class LeaseRecord:
    """The fields of a Lease's spec that the election reads and writes."""

    holder: str | None
    lease_duration_seconds: int
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0
    resource_version: str | None = None
    """Of the stored object; a write with it fails (409) when someone wrote in between."""

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> LeaseRecord:
        spec = body.get("spec") or {}
        return cls(
            holder=spec.get("holderIdentity") or None,
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
            resource_version=(body.get("metadata") or {}).get("resourceVersion"),
        )

    def same_as(self, other: LeaseRecord | None) -> bool:
        """Whether ``other`` is this record unchanged (the holder wrote nothing since)."""
        return other is not None and (self.holder, self.renew_time, self.resource_version) == (
            other.holder,
            other.renew_time,
            other.resource_version,
        )

    def manifest(self, name: str, namespace: str) -> dict[str, Any]:
        """The whole Lease object to create or replace with this record."""
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if self.resource_version is not None:
            metadata["resourceVersion"] = self.resource_version
        spec: dict[str, Any] = {
            "holderIdentity": self.holder or "",
            "leaseDurationSeconds": self.lease_duration_seconds,
            "leaseTransitions": self.transitions,
        }
        if self.acquire_time is not None:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time is not None:
            spec["renewTime"] = self.renew_time
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": spec,
        }


@dataclass(frozen=True)
class Round:
    """What one election round decided."""

    action: Literal["create", "take", "renew", "wait"]
    record: LeaseRecord | None = None
    """What to write (``None`` for ``wait``)."""


def micro_time(now: datetime.datetime) -> str:
    """A ``metav1.MicroTime`` as the API server stores it."""
    return now.astimezone(datetime.UTC).strftime(MICRO_TIME)


def decide(
    current: LeaseRecord | None,
    *,
    identity: str,
    unchanged_for: float,
    now: datetime.datetime,
    settings: LeaderElectionSettings,
) -> Round:
    """One round: ``current`` is the Lease as read (``None``: absent), ``unchanged_for`` how
    many seconds our clock has seen exactly this record, ``now`` the wall time to stamp."""
    stamp = micro_time(now)
    duration = settings.lease_duration_seconds
    if current is None:
        return Round("create", LeaseRecord(identity, duration, stamp, stamp, 0))
    if current.holder == identity:
        return Round("renew", replace(current, lease_duration_seconds=duration, renew_time=stamp))
    if current.holder is not None and unchanged_for < current.lease_duration_seconds:
        return Round("wait")
    taken = LeaseRecord(
        identity,
        duration,
        acquire_time=stamp,
        renew_time=stamp,
        transitions=current.transitions + 1,
        resource_version=current.resource_version,
    )
    return Round("take", taken)


def released(record: LeaseRecord, now: datetime.datetime) -> LeaseRecord:
    """The record a leader writes on a clean shutdown: no holder, so a follower takes the
    Lease at its next round instead of waiting for it to expire."""
    stamp = micro_time(now)
    return replace(record, holder=None, lease_duration_seconds=1, renew_time=stamp)


def must_step_down(last_renewed: float, now: float, settings: LeaderElectionSettings) -> bool:
    """Whether a leader that last renewed at ``last_renewed`` (monotonic seconds) must stop."""
    return now - last_renewed >= settings.renew_deadline_seconds
