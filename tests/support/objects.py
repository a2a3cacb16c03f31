"""Small helpers for tests that read Kubernetes objects: conditions and waiting."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def condition(obj: Mapping[str, Any] | None, type_: str) -> dict[str, Any]:
    """The status condition of one type, or ``{}``."""
    for entry in (obj or {}).get("status", {}).get("conditions", []):
        if entry["type"] == type_:
            return dict(entry)
    return {}


def eventually(what: str, check: Callable[[], T], timeout: float = 30) -> T:
    """Call ``check`` until it returns something truthy; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: T = check()
    while not last:
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout}s (last: {last!r})")
        time.sleep(0.25)
        last = check()
    return last
