"""Shards: which MCPServers and AgentRuns this operator owns, by a label selector. Pure.

Where one operator is not enough, several Deployments (each with its own Lease) split
the objects between them by labels (``--shard-selector``), or by namespaces
(``--namespace``). An object this operator does not own is treated as absent: its
worker, if any, stops, so that an object relabelled into another shard is handed over.
Applying the decision to watch events is :mod:`mcp_operator.controller.handlers`' job.

The selector is Kubernetes' equality-based syntax: ``key=value``, ``key!=value``,
``key`` (present) and ``!key`` (absent), comma-separated, all of which must hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Operator = Literal["=", "!=", "exists", "absent"]


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: Operator
    value: str = ""

    def holds(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "exists":
            return self.key in labels
        if self.operator == "absent":
            return self.key not in labels
        if self.operator == "=":
            return labels.get(self.key) == self.value
        return labels.get(self.key) != self.value


def parse_selector(text: str) -> tuple[Requirement, ...]:
    """``ValueError`` names the part that is not an equality-based requirement."""
    requirements = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if "!=" in part:
            key, value = (s.strip() for s in part.split("!=", 1))
            requirements.append(Requirement(key, "!=", value))
        elif "=" in part:
            key, value = (s.strip() for s in part.split("=", 1))
            requirements.append(Requirement(key, "=", value.removeprefix("=").strip()))
        elif part.startswith("!"):
            requirements.append(Requirement(part[1:].strip(), "absent"))
        else:
            requirements.append(Requirement(part, "exists"))
        if not requirements[-1].key or any(c in requirements[-1].key for c in " ()"):
            raise ValueError(
                f"{part!r} is not a label requirement (key=value, key!=value, key, !key)"
            )
    return tuple(requirements)


def owns(selector: tuple[Requirement, ...], labels: Mapping[str, str] | None) -> bool:
    """Whether an object with ``labels`` belongs to this operator's shard."""
    present = labels or {}
    return all(requirement.holds(present) for requirement in selector)
