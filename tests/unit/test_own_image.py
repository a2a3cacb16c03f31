"""The operator uses its own image for stdio adapters, read from its own Pod."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_operator.controller.handlers import own_image
from mcp_operator.kube import PODS, Resource


class PodReader:
    """Stands in for the API: answers one GET of one Pod."""

    def __init__(self, pod: dict[str, Any] | None) -> None:
        self.pod = pod
        self.asked: list[tuple[Resource, str | None, str]] = []

    async def get(self, resource: Resource, namespace: str | None, name: str) -> Any:
        self.asked.append((resource, namespace, name))
        return self.pod


POD = {
    "spec": {
        "containers": [
            {"name": "sidecar", "image": "example/proxy:1"},
            {"name": "operator", "image": "registry.example/mcp-operator@sha256:abc"},
        ]
    }
}


async def test_the_operator_container_image_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "mcp-operator-0")
    monkeypatch.setenv("POD_NAMESPACE", "mcp-operator-system")
    kube = PodReader(POD)
    assert await own_image(kube) == "registry.example/mcp-operator@sha256:abc"  # type: ignore[arg-type]
    assert kube.asked == [(PODS, "mcp-operator-system", "mcp-operator-0")]


async def test_outside_a_pod_there_is_no_own_image(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_NAME", raising=False)
    kube = PodReader(POD)
    assert await own_image(kube) is None  # type: ignore[arg-type]
    assert kube.asked == []
