"""Small helpers for tests of Kubernetes objects: building our kinds, reading them back,
their conditions, and waiting for them.

Waiting is :func:`tests.support.waiting.eventually`, re-exported here because
object tests are its most frequent users.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tests.support.waiting import eventually

if TYPE_CHECKING:
    from tests.support.cluster import Cluster

__all__ = [
    "agentrun",
    "condition",
    "eventually",
    "get",
    "mcpserver",
    "python_agent",
    "ready",
]

API_VERSION = "mcp-operator.dev/v1alpha1"


def mcpserver(name: str, **spec: Any) -> dict[str, Any]:
    """An MCPServer named ``name`` with ``spec``."""
    return {
        "apiVersion": API_VERSION,
        "kind": "MCPServer",
        "metadata": {"name": name},
        "spec": spec,
    }


def python_agent(image: str, script: str, **fields: Any) -> dict[str, Any]:
    """An AgentRun's ``spec.agent`` running ``python -c script`` in ``image``."""
    return {"image": image, "command": ["python", "-c", script], **fields}


def agentrun(
    name: str, servers: Sequence[str | Mapping[str, Any]], agent: Mapping[str, Any], **spec: Any
) -> dict[str, Any]:
    """An AgentRun of ``agent`` with ``servers`` (names, or whole ``mcpServers`` entries)."""
    entries = [{"name": s} if isinstance(s, str) else dict(s) for s in servers]
    return {
        "apiVersion": API_VERSION,
        "kind": "AgentRun",
        "metadata": {"name": name},
        "spec": {"mcpServers": entries, "agent": dict(agent), **spec},
    }


def get(cluster: Cluster, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
    """The object as JSON, or None while it does not exist."""
    result = cluster.kubectl("-n", namespace, "get", "-o", "json", f"{kind}/{name}", check=False)
    found: dict[str, Any] | None = json.loads(result.stdout) if result.returncode == 0 else None
    return found


def condition(obj: Mapping[str, Any] | None, type_: str) -> dict[str, Any]:
    """The status condition of one type, or ``{}``."""
    for entry in (obj or {}).get("status", {}).get("conditions", []):
        if entry["type"] == type_:
            return dict(entry)
    return {}


def ready(
    cluster: Cluster,
    namespace: str,
    kind: str,
    name: str,
    timeout: float = 120,
    explain: Callable[[], str] | None = None,
) -> dict[str, Any]:
    """The object once its ``Ready`` condition is ``True``."""
    found: dict[str, Any] = eventually(
        f"{kind} {name} Ready",
        lambda: get(cluster, namespace, kind, name),
        timeout,
        until=lambda obj: condition(obj, "Ready").get("status") == "True",
        explain=explain,
    )
    return found
