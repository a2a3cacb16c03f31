"""No confused deputy: Secrets and ServiceAccounts are used only when opted in for MCP servers.

Without the label ``mcp-operator.dev/for-mcp-servers=true``, the right to create an
MCPServer would be the right to send any Secret of the namespace to any URL, to put it
into a Pod of one's own image, or to run Pods as any ServiceAccount.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_operator import OPT_IN_LABEL, OPT_IN_VALUE
from mcp_operator.controller.mcpserver import reconcile
from mcp_operator.kube import SERVICEACCOUNTS
from tests.unit.fakes import FakeKube
from tests.unit.test_mcpserver_reconcile import EXTERNAL, TOKEN_HEADER, Probe, run, server

MANAGED_HTTP = {"mode": "managed", "transport": "streamable-http"}


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> Probe:
    scripted = Probe()
    monkeypatch.setattr(reconcile, "discover", scripted)
    return scripted


def managed(**deployment: Any) -> dict[str, Any]:
    return {**MANAGED_HTTP, "deployment": {"image": "example/server:1", **deployment}}


async def test_a_header_secret_without_the_label_is_never_read_into_a_request(
    probe: Probe,
) -> None:
    kube = FakeKube()
    kube.put_secret("ns", "t", {"k": "Bearer s3cret"}, opted_in=False)
    result = await run(kube, server(**EXTERNAL, headers=[TOKEN_HEADER]))
    outcome = result.outcome
    assert (outcome.kind, outcome.reason, outcome.ready_reason) == (
        "failed",
        "SecretNotOptedIn",
        "SecretNotOptedIn",
    )
    assert f"{OPT_IN_LABEL}={OPT_IN_VALUE}" in outcome.message
    assert "s3cret" not in outcome.message
    assert probe.targets == []


async def test_with_the_label_the_header_is_sent(probe: Probe) -> None:
    kube = FakeKube()
    kube.put_secret("ns", "t", {"k": "Bearer s3cret"})
    result = await run(kube, server(**EXTERNAL, headers=[TOKEN_HEADER]))
    assert result.outcome.kind == "probed"
    assert probe.targets[0].headers["Authorization"] == "Bearer s3cret"


ENV_FROM_SECRET = [{"name": "DB", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}}]


@pytest.mark.parametrize(("present", "labelled"), [(False, False), (True, False)])
async def test_a_pod_env_secret_must_exist_and_be_opted_in_before_anything_is_applied(
    probe: Probe, present: bool, labelled: bool
) -> None:
    kube = FakeKube()
    if present:
        kube.put_secret("ns", "db", {"pw": "hunter2"}, opted_in=labelled)
    result = await run(kube, server(**managed(env=ENV_FROM_SECRET)))
    reason = "SecretNotOptedIn" if present else "SecretNotFound"
    assert (result.outcome.kind, result.outcome.ready_reason) == ("failed", reason)
    assert result.outcome.deployed is not None
    assert result.outcome.deployed.reason == reason
    assert kube.applied == []
    assert probe.targets == []


async def test_a_pod_env_secret_with_the_label_is_rendered(probe: Probe) -> None:
    kube = FakeKube()
    kube.put_secret("ns", "db", {"pw": "hunter2"})
    result = await run(kube, server(**managed(env=ENV_FROM_SECRET)))
    assert sorted(kube.applied) == [
        ("deployments", "srv"),
        ("networkpolicies", "srv"),
        ("services", "srv"),
    ]
    assert result.outcome.kind == "probed"


@pytest.mark.parametrize(
    ("labels", "reason"),
    [(None, "ServiceAccountNotFound"), ({}, "ServiceAccountNotOptedIn")],
)
async def test_a_named_service_account_must_be_opted_in(
    probe: Probe, labels: dict[str, str] | None, reason: str
) -> None:
    kube = FakeKube()
    if labels is not None:
        kube.put(
            SERVICEACCOUNTS, {"metadata": {"name": "admin", "namespace": "ns", "labels": labels}}
        )
    result = await run(kube, server(**managed(serviceAccountName="admin")))
    assert (result.outcome.kind, result.outcome.ready_reason) == ("failed", reason)
    assert kube.applied == []


async def test_an_opted_in_service_account_runs_the_pods(probe: Probe) -> None:
    kube = FakeKube()
    labels = {OPT_IN_LABEL: OPT_IN_VALUE}
    kube.put(SERVICEACCOUNTS, {"metadata": {"name": "tools", "namespace": "ns", "labels": labels}})
    await run(kube, server(**managed(serviceAccountName="tools")))
    deployment = kube.objects[("deployments", "ns", "srv")]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "tools"


async def test_without_a_named_account_pods_run_as_default_without_a_token(probe: Probe) -> None:
    kube = FakeKube()
    await run(kube, server(**managed()))
    pod = kube.objects[("deployments", "ns", "srv")]["spec"]["template"]["spec"]
    assert "serviceAccountName" not in pod
    assert pod["automountServiceAccountToken"] is False
