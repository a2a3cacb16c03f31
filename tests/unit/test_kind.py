"""The controller every kind shares, with a kind of the test's own (a fake API, virtual time)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic

from mcp_operator.api import ObjectMeta
from mcp_operator.controller.conditions import find
from mcp_operator.controller.kind import KindController, Known, Reconciled
from mcp_operator.controller.parsing import InvalidSpec, parse
from mcp_operator.controller.settings import ScheduleSettings
from mcp_operator.controller.worker import Next
from mcp_operator.kube import Resource
from tests.unit.fakes import FakeClock, FakeKube

WIDGETS = Resource("example.dev", "v1", "widgets")


class WidgetSpec(pydantic.BaseModel):
    size: int = pydantic.Field(ge=1)


class Widget(pydantic.BaseModel):
    metadata: ObjectMeta
    spec: WidgetSpec


class Widgets(KindController[Widget]):
    """A kind that writes its size into status and deletes itself at size 99."""

    def __init__(self, kube: FakeKube, clock: FakeClock) -> None:
        super().__init__(
            kube,
            kind="Widget",
            resource=WIDGETS,
            transitions=lambda _old, _new: [],
            schedule=ScheduleSettings(jitter=0),
            clock=clock,
        )
        self.reconciled: list[int] = []
        self.tracked: list[tuple[str, bool]] = []
        self.gone: list[str] = []

    def parse(self, body: Mapping[str, Any]) -> Widget | InvalidSpec:
        return parse(Widget, body)

    def track(self, uid: str, parsed: Widget | InvalidSpec, *, new: bool) -> None:
        self.tracked.append((uid, new))

    def ended(self, uid: str) -> None:
        self.gone.append(uid)

    async def reconcile_object(self, known: Known[Widget], parsed: Widget) -> Reconciled:
        self.reconciled.append(parsed.spec.size)
        written = await self.write(known, {"size": parsed.spec.size})
        if parsed.spec.size == 99:
            return written, await self.delete(known, "it asked to go")
        return written, Next(None)


def widget(size: int, generation: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": "w", "namespace": "ns", "uid": "u1", "generation": generation},
        "spec": {"size": size},
    }


def status(kube: FakeKube) -> dict[str, Any]:
    return dict(kube.objects[("widgets", "ns", "w")].get("status") or {})


async def test_an_invalid_spec_is_answered_for_the_kind_until_a_new_generation() -> None:
    kube, clock = FakeKube(), FakeClock()
    kube.put(WIDGETS, widget(0))
    widgets = Widgets(kube, clock)
    widgets.observe("ADDED", widget(0))
    await clock.run_until(lambda: "conditions" in status(kube))
    ready = find(status(kube)["conditions"], "Ready")
    assert ready is not None and (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert "spec.size" in ready["message"] and status(kube)["observedGeneration"] == 1
    await clock.advance(3600)
    assert widgets.reconciled == []  # the kind's reconcile never sees an invalid object
    widgets.observe("MODIFIED", widget(3, generation=2))
    await clock.run_until(lambda: widgets.reconciled == [3])
    assert widgets.tracked == [("u1", True), ("u1", False)]
    await widgets.stop()


async def test_echoes_of_the_same_generation_neither_parse_nor_wake() -> None:
    kube, clock = FakeKube(), FakeClock()
    kube.put(WIDGETS, widget(2))
    widgets = Widgets(kube, clock)
    widgets.observe("ADDED", widget(2))
    await clock.run_until(lambda: widgets.reconciled == [2])
    widgets.observe("MODIFIED", widget(5))  # same generation: a status echo, not a spec change
    await clock.advance(60)
    assert widgets.reconciled == [2] and widgets.tracked == [("u1", True)]
    await widgets.stop()


async def test_an_object_deleted_by_its_controller_or_by_a_user_ends_its_worker() -> None:
    kube, clock = FakeKube(), FakeClock()
    kube.put(WIDGETS, widget(99))
    widgets = Widgets(kube, clock)
    widgets.observe("ADDED", widget(99))
    await clock.run_until(lambda: len(widgets) == 0)
    assert kube.deleted == [("widgets", "w")] and widgets.gone == ["u1"]
    assert widgets.reconciled == [99]

    kube.put(WIDGETS, widget(1))
    widgets.observe("ADDED", widget(1))
    await clock.run_until(lambda: widgets.reconciled == [99, 1])
    widgets.observe("DELETED", widget(1))
    assert len(widgets) == 0 and widgets.gone == ["u1", "u1"]
    await widgets.stop()
