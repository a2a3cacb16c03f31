"""The chart's install modes and its README: namespace-scoped RBAC, high availability.

``helm template`` renders the chart (helm from ``make helm``); the operator's own argument
parser reads the rendered arguments, so a value that renders a flag the operator does not
know fails here.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import needs

CHART = Path(__file__).resolve().parents[2] / "charts" / "mcp-operator"
CLUSTER_SCOPED = {
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("", "namespaces"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"),
}


@pytest.fixture(scope="module")
def helm() -> str:
    return needs.helm()


def render(helm: str, *values: str) -> list[dict[str, Any]]:
    result = subprocess.run(
        [helm, "template", "mcpo", str(CHART), "--namespace", "ops", *values],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_namespace_scoped_renders_roles_in_each_namespace_and_no_cluster_role(helm: str) -> None:
    scoped = render(
        helm, "--set", "namespaceScoped=true", "--set", "watchNamespaces={team-a,team-b}"
    )
    assert not of_kind(scoped, "ClusterRole") and not of_kind(scoped, "ClusterRoleBinding")
    roles = {
        (r["metadata"]["namespace"], r["metadata"]["name"]): r for r in of_kind(scoped, "Role")
    }
    cluster_role = of_kind(render(helm), "ClusterRole")[0]
    wanted = {g for g in grants(cluster_role["rules"]) if (g[0], g[1]) not in CLUSTER_SCOPED}
    for namespace in ("team-a", "team-b"):
        assert grants(roles[(namespace, "mcpo-mcp-operator")]["rules"]) == wanted
    bindings = of_kind(scoped, "RoleBinding")
    assert {b["metadata"]["namespace"] for b in bindings} == {"team-a", "team-b", "ops"}
    for binding in bindings:
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "mcpo-mcp-operator", "namespace": "ops"}
        ]


def test_namespace_scoped_arguments_are_ones_the_operator_accepts(helm: str) -> None:
    from mcp_operator.cli import build_parser

    scoped = render(helm, "--set", "namespaceScoped=true", "--set", "watchNamespaces={team-a}")
    args = of_kind(scoped, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]
    parsed = build_parser().parse_args(args)
    assert parsed.namespace_scoped and parsed.namespace == ["team-a"]
    assert parsed.leader_election_lease == "mcpo-mcp-operator"


def test_namespace_scoped_without_namespaces_is_refused_by_the_schema(helm: str) -> None:
    result = subprocess.run(
        [helm, "template", "mcpo", str(CHART), "--set", "namespaceScoped=true"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0 and "watchNamespaces" in result.stderr


def test_high_availability_renders_two_replicas_a_budget_and_spreading(helm: str) -> None:
    objects = render(helm)
    deployment = of_kind(objects, "Deployment")[0]
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    spread = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert spread["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] == 100
    (budget,) = of_kind(objects, "PodDisruptionBudget")
    assert budget["spec"]["minAvailable"] == 1
    single = render(helm, "--set", "leaderElection.enabled=false", "--set", "replicaCount=1")
    assert not of_kind(single, "PodDisruptionBudget")
    deployment = of_kind(single, "Deployment")[0]
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert "--no-leader-election" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def test_the_service_monitor_is_rendered_only_when_asked(helm: str) -> None:
    assert not of_kind(render(helm), "ServiceMonitor")
    (monitor,) = of_kind(
        render(helm, "--set", "metrics.serviceMonitor.enabled=true"), "ServiceMonitor"
    )
    (service,) = of_kind(render(helm), "Service")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]


# -- the README's value table ---------------------------------------------------------------


STRUCTURED = ("podSecurityContext", "securityContext", "resources", "podLabels")
"""Mappings whose default is documented as one value (Kubernetes shapes, not settings)."""


def leaves(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Every value by its dotted path; a mapping that is a default (``{}``) is one value."""
    found: dict[str, Any] = {}
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and key not in STRUCTURED:
            found.update(leaves(value, path + "."))
        else:
            found[path] = value
    return found


def test_the_readme_value_table_lists_every_value_with_its_default() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    readme = (CHART / "README.md").read_text()
    rows = dict(re.findall(r"^\| `([A-Za-z0-9_.]+)` \| `([^`]*)` \|", readme, re.MULTILINE))
    expected = leaves(values)
    missing, unknown = sorted(set(expected) - set(rows)), sorted(set(rows) - set(expected))
    assert not missing and not unknown, f"missing: {missing}; unknown: {unknown}"
    for path, default in expected.items():
        if isinstance(default, dict | list) and default:
            continue  # a structured default: the table says "see values.yaml"
        assert yaml.safe_load(rows[path] or "null") == (default if default != "" else None), path


# -- every operator setting is a chart value -------------------------------------------------

SET = {
    # flag dest: (chart values, the value the flag then parses to)
    "namespace": (["--set", "watchNamespaces={team-a}"], ["team-a"]),
    "liveness": (["--set", "livenessPort=9000"], "http://0.0.0.0:9000/healthz"),
    "log_format": (["--set", "logFormat=text"], "text"),
    "verbose": (["--set", "verbose=true"], True),
    "debug": (["--set", "debug=true"], True),
    "adapter_image": (["--set", "adapterImage=registry.example/mcpo:1"], "registry.example/mcpo:1"),
    "dataplane_image": (
        ["--set", "dataplaneImage=registry.example/mcp-dataplane@sha256:" + "d" * 64],
        "registry.example/mcp-dataplane@sha256:" + "d" * 64,
    ),
    "cluster_domain": (["--set", "clusterDomain=corp.internal"], "corp.internal"),
    "max_listeners": (["--set", "maxListeners=0"], 0),
    "max_concurrent_probes": (["--set", "maxConcurrentProbes=8"], 8),
    "bridge_enabled": (["--set", "bridgeEnabled=false"], "false"),
    "no_leader_election": (
        ["--set", "leaderElection.enabled=false", "--set", "replicaCount=1"],
        True,
    ),
    "leader_election_namespace": ([], "ops"),  # the release's namespace, through POD_NAMESPACE
    "leader_election_lease": ([], "mcpo-mcp-operator"),
    "leader_election_lease_duration": (["--set", "leaderElection.leaseDurationSeconds=30"], 30),
    "leader_election_renew_deadline": (["--set", "leaderElection.renewDeadlineSeconds=20"], 20.0),
    "leader_election_retry_period": (["--set", "leaderElection.retryPeriodSeconds=4"], 4.0),
    "metrics": (["--set", "metrics.port=9100"], "http://0.0.0.0:9100/metrics"),
    "shard_selector": (["--set", "shardSelector=shard=a"], "shard=a"),
    "allowed_registries": (
        ["--set", "allowedRegistries={ghcr.io,*.example}"],
        "ghcr.io,*.example",
    ),
    "insecure_registries": (["--set", "insecureRegistries={registry:5000}"], "registry:5000"),
    "bridge_images": (
        ["--set", "bridgeImages={registry.example/bridge:*}"],
        "registry.example/bridge:*",
    ),
    "private_destinations": (["--set", "privateDestinations=labelled"], "labelled"),
    "loopback_destinations": (["--set", "loopbackDestinations=allowed"], "allowed"),
    "tenant_admission_policy": ([], "mcpo-mcp-operator-tenants"),
    "bridge_key_policy": ([], "mcpo-mcp-operator-bridge-keys"),
    "metrics_scrapers": (
        ["--set", "metrics.scrapers={monitoring/prometheus,ops/vm}"],
        "monitoring/prometheus,ops/vm",
    ),
    "identity": ([], "ops/mcpo-mcp-operator"),
    "network_policies": (["--set", "networkPolicies.enabled=false"], "disabled"),
    "agent_egress": (["--set", "networkPolicies.agentEgress=restricted"], "restricted"),
    # The chart's own selector labels of the operator's Pods.
    "operator_pod_labels": (
        [],
        "app.kubernetes.io/component=operator,app.kubernetes.io/instance=mcpo,"
        "app.kubernetes.io/name=mcp-operator",
    ),
    "dns_namespace": (["--set", "networkPolicies.dns.namespace=dns"], "dns"),
    "dns_pod_labels": (
        ["--set", "networkPolicies.dns.podLabels.k8s-app=coredns"],
        "k8s-app=coredns",
    ),
    "dns_cidrs": (
        ["--set", "networkPolicies.dns.cidrs={169.254.20.10/32}"],
        "169.254.20.10/32",
    ),
    "namespace_scoped": (
        ["--set", "namespaceScoped=true", "--set", "watchNamespaces={team-a}"],
        True,
    ),
}


def test_every_operator_flag_is_set_by_a_chart_value(
    helm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_operator.cli import build_parser
    from mcp_operator.commands import run as run_command

    monkeypatch.setenv("POD_NAMESPACE", "ops")  # what the chart's Pod gets from its fieldRef
    parser = build_parser()
    own = argparse.ArgumentParser()
    run_command.add_arguments(own)
    flags = {action.dest for action in own._actions if action.option_strings}
    flags.discard("help")
    assert flags == set(SET), f"flags without a chart value: {sorted(flags - set(SET))}"
    for dest, (values, expected) in SET.items():
        deployment = of_kind(render(helm, *values), "Deployment")[0]
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        assert getattr(parser.parse_args(args), dest) == expected, (dest, args)
