"""The egress policy: which addresses a probe may connect to, and who opens what."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcp_operator.api import MCPServer
from mcp_operator.controller.mcpserver import destinations, reconcile
from mcp_operator.controller.parsing import parse
from mcp_operator.controller.settings import EgressSettings, RenderSettings
from mcp_operator.kube import NAMESPACES
from mcp_operator.mcp.discovery import Discovery, Keep
from mcp_operator.mcp.errors import ProbeError
from mcp_operator.mcp.target import ProbeTarget
from mcp_operator.net.egress import EgressPolicy
from tests.unit.fakes import FakeKube

DEFAULT = EgressPolicy()
EVERYTHING_OPENED = EgressPolicy(allow_private=True, allow_loopback=True)


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("169.254.169.254", "it is a cloud metadata address"),
        ("fd00:ec2::254", "it is a cloud metadata address"),
        ("100.100.100.200", "it is a cloud metadata address"),
        ("169.254.1.1", "it is a link-local address"),
        ("fe80::1", "it is a link-local address"),
        ("fe80::1%eth0", "it is a link-local address"),
        ("0.0.0.0", "it is the unspecified address"),
        ("::", "it is the unspecified address"),
        ("224.0.0.1", "it is a multicast or reserved address"),
        ("240.0.0.1", "it is a multicast or reserved address"),
        ("192.0.2.1", "it is not a public address"),
        ("::ffff:169.254.169.254", "it is a cloud metadata address"),
        ("64:ff9b::a9fe:a9fe", "it is a cloud metadata address"),
        ("2002:a9fe:a9fe::1", "it is a cloud metadata address"),
    ],
)
def test_these_are_refused_whatever_is_allowed(address: str, why: str) -> None:
    assert DEFAULT.refusal(address) == why
    assert EVERYTHING_OPENED.refusal(address) == why


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.96.0.10", "private"),
        ("172.20.1.1", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "private"),
        ("fd12:3456::1", "private"),
    ],
)
def test_loopback_and_private_are_refused_until_allowed(address: str, kind: str) -> None:
    assert DEFAULT.refusal(address) == f"it is a {kind} address"
    assert EVERYTHING_OPENED.refusal(address) is None
    other = EgressPolicy(allow_private=kind == "loopback", allow_loopback=kind == "private")
    assert other.refusal(address) == f"it is a {kind} address"


@pytest.mark.parametrize("address", ["1.1.1.1", "8.8.8.8", "2606:4700:4700::1111"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert DEFAULT.refusal(address) is None


def test_the_api_server_is_refused_at_its_port_or_at_any_port() -> None:
    policy = EVERYTHING_OPENED.with_refused([("10.96.0.1", 443), ("192.168.5.5", None), ("x", 1)])
    assert policy.refusal("10.96.0.1", 443) == "it is the Kubernetes API server"
    assert policy.refusal("10.96.0.1", 8080) is None
    assert policy.refusal("192.168.5.5", 1) == "it is the Kubernetes API server"


def test_metadata_host_names_are_refused_before_resolution() -> None:
    assert DEFAULT.host_refusal("metadata.google.internal.") == "it is a cloud metadata host name"
    assert DEFAULT.host_refusal("METADATA") == "it is a cloud metadata host name"
    assert DEFAULT.host_refusal("[::1]") == "it is a loopback address"
    assert DEFAULT.host_refusal("tools.example.com") is None  # judged once resolved


# who opens what: the operator's setting and the Namespace's label together


@pytest.mark.parametrize(
    ("setting", "labelled", "allowed"),
    [
        ("refused", True, False),
        ("labelled", False, False),
        ("labelled", True, True),
        ("allowed", False, True),
    ],
)
def test_private_destinations_need_the_setting_and_where_it_says_so_the_label(
    setting: Any, labelled: bool, allowed: bool
) -> None:
    labels = {"mcp-operator.dev/private-destinations": "allowed"} if labelled else {}
    policy = destinations.external_policy(EgressSettings(private_destinations=setting), labels)
    assert policy.allow_private is allowed
    assert policy.allow_loopback is False


def test_a_managed_server_reaches_its_own_service_but_not_the_api_server_in_a_cluster() -> None:
    settings = EgressSettings(refused_endpoints=frozenset({("10.96.0.1", 443)}))
    in_cluster = destinations.managed_policy(settings, through_api_server=False)
    assert in_cluster.refusal("10.100.3.4", 8080) is None
    assert in_cluster.refusal("10.96.0.1", 443) == "it is the Kubernetes API server"
    assert in_cluster.refusal("127.0.0.1") == "it is a loopback address"
    proxy = destinations.managed_policy(settings, through_api_server=True)
    assert proxy.refusal("127.0.0.1", 6443) is None
    assert proxy.refusal("169.254.169.254") == "it is a cloud metadata address"


class Probe:
    def __init__(self) -> None:
        self.targets: list[ProbeTarget] = []

    async def __call__(self, target: ProbeTarget, keep: Keep | None = None) -> Discovery:
        self.targets.append(target)
        raise ProbeError("DestinationRefused", "refused")


async def test_the_reconciler_reads_the_namespace_label_and_reports_a_refusal_as_such(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    probe = Probe()
    monkeypatch.setattr(reconcile, "discover", probe)
    kube = FakeKube()
    kube.put(
        NAMESPACES,
        {
            "metadata": {
                "name": "ns",
                "labels": {"mcp-operator.dev/private-destinations": "allowed"},
            }
        },
    )
    parsed = parse(
        MCPServer,
        {
            "metadata": {"name": "srv", "namespace": "ns", "uid": "u", "generation": 1},
            "spec": {"mode": "external", "url": "http://tools.tools.svc:8080/mcp"},
        },
    )
    result = await reconcile.mcpserver(
        kube,
        parsed,
        probe_slots=asyncio.Semaphore(1),
        render_settings=RenderSettings(),
        egress_settings=EgressSettings(private_destinations="labelled"),
    )
    assert probe.targets[0].egress.allow_private is True
    assert probe.targets[0].egress.allow_loopback is False
    assert (result.outcome.reason, result.outcome.ready_reason) == (
        "DestinationRefused",
        "DestinationRefused",
    )
