"""The installation manifests agree with each other and with the code, without a cluster.

``deploy/`` (kustomize) and ``charts/mcp-operator/`` (Helm) install the same
operator: the same CRDs (copies of ``crds/``, made by ``make crds``), the same
RBAC rules, the same restricted Pod. These tests fail on drift between them,
and on an API resource in ``mcp_operator.kube`` that no RBAC rule covers.
``tests/e2e/test_install.py`` installs both on a real API server.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_operator import kube
from mcp_operator.dev.processes import kubectl_path
from tests.support import needs

REPO = Path(__file__).resolve().parents[2]
CRDS = REPO / "crds"
DEPLOY = REPO / "deploy"
CHART = REPO / "charts" / "mcp-operator"
CRD_COPIES = [DEPLOY / "crds", CHART / "crds", REPO / "operator" / "mcp_operator" / "dev" / "crds"]
COPY_HEADER = (
    "# Copied from crds/{name} by hack/sync-crds.sh (`make crds`): "
    "edit the source, not this copy.\n"
)
"""The first line of every copy (hack/sync-crds.sh writes it); the rest is the source."""


@pytest.fixture(scope="module")
def helm() -> str:
    return needs.helm()


def helm_template(helm: str, *args: str) -> list[dict[str, Any]]:
    result = subprocess.run(
        [helm, "template", "mcp-operator", str(CHART), "--namespace", "mcp-operator-system", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def deploy_objects() -> list[dict[str, Any]]:
    """What ``kubectl apply -k deploy/`` applies (kustomize, as kubectl runs it)."""
    result = subprocess.run(
        [kubectl_path(), "kustomize", str(DEPLOY)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def one(objects: Iterable[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def normalized_rules(role: dict[str, Any]) -> list[tuple[tuple[str, ...], ...]]:
    """Rules as sorted tuples: order of rules and of list items does not matter."""
    keys = ("apiGroups", "resources", "resourceNames", "nonResourceURLs", "verbs")
    return sorted(
        tuple(tuple(sorted(rule.get(key) or [])) for key in keys) for rule in role["rules"]
    )


def pod_templates(objects: Iterable[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for obj in objects:
        if obj["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet"):
            yield f"{obj['kind']}/{obj['metadata']['name']}", obj["spec"]["template"]["spec"]
        elif obj["kind"] == "Pod":
            yield f"Pod/{obj['metadata']['name']}", obj["spec"]


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    """What keeps a Pod spec from the "restricted" Pod Security Standard (plus a read-only root)."""
    problems = []
    pod_context = pod.get("securityContext") or {}
    for container in [*(pod.get("initContainers") or []), *pod["containers"]]:
        name = container["name"]
        context = container.get("securityContext") or {}
        if context.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation must be false")
        if context.get("privileged"):
            problems.append(f"{name}: must not be privileged")
        if "ALL" not in ((context.get("capabilities") or {}).get("drop") or []):
            problems.append(f"{name}: capabilities must drop ALL")
        if (context.get("capabilities") or {}).get("add"):
            problems.append(f"{name}: must not add capabilities")
        if context.get("runAsNonRoot", pod_context.get("runAsNonRoot")) is not True:
            problems.append(f"{name}: runAsNonRoot must be true")
        if context.get("runAsUser", pod_context.get("runAsUser")) == 0:
            problems.append(f"{name}: must not run as UID 0")
        seccomp = context.get("seccompProfile") or pod_context.get("seccompProfile") or {}
        if seccomp.get("type") not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{name}: seccompProfile must be RuntimeDefault or Localhost")
        if context.get("readOnlyRootFilesystem") is not True:
            problems.append(f"{name}: readOnlyRootFilesystem must be true")
    if pod.get("hostNetwork") or pod.get("hostPID") or pod.get("hostIPC"):
        problems.append("the Pod must not share the host's namespaces")
    return problems


# -- CRDs -------------------------------------------------------------------------------


@pytest.mark.parametrize("copies", CRD_COPIES, ids=lambda p: str(p.relative_to(REPO)))
def test_crd_copies_are_the_crds_of_crds_folder_byte_for_byte(copies: Path) -> None:
    sources = {p.name: p.read_text() for p in sorted(CRDS.glob("*.yaml"))}
    assert sources, "crds/ holds no CRDs"
    copied = {p.name: p.read_text() for p in sorted(copies.glob("*.yaml"))}
    assert set(copied) == set(sources), f"{copies} differs from crds/: run `make crds`"
    for name, text in sources.items():
        expected = COPY_HEADER.format(name=name) + text
        assert copied[name] == expected, (
            f"{copies / name} differs from crds/{name}: run `make crds`"
        )


def test_kustomization_installs_every_crd() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    crds = {r for r in kustomization["resources"] if r.startswith("crds/")}
    assert crds == {f"crds/{p.name}" for p in CRDS.glob("*.yaml")}


# -- RBAC -------------------------------------------------------------------------------


def test_deploy_and_chart_grant_identical_rbac_rules(helm: str) -> None:
    deployed = one(deploy_objects(), "ClusterRole")
    charted = one(helm_template(helm), "ClusterRole")
    assert normalized_rules(charted) == normalized_rules(deployed)
    # The same holds when the chart watches some namespaces only: still a ClusterRole.
    narrowed = one(helm_template(helm, "--set", "watchNamespaces={team-a,team-b}"), "ClusterRole")
    assert normalized_rules(narrowed) == normalized_rules(deployed)


def test_the_bindings_give_the_role_to_the_operators_service_account(helm: str) -> None:
    for objects in (deploy_objects(), helm_template(helm)):
        role = one(objects, "ClusterRole")
        binding = one(objects, "ClusterRoleBinding")
        account = one(objects, "ServiceAccount")
        deployment = one(objects, "Deployment")
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role["metadata"]["name"],
        }
        assert binding["subjects"] == [
            {
                "kind": "ServiceAccount",
                "name": account["metadata"]["name"],
                "namespace": account["metadata"]["namespace"],
            }
        ]
        pod = deployment["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == account["metadata"]["name"]
        assert deployment["metadata"]["namespace"] == account["metadata"]["namespace"]


def all_rules(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rules of the ClusterRole and of every Role."""
    return [rule for o in objects if o["kind"] in ("ClusterRole", "Role") for rule in o["rules"]]


def test_the_operator_may_mint_tokens_for_its_own_service_account_only(helm: str) -> None:
    for objects in (deploy_objects(), helm_template(helm)):
        account = one(objects, "ServiceAccount")["metadata"]
        minting = [r for r in all_rules(objects) if "serviceaccounts/token" in r["resources"]]
        assert minting == [
            {
                "apiGroups": [""],
                "resources": ["serviceaccounts/token"],
                "resourceNames": [account["name"]],
                "verbs": ["create"],
            }
        ]
        (role,) = [
            o
            for o in objects
            if o["kind"] == "Role" and "serviceaccounts/token" in str(o.get("rules"))
        ]
        assert role["metadata"]["namespace"] == account["namespace"]
        (binding,) = [
            o
            for o in objects
            if o["kind"] == "RoleBinding" and o["roleRef"]["name"] == role["metadata"]["name"]
        ]
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
        ]


def test_every_api_resource_the_code_calls_is_granted() -> None:
    """A new ``Resource`` in ``mcp_operator.kube`` needs an RBAC rule (and a reason for it)."""
    rules = all_rules(deploy_objects())
    granted = {(g, r) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]}
    resources = [v for v in vars(kube).values() if isinstance(v, kube.Resource)]
    assert resources
    missing = [
        f"{r.group or 'core'}/{r.plural}" for r in resources if (r.group, r.plural) not in granted
    ]
    assert not missing, f"no RBAC rule in deploy/rbac.yaml for {missing}"


def test_rbac_grants_no_wildcards_and_deletes_only_finished_agentruns() -> None:
    for rule in all_rules(deploy_objects()):
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[key], rule
        if "update" in rule["verbs"]:
            # Leader election replaces its Lease (guarded by resourceVersion): the one update.
            assert (rule["apiGroups"], rule["resources"]) == (["coordination.k8s.io"], ["leases"])
        assert not set(rule["verbs"]) & {
            "deletecollection",
            "escalate",
            "bind",
            "impersonate",
        }, rule
        if "delete" in rule["verbs"]:
            # ttlSecondsAfterFinished, and the owner's own NetworkPolicy once it is no longer
            # wanted: the only deletes the operator makes.
            assert (rule["apiGroups"], rule["resources"]) in (
                (["mcp-operator.dev"], ["agentruns"]),
                (["networking.k8s.io"], ["networkpolicies"]),
            ), rule


# -- the operator's Pod -----------------------------------------------------------------


def test_every_container_in_deploy_is_restricted() -> None:
    templates = list(pod_templates(deploy_objects()))
    assert templates
    for name, pod in templates:
        assert restricted_violations(pod) == [], name


@pytest.mark.parametrize(
    "values",
    [[], ["--set", "watchNamespaces={team-a}", "--set", "logFormat=text"]],
    ids=["defaults", "watch-one-namespace"],
)
def test_every_container_in_the_chart_is_restricted(helm: str, values: list[str]) -> None:
    templates = list(pod_templates(helm_template(helm, *values)))
    assert templates
    for name, pod in templates:
        assert restricted_violations(pod) == [], name


def test_the_namespace_enforces_the_restricted_pod_security_standard() -> None:
    namespace = one(deploy_objects(), "Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for obj in deploy_objects():
        if obj["kind"] not in (
            "Namespace",
            "CustomResourceDefinition",
            "ClusterRole",
            "ClusterRoleBinding",
        ):
            assert obj["metadata"]["namespace"] == namespace["metadata"]["name"], obj["kind"]


def test_chart_defaults_render_the_same_operator_pod_as_deploy(helm: str) -> None:
    def essence(deployment: dict[str, Any]) -> dict[str, Any]:
        pod = deployment["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        return {
            "replicas": deployment["spec"]["replicas"],
            "strategy": deployment["spec"]["strategy"],
            "podSecurityContext": pod["securityContext"],
            "volumes": pod["volumes"],
            "antiAffinity": pod["affinity"]["podAntiAffinity"][
                "preferredDuringSchedulingIgnoredDuringExecution"
            ][0]["podAffinityTerm"]["topologyKey"],
            "container": {
                k: v
                for k, v in container.items()
                if k != "image"
                # The chart names the Lease after the release; deploy/ keeps the default.
                and k != "args"
            },
            "args": [a for a in container["args"] if not a.startswith("--leader-election")],
            "image": container["image"],
        }

    deployed = essence(one(deploy_objects(), "Deployment"))
    charted = essence(one(helm_template(helm), "Deployment"))
    assert charted == deployed
    assert deployed["replicas"] == 2
    assert deployed["strategy"]["type"] == "RollingUpdate"


def test_deploy_chart_package_and_sidecars_agree_on_the_image(helm: str) -> None:
    from mcp_operator import __version__
    from mcp_operator.controller.mcpserver.render import RenderSettings

    image = f"ghcr.io/mcp-operator/mcp-operator:{__version__}"
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == __version__
    for objects in (deploy_objects(), helm_template(helm)):
        pod = one(objects, "Deployment")["spec"]["template"]["spec"]
        assert pod["containers"][0]["image"] == image
    # The adapter (and bridge) sidecars run the operator's own image.
    assert RenderSettings().adapter_image == image


def test_chart_passes_watch_namespaces_as_namespace_flags(helm: str) -> None:
    deployment = one(helm_template(helm, "--set", "watchNamespaces={team-a,team-b}"), "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "run"
    assert [a for a in args if a.startswith("--namespace=")] == [
        "--namespace=team-a",
        "--namespace=team-b",
    ]
    everything = one(helm_template(helm), "Deployment")
    assert not any(
        a.startswith("--namespace")
        for a in everything["spec"]["template"]["spec"]["containers"][0]["args"]
    )


def test_the_operator_command_line_accepts_the_rendered_arguments(helm: str) -> None:
    from mcp_operator.cli import build_parser

    parser = build_parser()
    for objects in (deploy_objects(), helm_template(helm, "--set", "watchNamespaces={a}")):
        args = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        parsed = parser.parse_args(args)
        assert parsed.command == "run"
        assert parsed.liveness == "http://0.0.0.0:8080/healthz"
        assert parsed.bridge_enabled == "true"
    off = helm_template(helm, "--set", "bridgeEnabled=false")
    args = one(off, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert parser.parse_args(args).bridge_enabled == "false"


@pytest.mark.parametrize(
    "values",
    [
        ["--set", "leaderElection.enabled=false"],
        ["--set", "replicaCount=0"],
        ["--set", "logFormat=xml"],
        ["--set", "maxConcurrentProbes=0"],
        ["--set", "bridgeEnabled=maybe"],
        ["--set", "watchNamespaces={Not_A_Namespace}"],
        ["--set", "image.pullPolicy=Sometimes"],
        ["--set", "unknownValue=1"],
    ],
    ids=lambda v: v[1],
)
def test_the_chart_schema_rejects_bad_values(helm: str, values: list[str]) -> None:
    result = subprocess.run(
        [helm, "template", "mcp-operator", str(CHART), *values],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert (
        "values don't meet the specifications of the schema" in result.stderr
        or "at '/" in result.stderr
    )


def commented_keys(lines: list[str], indent: str) -> dict[str, bool]:
    """Keys at exactly ``indent``, each with whether a comment line sits right above it."""
    keys = {}
    for index, line in enumerate(lines):
        rest = line[len(indent) :]
        if line.startswith(indent) and rest[:1].isalpha() and ":" in rest:
            keys[rest.split(":")[0]] = index > 0 and lines[index - 1].strip().startswith("#")
    return keys


def test_every_chart_value_has_a_comment() -> None:
    text = (CHART / "values.yaml").read_text()
    lines = text.splitlines()
    values = yaml.safe_load(text)
    top = commented_keys(lines, "")
    assert set(top) == set(values)
    # Groups of settings document each member; other mappings are defaults documented as one.
    for group in ("image", "serviceAccount", "leaderElection", "podDisruptionBudget", "metrics"):
        top.pop(group)  # a heading; its members carry the comments
        block = lines[lines.index(f"{group}:") + 1 :]
        block = block[
            : next((i for i, ln in enumerate(block) if ln and not ln.startswith(" ")), None)
        ]
        members = commented_keys(block, "  ")
        assert set(members) == set(values[group])
        assert all(members.values()), f"{group}: every member needs a comment: {members}"
    assert all(top.values()), f"values without a comment: {[k for k, v in top.items() if not v]}"


def test_every_rbac_rule_says_why() -> None:
    templates = CHART / "templates"
    for path in (
        DEPLOY / "rbac.yaml",
        templates / "clusterrole.yaml",
        templates / "_rbac.tpl",
        templates / "leader-election-role.yaml",
    ):
        lines = path.read_text().splitlines()
        rules = [i for i, line in enumerate(lines) if line.strip().startswith("- apiGroups:")]
        assert rules, path
        for index in rules:
            assert lines[index - 1].strip().startswith("#"), f"{path}:{index + 1} has no comment"
