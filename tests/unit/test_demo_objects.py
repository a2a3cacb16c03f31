"""What ``make demo`` applies and how it reads its run back (``dev/demo_objects.py``).

The objects are checked against the API models (the CRDs' twins, checked against them by
``test_models_match_crds``) and, for the chart, by ``helm template``: what the demo installs
is what a user would. The real API server and the real node see them in
``tests/e2e/test_demo.py``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_operator.api.agentrun import AgentRun
from mcp_operator.api.mcpserver import MCPServer
from mcp_operator.dev import demo_objects as objects
from tests.support import needs

CHART = Path(__file__).resolve().parents[2] / "charts" / "mcp-operator"
DIGEST = "sha256:" + "a" * 64
OPERATOR = f"127.0.0.1:5000/mcp-operator:0123456789abcdef@{DIGEST}"
DATAPLANE = f"127.0.0.1:5000/mcp-dataplane:0123456789abcdef@{DIGEST}"
EVERYTHING = f"127.0.0.1:5000/server-everything:0123456789abcdef@{DIGEST}"
AGENT = f"127.0.0.1:5000/demo-agent:0123456789abcdef@{DIGEST}"


def _containers(pod_spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod_spec.get("initContainers", []), *pod_spec["containers"]]


def test_every_object_is_in_the_demo_namespace_and_labelled_as_the_demos() -> None:
    everything = [
        *objects.external_server(EVERYTHING),
        *objects.mcpservers(EVERYTHING),
        objects.agentrun(AGENT),
    ]
    key, value = objects.DEMO_LABEL
    for item in everything:
        assert item["metadata"]["namespace"] == objects.NAMESPACE, item["metadata"]
        assert item["metadata"]["labels"][key] == value, item["metadata"]
    labels = objects.namespace()["metadata"]["labels"]
    assert labels[key] == value
    assert labels["mcp-operator.dev/private-destinations"] == "allowed"


def test_the_servers_and_the_run_are_valid_objects_of_our_api() -> None:
    managed, external = (MCPServer.model_validate(item) for item in objects.mcpservers(EVERYTHING))
    run = AgentRun.model_validate(objects.agentrun(AGENT))
    assert managed.spec.mode == "managed" and managed.spec.deployment is not None
    assert managed.spec.deployment.image == EVERYTHING
    # what the image runs, named: the operator's Pod need not reach a loopback registry
    assert managed.spec.deployment.command == ["node", objects.EVERYTHING_ENTRY]
    assert managed.spec.deployment.args == ["stdio"]
    assert external.spec.mode == "external"
    assert external.spec.url == objects.external_url()
    assert [ref.name for ref in run.spec.mcp_servers] == [objects.MANAGED, objects.EXTERNAL]
    assert run.spec.agent.image == AGENT
    assert run.spec.bridge.policy is not None and run.spec.bridge.policy.pii is not None
    assert run.spec.bridge.policy.pii.arguments == "block"


def test_the_external_server_runs_restricted_with_the_port_its_url_names() -> None:
    deployment, service = objects.external_server(EVERYTHING)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in _containers(pod):
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True
        assert security["capabilities"] == {"drop": ["ALL"]}
        assert security["allowPrivilegeEscalation"] is False
    (server,) = pod["containers"]
    assert server["args"] == ["streamableHttp"]
    assert {"name": "PORT", "value": str(objects.EXTERNAL_PORT)} in server["env"]
    assert service["spec"]["ports"][0]["port"] == objects.EXTERNAL_PORT
    assert f"{service['metadata']['name']}.{objects.NAMESPACE}.svc." in objects.external_url()


def test_an_image_reference_becomes_the_charts_repository_and_a_digest_pinned_tag() -> None:
    assert objects.split_reference(OPERATOR) == (
        "127.0.0.1:5000/mcp-operator",
        f"0123456789abcdef@{DIGEST}",
    )
    with pytest.raises(ValueError, match="not name:tag@sha256"):
        objects.split_reference(f"127.0.0.1:5000/mcp-operator@{DIGEST}")
    with pytest.raises(ValueError, match="not name:tag@sha256"):
        objects.split_reference("127.0.0.1:5000/mcp-operator:1")


def test_the_chart_with_the_demos_values_runs_the_pinned_image_watching_the_demo_only(
    tmp_path: Path,
) -> None:
    helm = needs.helm()
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(objects.chart_values(OPERATOR, DATAPLANE)))
    rendered = subprocess.run(
        [helm, "template", objects.RELEASE, str(CHART), "-n", objects.NAMESPACE, "-f", str(values)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (deployment,) = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == OPERATOR
    args = container["args"]
    assert "--private-destinations=labelled" in args, args
    assert f"--dataplane-image={DATAPLANE}" in args, "managed servers run the compiled adapter"
    assert [a for a in args if a.startswith("--namespace=")] == [
        f"--namespace={objects.NAMESPACE}"
    ], args


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([], "Created"),
        ([{"type": "Ready", "status": "False", "reason": "ServerNotReady"}], "ServerNotReady"),
        ([{"type": "Ready", "status": "False", "reason": "PodPending"}], "PodPending"),
        ([{"type": "Ready", "status": "True", "reason": "Running"}], "Running"),
        (
            [
                {"type": "Ready", "status": "False", "reason": "Completed"},
                {"type": "Succeeded", "status": "True", "reason": "Completed"},
            ],
            "Succeeded",
        ),
        (
            [
                {"type": "Ready", "status": "False", "reason": "Error"},
                {"type": "Failed", "status": "True", "reason": "Error"},
            ],
            "Failed",
        ),
    ],
)
def test_the_phase_of_a_run_is_how_it_ended_or_why_it_is_not_ready(
    conditions: list[dict[str, str]], expected: str
) -> None:
    assert objects.phase({"status": {"conditions": conditions}}) == expected


def test_the_audit_records_are_the_json_call_lines_of_the_bridge_log() -> None:
    calls = [{"tool": "managed_echo", "outcome": outcome} for outcome in objects.EXPECTED_OUTCOMES]
    log = "\n".join(
        [
            "2026-12-01 00:00:00 INFO Loaded the configuration",
            *(json.dumps(call) for call in calls),
            '{"not": "an audit line"}',
            "{broken",
        ]
    )
    assert objects.audit_records(log) == calls
