"""The NetworkPolicies the operator renders and applies, on the in-memory fake API.

Rendering is pure (``controller/mcpserver/network.py``, ``controller/agentrun/network.py``):
these tests pin down what each policy lets in and out. Applying goes through the one
``Kube.apply``: a NetworkPolicy of our name that a tenant created is never written, and
nothing of the owner starts (fail closed). Whether an enforcer really drops the traffic
is ``tests/e2e/test_network_policies.py``, on the real node.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
from typing import Any

import pydantic
import pytest

from mcp_operator import FIELD_MANAGER
from mcp_operator.api import AgentRun, MCPServer
from mcp_operator.controller import network_policies
from mcp_operator.controller.agentrun import egress, resolve
from mcp_operator.controller.agentrun import network as run_network
from mcp_operator.controller.agentrun import reconcile as run_reconcile
from mcp_operator.controller.conditions import find
from mcp_operator.controller.mcpserver import managed, reconcile
from mcp_operator.controller.mcpserver import network as server_network
from mcp_operator.controller.settings import (
    AgentRenderSettings,
    NetworkPolicySettings,
    RenderSettings,
)
from mcp_operator.kube import NETWORKPOLICIES, PODS
from mcp_operator.mcp.discovery import Discovery
from mcp_operator.mcp.target import ProbeTarget
from tests.unit.fakes import FakeKube

IN_CLUSTER = NetworkPolicySettings(operator_namespace="mcp-operator-system")
READY = [
    {
        "type": "Ready",
        "status": "True",
        "reason": "ToolsDiscovered",
        "message": "m",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
]


def mcpserver(name: str = "srv", namespace: str = "ns", **spec: Any) -> MCPServer:
    body = {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "generation": 1},
        "spec": {
            "mode": "managed",
            "deployment": {"image": "example/server:1", "command": ["server"]},
            **spec,
        },
        "status": {"observedGeneration": 1, "url": "http://x", "conditions": READY},
    }
    return MCPServer.model_validate(body)


def external(name: str, url: str) -> MCPServer:
    body = {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "generation": 1},
        "spec": {"mode": "external", "url": url},
        "status": {"observedGeneration": 1, "url": url, "conditions": READY},
    }
    return MCPServer.model_validate(body)


def agentrun(servers: list[str] | list[dict[str, str]], **spec: Any) -> AgentRun:
    refs = [{"name": s} if isinstance(s, str) else s for s in servers or ["docs"]]
    body = {
        "metadata": {"name": "triage", "namespace": "ns", "uid": "uid-run", "generation": 1},
        "spec": {
            "mcpServers": refs,
            "agent": {"image": "agent:1"},
            **spec,
        },
    }
    return AgentRun.model_validate(body)


def resolution(run: AgentRun, *servers: MCPServer) -> resolve.Resolution:
    found: dict[resolve.ServerKey, MCPServer | None] = {
        (s.metadata.namespace or "", s.metadata.name): s for s in servers
    }
    return resolve.resolve(run, found)


# -- the models refuse what the API server would -----------------------------------------


@pytest.mark.parametrize(
    ("network", "words"),
    [
        ({"ingressFrom": [{}]}, "must set podSelector, namespaceSelector or ipBlock"),
        (
            {"ingressFrom": [{"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}]},
            "ipBlock must not be set together",
        ),
        ({"ingressFrom": [{"ipBlock": {"cidr": "10.1.2.3/8"}}]}, "no host bits set"),
        ({"ingressFrom": [{"ipBlock": {"cidr": "300.0.0.0/8"}}]}, "is not a CIDR"),
        (
            {
                "ingressFrom": [
                    {"podSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}
                ]
            },
            "values must be non-empty when operator is In",
        ),
        (
            {"egressTo": [{"to": [{"ipBlock": {"cidr": "203.0.113.0/24"}}]}]},
            "egressTo must be set only when egress is restricted",
        ),
        ({"egress": "restricted", "egressTo": [{"to": []}]}, "at least 1 item"),
        (
            {
                "egress": "restricted",
                "egressTo": [{"to": [{"podSelector": {}}], "ports": [{"port": 9, "endPort": 8}]}],
            },
            "endPort must be set only with port, and be at least port",
        ),
    ],
)
def test_a_network_spec_the_api_server_would_refuse_is_refused(
    network: dict[str, Any], words: str
) -> None:
    with pytest.raises(pydantic.ValidationError, match=words):
        mcpserver(network=network)


def test_an_external_server_has_no_network_spec() -> None:
    body = {"metadata": {"name": "x"}, "spec": {"mode": "external", "url": "http://x/mcp"}}
    body["spec"]["network"] = {"egress": "restricted"}
    with pytest.raises(pydantic.ValidationError, match="network must not be set when mode is"):
        MCPServer.model_validate(body)


# -- a managed server's policy -----------------------------------------------------------


def test_a_servers_policy_lets_only_the_operator_and_permitted_runs_reach_its_serving_port() -> (
    None
):
    server = mcpserver(access={"namespaces": ["team-b", "team-a"]})
    policy = server_network.network_policy(server, IN_CLUSTER)

    assert policy["metadata"]["name"] == "srv"
    assert policy["metadata"]["ownerReferences"] == [
        {"apiVersion": "mcp-operator.dev/v1alpha1", "kind": "MCPServer", "name": "srv"}
        | {"uid": "uid-srv", "controller": True}
    ]
    spec = policy["spec"]
    assert spec["podSelector"] == {
        "matchLabels": {"app.kubernetes.io/instance": "srv", "mcp-operator.dev/server": "srv"}
    }
    # Ingress only; egress is open by default (not among the policy types).
    assert spec["policyTypes"] == ["Ingress"]
    assert "egress" not in spec
    (rule,) = spec["ingress"]
    # One port: the one named mcp, which the Service targets; no other port of the Pod.
    assert rule["ports"] == [{"protocol": "TCP", "port": "mcp"}]
    assert rule["from"] == [
        {
            "namespaceSelector": {
                "matchLabels": {"kubernetes.io/metadata.name": "mcp-operator-system"}
            },
            "podSelector": {
                "matchLabels": {
                    "app.kubernetes.io/name": "mcp-operator",
                    "app.kubernetes.io/component": "operator",
                }
            },
        },
        {
            "namespaceSelector": {
                "matchExpressions": [
                    {
                        "key": "kubernetes.io/metadata.name",
                        "operator": "In",
                        "values": ["ns", "team-a", "team-b"],
                    }
                ]
            },
            "podSelector": {
                "matchExpressions": [{"key": "mcp-operator.dev/agent-run", "operator": "Exists"}]
            },
        },
    ]
    condition = server_network.condition(server, IN_CLUSTER)
    assert (condition.type, condition.status, condition.reason) == (
        "NetworkPolicy",
        "True",
        "Restricted",
    )
    assert "namespaces ns, team-a, team-b" in condition.message


def test_a_server_open_to_every_namespace_selects_runs_in_all_of_them_and_extra_peers() -> None:
    ingress = {"namespaceSelector": {"matchLabels": {"team": "edge"}}}
    server = mcpserver(access={"namespaces": ["*"]}, network={"ingressFrom": [ingress]})
    # An operator outside the cluster: the API server's service proxy dials the Pods.
    outside = NetworkPolicySettings(api_server_addresses=("10.0.0.5", "fd00::5"))
    (rule,) = server_network.network_policy(server, outside)["spec"]["ingress"]
    assert rule["from"][0:2] == [
        {"ipBlock": {"cidr": "10.0.0.5/32"}},
        {"ipBlock": {"cidr": "fd00::5/128"}},
    ]
    assert rule["from"][2]["namespaceSelector"] == {}
    assert rule["from"][3] == ingress


def test_a_restricted_server_may_reach_dns_and_its_egress_to_only() -> None:
    server = mcpserver(
        network={
            "egress": "restricted",
            "egressTo": [
                {"to": [{"ipBlock": {"cidr": "203.0.113.0/24"}}], "ports": [{"port": 5432}]}
            ],
        }
    )
    settings = NetworkPolicySettings(dns_cidrs=("169.254.20.10/32",))
    spec = server_network.network_policy(server, settings)["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert spec["egress"] == [
        {
            "to": [
                {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": "kube-system"}
                    },
                    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                },
                {"ipBlock": {"cidr": "169.254.20.10/32"}},
            ],
            "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
        },
        {
            "to": [{"ipBlock": {"cidr": "203.0.113.0/24"}}],
            "ports": [{"protocol": "TCP", "port": 5432}],
        },
    ]


# -- an AgentRun's policy ----------------------------------------------------------------


def test_a_restricted_run_may_reach_dns_its_servers_pods_its_external_servers_and_egress_to() -> (
    None
):
    docs = mcpserver("docs", namespace="shared", access={"namespaces": ["ns"]})
    web = external("web", "https://203.0.113.7:8443/mcp")
    llm = {"to": [{"ipBlock": {"cidr": "198.51.100.0/24"}}], "ports": [{"port": 443}]}
    refs = [{"name": "docs", "namespace": "shared"}, {"name": "web"}]
    run = agentrun(refs, network={"egress": "restricted", "egressTo": [llm]})
    found = resolution(run, docs, web)
    assert [b.reason for b in found.bindings] == ["Resolved", "Resolved"]
    assert run_network.external_endpoints(found) == [("203.0.113.7", 8443)]

    policy = run_network.network_policy(
        run, found, {("203.0.113.7", 8443): ["203.0.113.7"]}, NetworkPolicySettings()
    )
    spec = policy["spec"]
    assert policy["metadata"]["name"] == "triage"
    assert spec["podSelector"] == {"matchLabels": {"mcp-operator.dev/agent-run": "triage"}}
    assert spec["policyTypes"] == ["Egress"]
    dns, managed, outside, declared = spec["egress"]
    assert dns["ports"][0] == {"protocol": "UDP", "port": 53}
    # The server's Pods (kube-proxy hands the enforcer the Pod's address, not the ClusterIP).
    assert managed == {
        "to": [
            {
                "namespaceSelector": {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "In",
                            "values": ["shared"],
                        }
                    ]
                },
                "podSelector": {
                    "matchLabels": {
                        "app.kubernetes.io/instance": "docs",
                        "mcp-operator.dev/server": "docs",
                    }
                },
            }
        ],
        "ports": [{"protocol": "TCP", "port": "mcp"}],
    }
    assert outside == {
        "to": [{"ipBlock": {"cidr": "203.0.113.7/32"}}],
        "ports": [{"protocol": "TCP", "port": 8443}],
    }
    assert declared == {
        "to": [{"ipBlock": {"cidr": "198.51.100.0/24"}}],
        "ports": [{"protocol": "TCP", "port": 443}],
    }


async def test_an_external_servers_refused_addresses_are_left_out_of_a_runs_policy() -> None:
    metadata = external("meta", "http://169.254.169.254/mcp")
    apiserver = external("api", "https://10.96.0.1:443/mcp")
    public = external("web", "http://10.20.30.40/mcp")
    run = agentrun(["meta", "api", "web"], network={"egress": "restricted"})
    kube = FakeKube()
    condition = await egress.apply_egress_policy(
        kube,
        run,
        resolution(run, metadata, apiserver, public),
        NetworkPolicySettings(),
        frozenset({("10.96.0.1", 443)}),
    )
    stored = kube.objects[("networkpolicies", "ns", "triage")]
    blocks = [
        peer["ipBlock"]["cidr"]
        for rule in stored["spec"]["egress"]
        for peer in rule["to"]
        if "ipBlock" in peer
    ]
    assert [b for b in blocks if not b.startswith("10.96")] == ["10.20.30.40/32"]
    assert "10.96.0.1/32" not in blocks and "169.254.169.254/32" not in blocks
    assert condition.reason == "Restricted"
    assert "169.254.169.254" in condition.message and "10.96.0.1" in condition.message


async def test_an_open_run_gets_no_policy_and_loses_the_one_it_had() -> None:
    kube = FakeKube()
    restricted = agentrun([], network={"egress": "restricted"})
    await egress.apply_egress_policy(
        kube,
        restricted,
        resolution(restricted),
        NetworkPolicySettings(),
    )
    assert ("networkpolicies", "ns", "triage") in kube.objects
    # The operator's default decides for a run that says nothing.
    silent = agentrun([])
    condition = await egress.apply_egress_policy(
        kube,
        silent,
        resolution(silent),
        NetworkPolicySettings(agent_egress="open"),
    )
    assert (condition.status, condition.reason) == ("False", "EgressOpen")
    assert ("networkpolicies", "ns", "triage") not in kube.objects


# -- owned only: a tenant's NetworkPolicy of our name is never written -------------------


def tenants_policy(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "managedFields": [{"manager": "kubectl-client-side-apply"}],
        },
        # Allows everything in: what a tenant would want the server's Pods to get.
        "spec": {"podSelector": {}, "ingress": [{}], "policyTypes": ["Ingress"]},
    }


class Probe:
    def __init__(self) -> None:
        self.targets: list[ProbeTarget] = []

    async def __call__(self, target: ProbeTarget, keep: object = None) -> Discovery:
        self.targets.append(target)
        return Discovery("s", "1", "2025-11-25", [], list_changed=False)


async def test_a_tenants_policy_of_the_servers_name_is_left_alone_and_nothing_is_deployed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    probe = Probe()
    monkeypatch.setattr(reconcile, "discover", probe)
    kube = FakeKube()
    before = copy.deepcopy(kube.put(NETWORKPOLICIES, tenants_policy("srv")))
    result = await reconcile.mcpserver(
        kube,
        mcpserver(),
        probe_slots=asyncio.Semaphore(1),
        render_settings=RenderSettings(),
        network_settings=IN_CLUSTER,
    )
    assert kube.objects[("networkpolicies", "ns", "srv")] == before
    assert kube.applied == []  # no Service, no Deployment: its Pods never start unprotected
    assert result.outcome.ready_reason == "NameConflict"
    assert result.outcome.network is not None
    assert (result.outcome.network.status, result.outcome.network.reason) == (
        "False",
        "NameConflict",
    )
    assert "NetworkPolicy ns/srv already exists" in result.outcome.network.message
    assert probe.targets == []


async def reconcile_restricted_run(kube: FakeKube) -> Any:
    """Reconcile a run without a bridge whose egress is restricted."""
    run = agentrun([], bridge={"enabled": False}, network={"egress": "restricted"})
    return await run_reconcile.reconcile(
        kube,
        run,
        None,
        AgentRenderSettings(),
        now=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
        network_settings=NetworkPolicySettings(),
    )


async def test_a_tenants_policy_of_the_runs_name_keeps_the_pod_from_being_created() -> None:
    kube = FakeKube()
    before = copy.deepcopy(kube.put(NETWORKPOLICIES, tenants_policy("triage")))
    done = await reconcile_restricted_run(kube)
    assert kube.objects[("networkpolicies", "ns", "triage")] == before
    assert (PODS.plural, "ns", "triage") not in kube.objects
    policy = find(done.patch["conditions"], "NetworkPolicy")
    assert policy is not None and (policy["status"], policy["reason"]) == ("False", "NameConflict")
    ready = find(done.patch["conditions"], "Ready")
    assert ready is not None and ready["reason"] == "NameConflict"


async def test_a_restricted_runs_policy_exists_before_its_pod() -> None:
    kube = FakeKube()
    done = await reconcile_restricted_run(kube)
    assert kube.applied == [("networkpolicies", "triage"), ("pods", "triage")]
    policy = find(done.patch["conditions"], "NetworkPolicy")
    assert policy is not None and (policy["status"], policy["reason"]) == ("True", "Restricted")


async def test_turned_off_the_operator_removes_its_own_policy_and_no_other() -> None:
    kube = FakeKube()
    server = mcpserver()
    await managed.apply_network_policy(kube, server, IN_CLUSTER)
    assert ("networkpolicies", "ns", "srv") in kube.objects
    off = NetworkPolicySettings(enabled=False)
    await managed.apply_network_policy(kube, server, off)
    assert ("networkpolicies", "ns", "srv") not in kube.objects
    condition = server_network.condition(server, off)
    assert (condition.status, condition.reason) == ("False", "Disabled")
    # A tenant's policy of that name is not the server's to delete.
    before = copy.deepcopy(kube.put(NETWORKPOLICIES, tenants_policy("srv")))
    await managed.apply_network_policy(kube, server, off)
    assert kube.objects[("networkpolicies", "ns", "srv")] == before


# -- drift: who the owned policies' events wake ------------------------------------------


def owned(*managers: str, deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": "srv",
        "ownerReferences": [{"kind": "MCPServer", "uid": "uid-srv", "controller": True}],
        "managedFields": [{"manager": m} for m in managers],
    }
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": metadata}


def test_only_a_change_by_someone_else_wakes_the_policys_owner() -> None:
    assert network_policies.drifted(owned(FIELD_MANAGER)) == []
    assert network_policies.drifted(owned(FIELD_MANAGER, "kubectl-edit")) == [
        ("MCPServer", "uid-srv")
    ]
    assert network_policies.drifted(owned(FIELD_MANAGER, deleting=True)) == [
        ("MCPServer", "uid-srv")
    ]
    assert network_policies.owners(owned(FIELD_MANAGER)) == [("MCPServer", "uid-srv")]


class Discovering(FakeKube):
    """The API server's ``GET /api`` answer, and nothing else."""

    async def request(self, method: str, path: str, **_: Any) -> Any:
        assert (method, path) == ("GET", "/api")
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": "10.0.0.5:6443"},
                {"clientCIDR": "::/0", "serverAddress": "[fd00::5]:6443"},
                {"clientCIDR": "0.0.0.0/0", "serverAddress": "api.example:6443"},
            ],
        }


async def test_outside_the_cluster_the_api_servers_advertised_addresses_are_let_in() -> None:
    kube = Discovering()
    kube.in_cluster = False
    settings = await network_policies.where_probes_come_from(kube, NetworkPolicySettings())
    assert settings.api_server_addresses == ("10.0.0.5", "fd00::5")
    assert settings.operator_namespace is None
