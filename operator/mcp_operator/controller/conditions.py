"""Conditions in the ``metav1.Condition`` shape: pure functions, no I/O, no clock.

A condition's ``lastTransitionTime`` moves only when its ``status`` flips; a new
reason or message with the same status keeps the old transition time, so that
"since when" questions (since when is this server failing?) have an answer.
Also the one format of the times that status holds (:func:`timestamp`), and the
one ``Ready`` condition of an object whose spec does not parse (:func:`invalid_spec`).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Status = Literal["True", "False", "Unknown"]
MAX_MESSAGE = 32768
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
"""``metav1.Time`` as status holds it: UTC, whole seconds."""


@dataclass(frozen=True)
class WantedCondition:
    """One condition as a reconciler decides it; :func:`merge` fills in the times.

    (:class:`mcp_operator.api.common.Condition` is the stored ``metav1.Condition`` shape.)
    """

    type: str
    status: Status
    reason: str
    message: str


def timestamp(now: datetime.datetime) -> str:
    """``now`` as status holds times (:data:`TIME_FORMAT`)."""
    return now.strftime(TIME_FORMAT)


def invalid_spec(message: str) -> WantedCondition:
    """``Ready`` of an object whose spec is invalid, for every kind: ``InvalidSpec`` and why."""
    return WantedCondition("Ready", "False", "InvalidSpec", message)


def merge(
    previous: Iterable[Mapping[str, Any]] | None,
    wanted: Iterable[WantedCondition],
    *,
    now: str,
    generation: int | None,
) -> list[dict[str, Any]]:
    """The new ``status.conditions`` list: ``wanted`` replaces conditions of the same type.

    Conditions of other types in ``previous`` are kept as they are.
    """
    by_type: dict[str, dict[str, Any]] = {c["type"]: dict(c) for c in previous or () if "type" in c}
    for condition in wanted:
        old = by_type.get(condition.type)
        transition = now
        if old is not None and old.get("status") == condition.status:
            transition = old.get("lastTransitionTime") or now
        entry: dict[str, Any] = {
            "type": condition.type,
            "status": condition.status,
            "reason": condition.reason,
            "message": condition.message[:MAX_MESSAGE],
            "lastTransitionTime": transition,
        }
        if generation is not None:
            entry["observedGeneration"] = generation
        by_type[condition.type] = entry
    return sorted(by_type.values(), key=lambda c: _ORDER.get(c["type"], 99))


def find(conditions: Iterable[Mapping[str, Any]] | None, type_: str) -> Mapping[str, Any] | None:
    """The condition of one type, or ``None``."""
    for condition in conditions or ():
        if condition.get("type") == type_:
            return condition
    return None


def is_true(conditions: Iterable[Mapping[str, Any]] | None, type_: str) -> bool:
    condition = find(conditions, type_)
    return condition is not None and condition.get("status") == "True"


_ORDER = {"Ready": 0, "Deployed": 1, "Probed": 2}
