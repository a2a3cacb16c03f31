"""An MCPServer event through the whole fleet: parse, reconcile, status, Events, listening.

The API is the in-memory fake, time is virtual, and the probe and the
``tools/list_changed`` watch are scripted; everything else is the real code.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcp_operator.controller import parsing
from mcp_operator.controller.conditions import find
from mcp_operator.controller.mcpserver import listeners, reconcile
from mcp_operator.controller.mcpserver.fleet import Fleet
from mcp_operator.controller.settings import FleetSettings, ListenerSettings, ScheduleSettings
from mcp_operator.kube import MCPSERVERS
from mcp_operator.mcp.discovery import DiscoveredTool as RawTool
from mcp_operator.mcp.discovery import Discovery, Keep
from mcp_operator.mcp.target import ProbeTarget
from tests.unit.fakes import FakeClock, FakeKube


def body(name: str, generation: int = 1, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "mcp-operator.dev/v1alpha1",
        "kind": "MCPServer",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "generation": generation,
        },
        "spec": spec or {"mode": "external", "url": f"http://{name}.example/mcp"},
    }


class Peer:
    """Scripted ``discover`` and ``watch_tools``: each listener waits until told to announce."""

    def __init__(self) -> None:
        self.probes: list[str] = []
        self.announce = asyncio.Event()
        self.listening: list[str] = []

    async def discover(self, target: ProbeTarget, keep: Keep | None = None) -> Discovery:
        self.probes.append(target.url)
        tools = [RawTool("echo", "Echo", None)]
        return Discovery("peer", "1", "2025-11-25", tools, list_changed=True)

    async def watch_tools(self, target: ProbeTarget, *, max_seconds: float) -> bool:
        self.listening.append(target.url)
        await self.announce.wait()
        self.announce.clear()  # one announcement, heard once
        return True


@pytest.fixture
def peer(monkeypatch: pytest.MonkeyPatch) -> Peer:
    peer = Peer()
    monkeypatch.setattr(reconcile, "discover", peer.discover)
    monkeypatch.setattr(listeners, "watch_tools", peer.watch_tools)
    return peer


def fleet(kube: FakeKube, clock: FakeClock, max_listeners: int = 1) -> Fleet:
    settings = FleetSettings(
        schedule=ScheduleSettings(jitter=0), listeners=ListenerSettings(max_listeners)
    )
    return Fleet(kube, settings, clock=clock)


def status(kube: FakeKube, name: str) -> dict[str, Any]:
    return dict(kube.objects[(MCPSERVERS.plural, "ns", name)].get("status") or {})


async def test_an_invalid_server_gets_invalid_spec_and_waits_for_a_new_generation(
    peer: Peer,
) -> None:
    kube, clock = FakeKube(), FakeClock()
    invalid = body("bad", mode="external")
    kube.put(MCPSERVERS, invalid)
    servers = fleet(kube, clock)
    servers.observe("ADDED", invalid)
    await clock.advance(0)
    ready = find(status(kube, "bad").get("conditions"), "Ready")
    assert ready is not None and (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert "url must be set" in ready["message"]
    await clock.advance(86400)
    assert peer.probes == []
    await servers.stop()


async def test_a_server_is_parsed_once_per_generation(
    peer: Peer, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed: list[str] = []
    real_parse = parsing.parse

    def counting_parse(model: Any, raw: Any) -> Any:
        parsed.append(raw["metadata"]["name"])
        return real_parse(model, raw)

    monkeypatch.setattr("mcp_operator.controller.mcpserver.fleet.parse", counting_parse)
    kube, clock = FakeKube(), FakeClock()
    kube.put(MCPSERVERS, body("a"))
    servers = fleet(kube, clock)
    for _ in range(3):  # our own status writes come back as events of the same generation
        servers.observe("MODIFIED", body("a"))
    await clock.advance(600)  # and the regular re-probes do not parse again
    assert len(peer.probes) == 3 and parsed == ["a"]
    servers.observe("MODIFIED", body("a", generation=2))
    await clock.advance(0)
    assert parsed == ["a", "a"]
    await servers.stop()


async def test_events_are_posted_on_transitions_only(peer: Peer) -> None:
    kube, clock = FakeKube(), FakeClock()
    kube.put(MCPSERVERS, body("a"))
    servers = fleet(kube, clock)
    servers.observe("ADDED", body("a"))
    await clock.advance(900)  # three probes
    assert len(peer.probes) == 4
    assert [event["reason"] for event in kube.events] == ["ToolsDiscovered"]
    assert status(kube, "a")["toolCount"] == 1
    await servers.stop()


async def test_a_new_tool_list_wakes_the_server_and_listeners_are_bounded(peer: Peer) -> None:
    kube, clock = FakeKube(), FakeClock()
    for name in ("a", "b"):
        kube.put(MCPSERVERS, body(name))
    servers = fleet(kube, clock, max_listeners=1)
    servers.observe("ADDED", body("a"))
    servers.observe("ADDED", body("b"))
    await clock.advance(0)
    assert len(peer.probes) == 2
    assert len(peer.listening) == 1  # one listener at most
    peer.announce.set()
    await clock.advance(0)
    assert peer.probes[2:] == ["http://a.example/mcp"]  # probed again at once, and only it
    assert peer.listening == ["http://a.example/mcp"] * 2  # and listened to again
    await servers.stop()
