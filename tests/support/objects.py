"""Small helpers for tests that read Kubernetes objects: conditions, and waiting for them.

Waiting is :func:`tests.support.waiting.eventually`, re-exported here because
object tests are its most frequent users.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.support.waiting import eventually

__all__ = ["condition", "eventually"]


def condition(obj: Mapping[str, Any] | None, type_: str) -> dict[str, Any]:
    """The status condition of one type, or ``{}``."""
    for entry in (obj or {}).get("status", {}).get("conditions", []):
        if entry["type"] == type_:
            return dict(entry)
    return {}
