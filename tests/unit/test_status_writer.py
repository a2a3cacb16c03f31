"""Writing status through the fake API, and Events on transitions only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from mcp_operator.controller.events import Event, ObjectRef
from mcp_operator.controller.status_writer import StatusWriter
from mcp_operator.kube import MCPSERVERS, KubeError, NotFound, Resource
from tests.unit.fakes import FakeKube

BODY = {
    "apiVersion": "mcp-operator.dev/v1alpha1",
    "kind": "MCPServer",
    "metadata": {"name": "srv", "namespace": "ns", "uid": "u1", "resourceVersion": "7"},
}
REF = ObjectRef.of(BODY)


def phase_changes(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> Sequence[Event]:
    if (old or {}).get("phase") == new.get("phase"):
        return []
    return [Event("Normal", "PhaseChanged", f"Now {new.get('phase')}")]


def writer(kube: FakeKube) -> StatusWriter:
    return StatusWriter(kube, MCPSERVERS, phase_changes)


async def test_a_status_write_posts_events_for_transitions_only() -> None:
    kube = FakeKube()
    kube.put(MCPSERVERS, BODY)
    first = await writer(kube).write(REF, None, {"phase": "Up", "count": 1})
    assert first == {"phase": "Up", "count": 1}
    second = await writer(kube).write(REF, first, {"count": 2})
    assert second == {"phase": "Up", "count": 2}
    assert [(e["reason"], e["message"]) for e in kube.events] == [("PhaseChanged", "Now Up")]
    involved = kube.events[0]["involved"]
    assert (involved["kind"], involved["metadata"]["uid"]) == ("MCPServer", "u1")
    assert involved["metadata"]["resourceVersion"] == "7"


async def test_a_vanished_object_raises_not_found() -> None:
    with pytest.raises(NotFound):
        await writer(FakeKube()).write(REF, None, {"phase": "Up"})


async def test_a_refused_write_returns_none_and_posts_nothing() -> None:
    class Refusing(FakeKube):
        async def patch_status(
            self, resource: Resource, namespace: str, name: str, status: Mapping[str, Any]
        ) -> Any:
            raise KubeError(422, "status.phase: Unsupported value")

    kube = Refusing()
    assert await writer(kube).write(REF, None, {"phase": "Up"}) is None
    assert kube.events == []


async def test_the_stamp_goes_with_every_patch_and_the_patch_wins_a_clash() -> None:
    kube = FakeKube()
    kube.put(MCPSERVERS, BODY)
    stamped = StatusWriter(
        kube,
        MCPSERVERS,
        phase_changes,
        stamp={"admission": "PolicyAndLabels"},
    )
    assert await stamped.write(REF, None, {"phase": "Up"}) == {
        "admission": "PolicyAndLabels",
        "phase": "Up",
    }
    assert await stamped.patch(REF, {"admission": None, "phase": "Down"}) == {"phase": "Down"}
