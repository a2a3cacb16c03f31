"""The chart's ValidatingAdmissionPolicies as rendered, and deploy/'s copy of them.

What the policies refuse is shown on a real API server (tests/e2e/test_admission_policies.py);
here: which policies each value renders, for which identity and which namespaces, that
deploy/ holds the same policies as the chart's defaults, and the pure part of the
operator's look for its tenant policy at start (``controller.admission``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_operator.controller.admission import admission_layer, bridge_key_policy, enforced
from mcp_operator.dev.processes import kubectl_path
from mcp_operator.kube import (
    VALIDATING_ADMISSION_POLICIES,
    VALIDATING_ADMISSION_POLICY_BINDINGS,
    KubeError,
    Resource,
)
from tests.support import needs
from tests.unit.fakes import FakeKube

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "mcp-operator"
POLICY_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


@pytest.fixture(scope="module")
def helm() -> str:
    return needs.helm()


def render(helm: str, *values: str, release: str = "mcpo", namespace: str = "ops") -> Any:
    result = subprocess.run(
        [helm, "template", release, str(CHART), "--namespace", namespace, *values],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def policies(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects if o["kind"] in POLICY_KINDS}


def args(objects: list[dict[str, Any]]) -> list[str]:
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    found: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    return found


def expressions(policy: dict[str, Any]) -> list[str]:
    return [v["expression"] for v in policy["spec"]["validations"]]


def test_the_defaults_render_four_policies_each_with_a_binding_that_denies(helm: str) -> None:
    found = policies(render(helm))
    names = {"mcpo-mcp-operator-tenants", "mcpo-mcp-operator-owned-children"}
    names |= {"mcpo-mcp-operator-pod-shape", "mcpo-mcp-operator-bridge-keys"}
    assert set(found) == {(kind, name) for kind in POLICY_KINDS for name in names}
    for name in names:
        binding = found[("ValidatingAdmissionPolicyBinding", name)]["spec"]
        assert binding == {"policyName": name, "validationActions": ["Deny"]}
        assert found[("ValidatingAdmissionPolicy", name)]["spec"]["failurePolicy"] == "Fail"


def test_the_guard_rails_match_the_charts_service_account_alone(helm: str) -> None:
    for values, account in (
        ([], "system:serviceaccount:ops:mcpo-mcp-operator"),
        (["--set", "serviceAccount.name=robot"], "system:serviceaccount:ops:robot"),
    ):
        found = policies(render(helm, *values))
        for name in ("owned-children", "pod-shape"):
            policy = found[("ValidatingAdmissionPolicy", f"mcpo-mcp-operator-{name}")]
            expression = f'request.userInfo.username == "{account}"'
            assert policy["spec"]["matchConditions"] == [
                {"name": "by-the-operator", "expression": expression}
            ]
    tenants = found[("ValidatingAdmissionPolicy", "mcpo-mcp-operator-tenants")]
    assert "matchConditions" not in tenants["spec"], "the tenant policy is for every user"


def test_the_bridge_key_policy_matches_everyone_but_the_operators(helm: str) -> None:
    def keys(*values: str) -> dict[str, Any]:
        found = policies(render(helm, *values))
        return found[("ValidatingAdmissionPolicy", "mcpo-mcp-operator-bridge-keys")]["spec"]

    own = "system:serviceaccount:ops:mcpo-mcp-operator"
    assert keys()["matchConditions"] == [
        {"name": "not-by-the-operator", "expression": f'!(request.userInfo.username in ["{own}"])'}
    ]
    shard = "system:serviceaccount:ops2:other"
    sharded = keys("--set", f"admissionPolicies.otherOperators={{{shard}}}")
    assert f'["{own}","{shard}"]' in sharded["matchConditions"][0]["expression"]
    variables = {v["name"]: v["expression"] for v in keys()["variables"]}
    assert variables["prefixes"] == '["mcpserver.mcp-operator.dev/"]'
    assert variables["watched"] == "true"
    watching = {
        v["name"]: v["expression"]
        for v in keys("--set", "watchNamespaces={team-a,team-b}")["variables"]
    }
    assert watching["prefixes"] == (
        '["mcpserver.mcp-operator.dev/team-a/","mcpserver.mcp-operator.dev/team-b/"]'
    )
    assert watching["watched"] == 'request.namespace in ["team-a","team-b"]'
    operations = {
        (tuple(rule["resources"]), tuple(rule["operations"]))
        for rule in keys()["matchConstraints"]["resourceRules"]
    }
    assert operations == {
        (("pods", "pods/ephemeralcontainers"), ("CREATE", "UPDATE")),
        (("serviceaccounts/token",), ("CREATE",)),
        (("pods/exec", "pods/attach"), ("CONNECT",)),
    }


def test_the_operator_is_told_of_its_bridge_key_policy_where_it_can_read_it(helm: str) -> None:
    assert "--bridge-key-policy=mcpo-mcp-operator-bridge-keys" in args(render(helm))
    off = render(helm, "--set", "admissionPolicies.bridgeKeys=false")
    assert ("ValidatingAdmissionPolicy", "mcpo-mcp-operator-bridge-keys") not in policies(off)
    assert not [a for a in args(off) if a.startswith("--bridge-key-policy")]
    scoped = render(helm, "--set", "namespaceScoped=true", "--set", "watchNamespaces={team-a}")
    assert not [a for a in args(scoped) if a.startswith("--bridge-key-policy")]


def test_the_guard_rails_hold_the_operator_to_the_watched_namespaces(helm: str) -> None:
    def namespace_rules(*values: str) -> list[str]:
        owned = policies(render(helm, *values))[
            ("ValidatingAdmissionPolicy", "mcpo-mcp-operator-owned-children")
        ]
        return [e for e in expressions(owned) if "request.namespace in" in e]

    assert namespace_rules() == [
        '!(request.namespace in ["kube-system","kube-public","kube-node-lease"])'
    ]
    assert namespace_rules("--set", "watchNamespaces={team-a,team-b}")[1:] == [
        'request.namespace in ["team-a","team-b"]'
    ]
    assert namespace_rules("--set", "admissionPolicies.deniedNamespaces={infra}") == [
        '!(request.namespace in ["infra"])'
    ]


def test_each_set_of_policies_can_be_turned_off(helm: str) -> None:
    no_tenants = render(helm, "--set", "admissionPolicies.tenants=false")
    assert {name for _, name in policies(no_tenants)} == {
        "mcpo-mcp-operator-owned-children",
        "mcpo-mcp-operator-pod-shape",
        "mcpo-mcp-operator-bridge-keys",
    }
    assert not [a for a in args(no_tenants) if a.startswith("--tenant-admission-policy")]
    no_rails = render(helm, "--set", "admissionPolicies.guardRails=false")
    assert {name for _, name in policies(no_rails)} == {
        "mcpo-mcp-operator-tenants",
        "mcpo-mcp-operator-bridge-keys",
    }
    assert "--tenant-admission-policy=mcpo-mcp-operator-tenants" in args(no_rails)
    assert not policies(
        render(
            helm,
            "--set",
            "admissionPolicies.tenants=false",
            "--set",
            "admissionPolicies.guardRails=false",
            "--set",
            "admissionPolicies.bridgeKeys=false",
        )
    )


def test_a_namespace_scoped_operator_is_not_told_of_a_policy_it_cannot_read(helm: str) -> None:
    scoped = render(helm, "--set", "namespaceScoped=true", "--set", "watchNamespaces={team-a}")
    assert ("ValidatingAdmissionPolicy", "mcpo-mcp-operator-tenants") in policies(scoped)
    assert not [a for a in args(scoped) if a.startswith("--tenant-admission-policy")]


def test_deploy_holds_the_policies_of_the_charts_defaults(helm: str) -> None:
    result = subprocess.run(
        [kubectl_path(), "kustomize", str(REPO / "deploy")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    deployed = policies([doc for doc in yaml.safe_load_all(result.stdout) if doc])
    charted = policies(render(helm, release="mcp-operator", namespace="mcp-operator-system"))
    assert set(deployed) == set(charted)
    for key, obj in charted.items():
        # (kustomize also sets its namespace on them, not knowing the kind to be
        # cluster-scoped; the API server drops it.)
        assert deployed[key]["spec"] == obj["spec"], (
            f"deploy/ differs from the chart: {key}; run `make admission-policies`"
        )


POLICY = {"metadata": {"name": "mcpo-tenants"}}


@pytest.mark.parametrize(
    ("binding", "expected"),
    [
        ({"spec": {"policyName": "mcpo-tenants", "validationActions": ["Deny"]}}, True),
        ({"spec": {"policyName": "mcpo-tenants", "validationActions": ["Warn", "Audit"]}}, False),
        ({"spec": {"policyName": "another", "validationActions": ["Deny"]}}, False),
        (None, False),
    ],
    ids=["denies", "only-warns", "binds-another-policy", "no-binding"],
)
def test_a_tenant_policy_counts_only_with_a_binding_of_it_that_denies(
    binding: dict[str, Any] | None, expected: bool
) -> None:
    assert enforced(POLICY, binding) is expected
    assert enforced(None, binding) is False


# -- the operator's look at start ----------------------------------------------------------


def fake_with(*objects: tuple[Any, dict[str, Any]]) -> FakeKube:
    kube = FakeKube()
    for resource, body in objects:
        kube.put(resource, body)
    return kube


DENYING = {"metadata": {"name": "mcpo-tenants"}, "spec": {"policyName": "mcpo-tenants"}}
DENYING["spec"]["validationActions"] = ["Deny"]


async def test_the_operator_reports_the_policy_layer_only_when_policy_and_binding_exist() -> None:
    both = fake_with(
        (VALIDATING_ADMISSION_POLICIES, POLICY), (VALIDATING_ADMISSION_POLICY_BINDINGS, DENYING)
    )
    assert await admission_layer(both, "mcpo-tenants") == "PolicyAndLabels"
    assert await admission_layer(both, None) == "Labels"
    assert await admission_layer(both, "another") == "Labels"
    unbound = fake_with((VALIDATING_ADMISSION_POLICIES, POLICY))
    assert await admission_layer(unbound, "mcpo-tenants") == "Labels"


async def test_a_policy_the_operator_may_not_read_is_reported_as_absent() -> None:
    class Forbidden(FakeKube):
        async def get(self, resource: Resource, namespace: str | None, name: str) -> Any:
            raise KubeError(403, "forbidden")

    assert await admission_layer(Forbidden(), "mcpo-tenants") == "Labels"


async def test_the_bridge_key_policy_is_reported_only_when_found_with_a_denying_binding() -> None:
    keys = {"metadata": {"name": "mcpo-keys"}, "spec": {}}
    binding = {"metadata": {"name": "mcpo-keys"}, "spec": {"policyName": "mcpo-keys"}}
    binding["spec"]["validationActions"] = ["Deny"]
    both = fake_with(
        (VALIDATING_ADMISSION_POLICIES, keys), (VALIDATING_ADMISSION_POLICY_BINDINGS, binding)
    )
    assert await bridge_key_policy(both, "mcpo-keys") == "mcpo-keys"
    assert await bridge_key_policy(both, None) is None
    unbound = fake_with((VALIDATING_ADMISSION_POLICIES, keys))
    assert await bridge_key_policy(unbound, "mcpo-keys") is None
