"""The operator uses its own image for stdio adapters, read from its own Pod."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_operator.controller.handlers import own_image
from mcp_operator.kube import PODS, Resource
from tests.unit.fakes import FakeKube


class PodReader(FakeKube):
    """Stands in for the API: answers one GET of one Pod."""

    def __init__(self, pod: dict[str, Any] | None) -> None:
        super().__init__()
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
    assert await own_image(kube) == "registry.example/mcp-operator@sha256:abc"
    assert kube.asked == [(PODS, "mcp-operator-system", "mcp-operator-0")]


async def test_outside_a_pod_there_is_no_own_image(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_NAME", raising=False)
    kube = PodReader(POD)
    assert await own_image(kube) is None
    assert kube.asked == []


async def test_a_tagged_image_is_pinned_to_the_digest_the_node_pulled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POD_NAME", "mcp-operator-0")
    monkeypatch.setenv("POD_NAMESPACE", "mcp-operator-system")
    digest = "sha256:" + "c" * 64
    pod = {
        "spec": {"containers": [{"name": "operator", "image": "registry.example/op:1.2"}]},
        "status": {
            "containerStatuses": [
                {"name": "operator", "imageID": f"registry.example/op@{digest}"},
            ]
        },
    }
    assert await own_image(PodReader(pod)) == f"registry.example/op:1.2@{digest}"


async def test_without_a_pulled_digest_the_image_is_used_as_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POD_NAME", "mcp-operator-0")
    monkeypatch.setenv("POD_NAMESPACE", "mcp-operator-system")
    pod = {
        "spec": {"containers": [{"name": "operator", "image": "registry.example/op:1.2"}]},
        "status": {"containerStatuses": [{"name": "operator", "imageID": ""}]},
    }
    assert await own_image(PodReader(pod)) == "registry.example/op:1.2"
