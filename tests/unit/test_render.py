"""Rendering of a managed MCPServer's children, pinned by golden files.

Regenerate the golden files after an intended change with
``UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_render.py`` and review the diff.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_operator.adapter.socket_child import SPAWN_SOCKET
from mcp_operator.api import MCPServer
from mcp_operator.controller.mcpserver import render
from mcp_operator.controller.mcpserver.containers import SPAWN_SOCKET as HELPER_SOCKET
from mcp_operator.oci.config import ImageConfig, ImageConfigError

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


IMAGE_ONLY = server(
    "github",
    deployment={
        "image": "ghcr.io/github/github-mcp-server:v1",
        "env": [
            {
                "name": "GITHUB_PERSONAL_ACCESS_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": "github", "key": "token"}},
            }
        ],
        "imagePullSecrets": [{"name": "ghcr-pull"}],
        "writableDirs": [{"mountPath": "/var/cache/server", "sizeLimit": "1Gi"}],
    },
)
GITHUB_IMAGE = ImageConfig(
    digest="sha256:" + "a" * 64,
    index_digest="sha256:" + "b" * 64,
    entrypoint=("/server/github-mcp-server",),
    cmd=("stdio",),
    user="65532:65532",
)


def check_golden(name: str, rendered: Any) -> None:
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
        ("stdio-image-deployment", render.deployment(IMAGE_ONLY, SETTINGS, image=GITHUB_IMAGE)),
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


def test_the_stdio_server_runs_the_users_command_through_the_helper() -> None:
    containers = {c["name"]: c for c in pod_containers(render.deployment(STDIO, SETTINGS))}
    assert containers["server"]["command"] == [
        "/run/mcp-exec/mcp-stdio-exec",
        "--fifo-dir=/run/mcp",
        "--",
        "npx",
        "-y",
        "@modelcontextprotocol/server-everything",
        "stdio",
    ]
    assert "args" not in containers["server"]
    assert containers["server"]["image"] == "node:22-alpine"
    assert "--stdio-fifo-dir=/run/mcp" in containers["adapter"]["args"]
    assert "--allowed-host=everything.tools.svc.cluster.local" in containers["adapter"]["args"]
    assert containers["fifos"]["args"][-1] == "--make-fifos"
    assert containers["stdio-exec"]["command"] == ["mcp-stdio-exec", "--install=/run/mcp-exec"]
    exec_mount = {"name": "exec", "mountPath": "/run/mcp-exec", "readOnly": True}
    assert exec_mount in containers["server"]["volumeMounts"]


def test_a_per_session_server_starts_one_process_per_adapter_connection() -> None:
    per_session = STDIO.model_copy(deep=True)
    per_session.spec.deployment.sessions = "perSession"  # type: ignore[union-attr]
    containers = {c["name"]: c for c in pod_containers(render.deployment(per_session, SETTINGS))}
    assert containers["server"]["command"][:3] == [
        "/run/mcp-exec/mcp-stdio-exec",
        "--spawn-socket=/run/mcp/spawn.sock",
        "--",
    ]
    assert containers["server"]["command"][3:] == [
        "npx",
        "-y",
        "@modelcontextprotocol/server-everything",
        "stdio",
    ]
    adapter_args = containers["adapter"]["args"]
    assert "--child-per-session" in adapter_args and "--stdio-fifo-dir=/run/mcp" in adapter_args
    assert HELPER_SOCKET == SPAWN_SOCKET  # the adapter connects where the helper listens
    shared = {c["name"]: c for c in pod_containers(render.deployment(STDIO, SETTINGS))}
    assert "--child-per-session" not in shared["adapter"]["args"]


def argv_case(
    command: list[str] | None, args: list[str] | None, entrypoint: list[str], cmd: list[str]
) -> list[str] | str:
    deployment: dict[str, Any] = {"image": "example/server:1"}
    if command is not None:
        deployment["command"] = command
    if args is not None:
        deployment["args"] = args
    image = ImageConfig(digest="sha256:" + "c" * 64, entrypoint=tuple(entrypoint), cmd=tuple(cmd))
    try:
        rendered = render.deployment(server("s", deployment=deployment), SETTINGS, image=image)
    except ImageConfigError as error:
        return f"error: {error}"
    container = rendered["spec"]["template"]["spec"]["containers"][0]
    assert "args" not in container
    return list(container["command"][3:])


def test_every_combination_of_command_args_entrypoint_and_cmd_matches_the_golden_file() -> None:
    cases: dict[str, list[str] | str] = {}
    for command in (None, ["/bin/own", "--flag"]):
        for args in (None, ["arg1", "arg2"]):
            for entrypoint in ([], ["/entry", "--e"]):
                for cmd in ([], ["cmd1"]):
                    name = (
                        f"command={'set' if command else 'unset'} "
                        f"args={'set' if args else 'unset'} "
                        f"entrypoint={'set' if entrypoint else 'empty'} "
                        f"cmd={'set' if cmd else 'empty'}"
                    )
                    cases[name] = argv_case(command, args, entrypoint, cmd)
    check_golden("stdio-argv-combinations", cases)
    # The Pod's rules, stated once more by hand for the three that matter most:
    assert cases["command=unset args=unset entrypoint=set cmd=set"] == ["/entry", "--e", "cmd1"]
    with_args = cases["command=unset args=set entrypoint=set cmd=set"]
    assert with_args == ["/entry", "--e", "arg1", "arg2"]
    assert cases["command=set args=unset entrypoint=set cmd=set"] == ["/bin/own", "--flag"]


def test_the_image_config_pins_the_image_and_honours_a_numeric_non_root_user() -> None:
    rendered = render.deployment(IMAGE_ONLY, SETTINGS, image=GITHUB_IMAGE)
    pod = rendered["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == "ghcr.io/github/github-mcp-server:v1@sha256:" + "b" * 64
    assert container["securityContext"]["runAsUser"] == 65532
    assert pod["imagePullSecrets"] == [{"name": "ghcr-pull"}]
    assert {"name": "writable-0", "mountPath": "/var/cache/server"} in container["volumeMounts"]
    assert {"name": "writable-0", "emptyDir": {"sizeLimit": "1Gi"}} in pod["volumes"]


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        ("1000", (1000, None)),
        ("1000:2000", (1000, 2000)),
        ("0", None),
        ("root", None),
        ("node", None),
        ("", None),
    ],
)
def test_only_a_numeric_non_root_image_user_changes_the_server_uid(
    user: str, expected: tuple[int, int | None] | None
) -> None:
    image = ImageConfig(digest="sha256:" + "d" * 64, entrypoint=("/srv",), user=user)
    rendered = render.deployment(IMAGE_ONLY, SETTINGS, image=image)
    security = rendered["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    assert (security.get("runAsUser"), security.get("runAsGroup")) == (
        expected if expected is not None else (None, None)
    )
    pod = rendered["spec"]["template"]["spec"]["securityContext"]
    assert pod["runAsUser"] == 65532 and pod["runAsNonRoot"] is True


def test_a_stdio_server_without_command_is_not_rendered_without_its_image_config() -> None:
    assert render.needs_image_config(IMAGE_ONLY)
    assert not render.needs_image_config(STDIO)
    assert not render.needs_image_config(HTTP)
    with pytest.raises(ValueError, match="needs its image configuration"):
        render.deployment(IMAGE_ONLY, SETTINGS)


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
    )
    assert render.deployment(suspended, SETTINGS)["spec"]["replicas"] == 0
    assert render.deployment(STDIO, SETTINGS)["spec"]["replicas"] == 2


def test_the_images_own_words_reach_the_server_verbatim_through_the_kubelets_expansion() -> None:
    image = ImageConfig(
        digest="sha256:" + "e" * 64, entrypoint=("/srv", "--home=$(HOME)"), cmd=("$$x",)
    )
    rendered = render.deployment(IMAGE_ONLY, SETTINGS, image=image)
    command = rendered["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[3:] == ["/srv", "--home=$$(HOME)", "$$$$x"]
    with_args = server("s", deployment={"image": "x", "args": ["--home=$(HOME)"]})
    rendered = render.deployment(with_args, SETTINGS, image=image)
    command = rendered["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[3:] == ["/srv", "--home=$$(HOME)", "--home=$(HOME)"], (
        "the user's own: as in a Pod"
    )


TRACING = {"endpoint": "http://collector.obs:4318", "samplePercent": 10}


def otel_env(container: dict[str, Any]) -> dict[str, str]:
    return {
        var["name"]: var["value"]
        for var in container.get("env", ())
        if var["name"].startswith("OTEL_")
    }


def dumped(obj: MCPServer) -> dict[str, Any]:
    assert obj.spec.deployment is not None
    return obj.spec.deployment.model_dump(by_alias=True, exclude_none=True)


def test_the_servers_tracing_setting_becomes_the_adapters_standard_otel_variables() -> None:
    untraced = render.deployment(STDIO, SETTINGS)
    assert not [otel_env(c) for c in pod_containers(untraced) if otel_env(c)]
    traced = server("everything", deployment=dumped(STDIO), tracing=TRACING)
    containers = {c["name"]: c for c in pod_containers(render.deployment(traced, SETTINGS))}
    assert otel_env(containers["adapter"]) == {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector.obs:4318",
        "OTEL_SERVICE_NAME": "mcp-operator-adapter",
        "OTEL_RESOURCE_ATTRIBUTES": "k8s.namespace.name=tools,mcp_operator.mcp_server=everything",
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "0.1",
    }
    assert otel_env(containers["server"]) == {}  # the server's environment is the user's
    assert containers["adapter"]["env"][0]["name"] == "POD_IP"  # the adapter's own still there


def test_an_http_native_servers_tracing_setting_reaches_its_front_only() -> None:
    traced = server(
        "web",
        transport="streamable-http",
        deployment=dumped(HTTP),
        tracing={"endpoint": "https://collector.obs:4318"},
    )
    containers = {c["name"]: c for c in pod_containers(render.deployment(traced, SETTINGS))}
    front = otel_env(containers["front"])
    assert front["OTEL_EXPORTER_OTLP_ENDPOINT"] == "https://collector.obs:4318"
    assert front["OTEL_TRACES_SAMPLER_ARG"] == "1"  # samplePercent defaults to 100
    assert otel_env(containers["server"]) == {}


DATAPLANE = "registry.example/mcp-dataplane@sha256:" + "d" * 64
COMPILED = dataclasses.replace(SETTINGS, dataplane_image=DATAPLANE)


def images_by_container(rendered: dict[str, Any]) -> dict[str, str]:
    pod = rendered["spec"]["template"]["spec"]
    return {c["name"]: c["image"] for c in [*pod.get("initContainers", []), *pod["containers"]]}


def test_the_compiled_data_plane_serves_what_it_can_and_only_when_asked() -> None:
    # Opted in: the adapter and both init steps run the compiled data plane, the same words.
    compiled = render.deployment(STDIO, COMPILED)
    assert images_by_container(compiled) == {
        "fifos": DATAPLANE,
        "stdio-exec": DATAPLANE,
        "server": "node:22-alpine",
        "adapter": DATAPLANE,
    }
    python = render.deployment(STDIO, SETTINGS)
    words = {c["name"]: (c.get("command"), c.get("args")) for c in pod_containers(compiled)}
    assert words == {c["name"]: (c.get("command"), c.get("args")) for c in pod_containers(python)}
    fronted = render.deployment(HTTP, COMPILED)
    assert images_by_container(fronted)["front"] == DATAPLANE
    # Not opted in: the Python adapter everywhere.
    assert set(images_by_container(python).values()) - {"node:22-alpine"} == {
        SETTINGS.adapter_image
    }
    # A child per session too: the adapter, its init steps and the helper they install.
    per_session = STDIO.model_copy(deep=True)
    per_session.spec.deployment.sessions = "perSession"  # type: ignore[union-attr]
    pooled = images_by_container(render.deployment(per_session, COMPILED))
    assert pooled["adapter"] == pooled["fifos"] == pooled["stdio-exec"] == DATAPLANE
    # What it does not serve yet (traces) keeps the Python adapter, init steps included.
    traced = server("everything", deployment=dumped(STDIO), tracing=TRACING)
    images = images_by_container(render.deployment(traced, COMPILED))
    assert DATAPLANE not in images.values()
    assert images["adapter"] == images["fifos"] == images["stdio-exec"] == SETTINGS.adapter_image
