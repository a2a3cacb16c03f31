"""The wake policy: which change of a Secret or a Deployment wakes which MCPServer.

A server is woken when a Secret it references (a header's or its Pod's
``secretKeyRef``) changes in its namespace, and when its own Deployment's
rollout state moves (what the ``Deployed`` condition depends on: observed
generation and replica counts; other status writes of the Deployment
controller do not wake). No I/O: the fleet asks, and does the waking.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp_operator.api import MCPServer
from mcp_operator.controller.parsing import InvalidSpec

RolloutState = tuple[Any, ...]


@dataclass
class _Tracked:
    namespace: str | None
    secrets: frozenset[str]
    rollout: RolloutState | None = None


class WakePolicy:
    """What each tracked MCPServer depends on besides its own spec."""

    def __init__(self) -> None:
        self._tracked: dict[str, _Tracked] = {}

    def track(self, uid: str, server: MCPServer | InvalidSpec) -> None:
        """Record (again) what ``server`` references; call on arrival and on a new generation."""
        secrets = (
            frozenset(use.secret for use in server.referenced_secrets())
            if isinstance(server, MCPServer)
            else frozenset()
        )
        old = self._tracked.get(uid)
        rollout = old.rollout if old is not None else None
        self._tracked[uid] = _Tracked(server.metadata.namespace, secrets, rollout)

    def forget(self, uid: str) -> None:
        self._tracked.pop(uid, None)

    def woken_by_secret(self, namespace: str, name: str) -> list[str]:
        """The servers in ``namespace`` that reference Secret ``name``."""
        return [
            uid
            for uid, tracked in self._tracked.items()
            if name in tracked.secrets and tracked.namespace == namespace
        ]

    def woken_by_rollout(self, uid: str, state: RolloutState) -> bool:
        """Whether the server's Deployment moved to a new rollout ``state`` (then recorded)."""
        tracked = self._tracked.get(uid)
        if tracked is None or tracked.rollout == state:
            return False
        tracked.rollout = state
        return True


def rollout_state(deployment: Mapping[str, Any]) -> RolloutState:
    """What of a Deployment's status the ``Deployed`` condition depends on."""
    status = deployment.get("status") or {}
    return (
        status.get("observedGeneration"),
        status.get("replicas"),
        status.get("updatedReplicas"),
        status.get("availableReplicas"),
    )


def owning_servers(deployment: Mapping[str, Any]) -> list[str]:
    """The uid of the MCPServer that controls ``deployment`` (none, or one)."""
    return [
        str(owner.get("uid"))
        for owner in deployment.get("metadata", {}).get("ownerReferences") or []
        if owner.get("kind") == "MCPServer" and owner.get("controller")
    ]
