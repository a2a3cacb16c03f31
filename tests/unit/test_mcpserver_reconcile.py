"""One MCPServer reconcile against the in-memory fake API (the probe itself is scripted)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcp_operator.api import MCPServer
from mcp_operator.controller.mcpserver import reconcile
from mcp_operator.controller.parsing import InvalidSpec, parse
from mcp_operator.controller.settings import RenderSettings
from mcp_operator.kube import DEPLOYMENTS, SERVICES
from mcp_operator.mcp.discovery import DiscoveredTool as RawTool
from mcp_operator.mcp.discovery import Discovery, Keep
from mcp_operator.mcp.errors import ProbeError
from mcp_operator.mcp.target import ProbeTarget
from mcp_operator.oci.client import RegistryClient
from mcp_operator.oci.settings import RegistrySettings
from tests.unit.fakes import FakeKube

SETTINGS = RenderSettings(adapter_image="registry.example/mcp-operator:1.2.3")
TOKEN_HEADER = {"name": "Authorization", "valueFrom": {"secretKeyRef": {"name": "t", "key": "k"}}}


def server(**spec: Any) -> MCPServer | InvalidSpec:
    body = {
        "apiVersion": "mcp-operator.dev/v1alpha1",
        "kind": "MCPServer",
        "metadata": {"name": "srv", "namespace": "ns", "uid": "u1", "generation": 1},
        "spec": spec,
    }
    return parse(MCPServer, body)


EXTERNAL = {"mode": "external", "url": "http://tools.example/mcp"}
MANAGED = {
    "mode": "managed",
    "transport": "streamable-http",
    "deployment": {"image": "example/server:1", "replicas": 2},
}


class Probe:
    """Stands in for ``discover``: records each target, answers or fails as told."""

    def __init__(self) -> None:
        self.targets: list[ProbeTarget] = []
        self.error: ProbeError | None = None
        self.discovery = Discovery(
            server_name="tools",
            server_version="1.0",
            protocol_version="2025-11-25",
            tools=[RawTool("echo", "Echo it", None), RawTool("add", "Add", None)],
            list_changed=True,
        )

    async def __call__(self, target: ProbeTarget, keep: Keep | None = None) -> Discovery:
        self.targets.append(target)
        if self.error is not None:
            raise self.error
        return self.discovery


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> Probe:
    probe = Probe()
    monkeypatch.setattr(reconcile, "discover", probe)
    return probe


async def run(kube: FakeKube, parsed: MCPServer | InvalidSpec) -> reconcile.Result:
    return await reconcile.mcpserver(
        kube,
        parsed,
        probe_slots=asyncio.Semaphore(1),
        render_settings=SETTINGS,
    )


async def test_an_external_server_that_answers_is_probed_and_listened_to(probe: Probe) -> None:
    result = await run(FakeKube(), server(**EXTERNAL, toolsDeny=["add"]))
    assert result.outcome.kind == "probed"
    assert result.outcome.probe_fields["toolCount"] == 1
    assert result.outcome.probe_fields["discoveredToolCount"] == 2
    assert [t["name"] for t in result.outcome.probe_fields["tools"]] == ["srv_echo"]
    assert result.outcome.deployed is None
    assert (result.url, result.interval) == ("http://tools.example/mcp", 300.0)
    assert result.watch is probe.targets[0]


async def test_an_external_server_that_fails_its_probe_says_why(probe: Probe) -> None:
    probe.error = ProbeError("Unreachable", "Connection refused")
    result = await run(FakeKube(), server(**EXTERNAL))
    assert (result.outcome.kind, result.outcome.reason) == ("failed", "Unreachable")
    assert result.outcome.ready_reason == "ProbeFailed"
    assert result.watch is None


async def test_a_header_from_a_secret_goes_into_the_probe_request(probe: Probe) -> None:
    kube = FakeKube()
    kube.put_secret("ns", "t", {"k": "Bearer s3cret"})
    headers = [TOKEN_HEADER, {"name": "X-Team", "value": "a"}]
    result = await run(kube, server(**EXTERNAL, headers=headers))
    assert result.outcome.kind == "probed"
    assert probe.targets[0].headers == {"Authorization": "Bearer s3cret", "X-Team": "a"}


async def test_a_missing_secret_fails_before_probing_with_secret_not_found(probe: Probe) -> None:
    result = await run(FakeKube(), server(**EXTERNAL, headers=[TOKEN_HEADER]))
    outcome = result.outcome
    assert (outcome.kind, outcome.reason, outcome.ready_reason) == (
        "failed",
        "SecretNotFound",
        "SecretNotFound",
    )
    assert "ns/t" in outcome.message
    assert probe.targets == []


async def test_a_managed_server_is_applied_then_deployed_then_probed(probe: Probe) -> None:
    kube = FakeKube()
    first = await run(kube, server(**MANAGED))
    assert sorted(kube.applied) == [
        ("deployments", "srv"),
        ("networkpolicies", "srv"),
        ("services", "srv"),
    ]
    assert first.url == "http://srv.ns.svc.cluster.local:8080/mcp"
    assert first.outcome.kind == "probed"
    assert first.outcome.deployed is not None
    assert (first.outcome.deployed.status, first.outcome.deployed.reason) == (
        "False",
        "RolloutPending",
    )
    assert probe.targets[0].url == first.url  # in a cluster: the Service's own name

    deployment = await kube.get(DEPLOYMENTS, "ns", "srv")
    assert deployment is not None
    owner = deployment["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("MCPServer", "u1", True)
    kube.objects[("deployments", "ns", "srv")]["status"] = {
        "observedGeneration": 1,
        "replicas": 2,
        "updatedReplicas": 2,
        "availableReplicas": 2,
    }
    second = await run(kube, server(**MANAGED))
    assert second.outcome.deployed is not None
    assert (second.outcome.deployed.status, second.outcome.deployed.reason) == (
        "True",
        "Available",
    )
    assert await kube.get(SERVICES, "ns", "srv") is not None


async def test_a_suspended_managed_server_is_scaled_to_zero_and_not_probed(probe: Probe) -> None:
    kube = FakeKube()
    result = await run(kube, server(**MANAGED, suspend=True))
    assert result.outcome.kind == "suspended"
    assert kube.objects[("deployments", "ns", "srv")]["spec"]["replicas"] == 0
    assert (result.interval, probe.targets) == (None, [])


async def test_an_invalid_spec_is_reported_without_touching_the_api(probe: Probe) -> None:
    kube = FakeKube()
    invalid = server(mode="external")
    assert isinstance(invalid, InvalidSpec)
    result = await run(kube, invalid)
    assert (result.outcome.kind, result.outcome.reason) == ("invalid", "InvalidSpec")
    assert "url must be set" in result.outcome.message
    assert (kube.applied, probe.targets, result.interval) == ([], [], None)


def test_referenced_secrets_name_every_reader_once() -> None:
    parsed = server(
        mode="managed",
        headers=[TOKEN_HEADER],
        deployment={
            "image": "example/server:1",
            "command": ["serve"],
            "env": [
                {"name": "A", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}},
                {"name": "B", "value": "plain"},
                {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            ],
            "imagePullSecrets": [{"name": "pull"}],
        },
    )
    assert isinstance(parsed, MCPServer)
    assert [tuple(use) for use in parsed.referenced_secrets()] == [
        ("probe", "Authorization", "t", "k"),
        ("pod", "A", "db", "pw"),
        ("registry", "imagePullSecrets", "pull", ".dockerconfigjson"),
    ]


IMAGE_ONLY = {"mode": "managed", "deployment": {"image": "127.0.0.1:1/tools/server:1"}}


async def test_an_unreachable_registry_fails_with_its_own_reason_and_deploys_nothing(
    probe: Probe,
) -> None:
    # A closed loopback port: the connection is refused at once, nothing leaves the machine.
    registry = RegistryClient(
        RegistrySettings(insecure_hosts=frozenset({"127.0.0.1:1"}), timeout_seconds=2)
    )
    kube = FakeKube()
    try:
        result = await reconcile.mcpserver(
            kube,
            server(**IMAGE_ONLY),
            probe_slots=asyncio.Semaphore(1),
            render_settings=SETTINGS,
            registry=registry,
        )
    finally:
        await registry.aclose()
    outcome = result.outcome
    assert (outcome.kind, outcome.reason, outcome.ready_reason) == (
        "failed",
        "ImageRegistryUnreachable",
        "ImageRegistryUnreachable",
    )
    assert outcome.deployed is not None and outcome.deployed.reason == "ImageRegistryUnreachable"
    assert "127.0.0.1:1/tools/server:1" in outcome.message
    assert (kube.applied, probe.targets) == ([], [])
    assert result.interval == 300.0  # failed: the worker retries with back-off below this


async def test_a_missing_pull_secret_fails_before_the_registry_is_asked(probe: Probe) -> None:
    registry = RegistryClient()
    spec = {
        "mode": "managed",
        "deployment": {**IMAGE_ONLY["deployment"], "imagePullSecrets": [{"name": "pull"}]},
    }
    try:
        result = await reconcile.mcpserver(
            FakeKube(),
            server(**spec),
            probe_slots=asyncio.Semaphore(1),
            render_settings=SETTINGS,
            registry=registry,
        )
    finally:
        await registry.aclose()
    assert (result.outcome.kind, result.outcome.reason) == ("failed", "SecretNotFound")
    assert "Secret ns/pull" in result.outcome.message
    assert registry.requests == 0


async def test_a_tool_the_server_adds_later_never_takes_the_name_status_shows(
    probe: Probe,
) -> None:
    # Issue 17: status shows search_docs as srv_search_docs; the server then adds search.docs,
    # which sorts first and maps to the same name. The tool in status keeps it.
    probe.discovery = Discovery(
        server_name="tools",
        server_version="1.0",
        protocol_version="2025-11-25",
        tools=[RawTool("search.docs", "new", None), RawTool("search_docs", "old", None)],
        list_changed=False,
    )
    parsed = server(**EXTERNAL)
    assert isinstance(parsed, MCPServer)
    fresh = await run(FakeKube(), parsed)
    shown = [(t["name"], t["originalName"]) for t in fresh.outcome.probe_fields["tools"]]
    assert shown == [("srv_search_docs", "search.docs")]  # no memory: the first by name
    body = parsed.model_dump(by_alias=True, exclude_none=True, mode="json")
    body["status"] = {"tools": [{"name": "srv_search_docs", "originalName": "search_docs"}]}
    shown_before = parse(MCPServer, body)
    assert isinstance(shown_before, MCPServer) and shown_before.status is not None
    assert [t.original_name for t in shown_before.status.tools or ()] == ["search_docs"]
    again = await run(FakeKube(), shown_before)
    shown = [(t["name"], t["originalName"]) for t in again.outcome.probe_fields["tools"]]
    assert shown == [("srv_search_docs", "search_docs")]
    assert any("'search.docs' is not exposed" in w for w in again.outcome.warnings)
