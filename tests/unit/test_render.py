"""Rendering of a managed MCPServer's children, pinned by golden files.

Regenerate the golden files after an intended change with
``UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_render.py`` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_operator.api import MCPServer
from mcp_operator.controller.mcpserver import render

GOLDEN = Path(__file__).parent / "golden"
SETTINGS = render.RenderSettings(adapter_image="registry.example/mcp-operator:1.2.3")


def server(name: str, **spec: Any) -> MCPServer:
    return MCPServer.model_validate(
        {
            "apiVersion": "mcp-operator.dev/v1alpha1",
            "kind": "MCPServer",
            "metadata": {"name": name, "namespace": "tools", "uid": "0000-1111", "generation": 2},
            "spec": {"mode": "managed", **spec},
        }
    )


STDIO = server(
    "everything",
    deployment={
        "image": "node:22-alpine",
        "command": ["npx", "-y", "@modelcontextprotocol/server-everything"],
        "args": ["stdio"],
        "env": [
            {"name": "LOG_LEVEL", "value": "debug"},
            {"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": "keys", "key": "api"}}},
        ],
        "resources": {"limits": {"memory": "256Mi"}},
        "replicas": 2,
    },
)
HTTP = server(
    "web",
    transport="streamable-http",
    deployment={"image": "example/mcp:1", "port": 3001, "path": "/", "args": ["--http"]},
)


def check_golden(name: str, rendered: dict[str, Any]) -> None:
    path = GOLDEN / f"{name}.yaml"
    text = yaml.safe_dump(rendered, sort_keys=False)
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{path.name} differs; UPDATE_GOLDEN=1 to regenerate"


@pytest.mark.parametrize(
    ("name", "rendered"),
    [
        ("stdio-deployment", render.deployment(STDIO, SETTINGS, secrets_version="abc123")),
        ("stdio-service", render.service(STDIO)),
        ("http-deployment", render.deployment(HTTP, SETTINGS)),
        ("http-service", render.service(HTTP)),
    ],
)
def test_rendered_children_match_the_golden_files(name: str, rendered: dict[str, Any]) -> None:
    check_golden(name, rendered)


def pod_containers(deployment: dict[str, Any]) -> list[dict[str, Any]]:
    spec = deployment["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


@pytest.mark.parametrize("obj", [STDIO, HTTP], ids=["stdio", "http"])
def test_every_container_runs_restricted(obj: MCPServer) -> None:
    deployment = render.deployment(obj, SETTINGS)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    for container in pod_containers(deployment):
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}
        assert security["runAsNonRoot"] is True


def test_the_stdio_server_runs_the_users_command_with_stdio_on_the_fifos() -> None:
    containers = {c["name"]: c for c in pod_containers(render.deployment(STDIO, SETTINGS))}
    assert containers["server"]["command"] == [
        "/bin/sh",
        "-c",
        render.SERVER_WRAPPER,
        "npx",
        "-y",
        "@modelcontextprotocol/server-everything",
        "stdio",
    ]
    assert containers["server"]["image"] == "node:22-alpine"
    assert "--stdio-fifo-dir=/run/mcp" in containers["adapter"]["args"]
    assert "--allowed-host=everything.tools.svc.cluster.local" in containers["adapter"]["args"]
    assert containers["fifos"]["args"][-1] == "--make-fifos"


def test_the_secret_version_changes_only_the_pod_template_annotation() -> None:
    one = render.deployment(STDIO, SETTINGS, secrets_version="v1")
    two = render.deployment(STDIO, SETTINGS, secrets_version="v2")
    annotation = "mcp-operator.dev/secrets-version"
    assert one["spec"]["template"]["metadata"]["annotations"][annotation] == "v1"
    two["spec"]["template"]["metadata"]["annotations"][annotation] = "v1"
    assert one == two
    assert render.secret_references(STDIO) == ["keys"]
    checksum = render.secrets_checksum({"keys": "uid/41"})
    assert checksum != render.secrets_checksum({"keys": "uid/42"})


def test_a_server_api_key_value_is_never_rendered() -> None:
    text = yaml.safe_dump(render.deployment(STDIO, SETTINGS))
    assert "secretKeyRef" in text  # the reference, resolved by the kubelet, not by us


def test_status_url_is_the_service_dns_name() -> None:
    assert render.service_url(HTTP, SETTINGS) == "http://web.tools.svc.cluster.local:3001/"


def test_a_suspended_server_is_scaled_to_zero() -> None:
    suspended = server(
        "everything",
        suspend=True,
        deployment=STDIO.spec.deployment.model_dump(by_alias=True, exclude_none=True),
    )  # type: ignore[union-attr]
    assert render.deployment(suspended, SETTINGS)["spec"]["replicas"] == 0
    assert render.deployment(STDIO, SETTINGS)["spec"]["replicas"] == 2
