"""The API models catch what the CRD's CEL rules and list keys catch, without a cluster."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from mcp_operator.api import AgentRun, MCPServer, MCPServerSpec
from mcp_operator.mcp.naming import default_prefix

DEPLOYMENT = {"image": "node:22-alpine", "command": ["npx", "-y", "some-mcp-server"]}


def server(name: str = "srv", **spec: Any) -> MCPServer:
    return MCPServer.model_validate(
        {
            "apiVersion": "mcp-operator.dev/v1alpha1",
            "kind": "MCPServer",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": spec,
        }
    )


def test_a_managed_server_gets_the_schema_defaults_and_stdio() -> None:
    spec = server(mode="managed", deployment=DEPLOYMENT).spec
    assert spec.effective_transport == "stdio"
    assert spec.transport is None
    assert spec.deployment is not None
    assert (spec.deployment.port, spec.deployment.path, spec.deployment.replicas) == (
        8080,
        "/mcp",
        1,
    )
    assert (spec.probe.enabled, spec.probe.interval_seconds, spec.probe.timeout_seconds) == (
        True,
        300,
        10,
    )
    assert spec.suspend is False


def test_an_external_server_defaults_to_streamable_http() -> None:
    spec = server(mode="external", url="https://mcp.example.com/mcp").spec
    assert spec.effective_transport == "streamable-http"
    assert server(
        mode="external", url="http://x/mcp", transport="sse"
    ).spec.effective_transport == ("sse")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"mode": "managed"}, "deployment must be set when mode is managed"),
        ({"mode": "managed", "deployment": DEPLOYMENT, "url": "http://x"}, "url must not be set"),
        ({"mode": "external"}, "url must be set when mode is external"),
        (
            {"mode": "external", "url": "http://x", "deployment": DEPLOYMENT},
            "deployment must not be set when mode is external",
        ),
        (
            {"mode": "external", "url": "http://x", "transport": "stdio"},
            "transport must be streamable-http or sse",
        ),
        (
            {"mode": "external", "url": "http://x", "tracing": {"endpoint": "http://c:4318"}},
            "tracing must not be set when mode is external",
        ),
        (
            {
                "mode": "managed",
                "transport": "sse",
                "deployment": DEPLOYMENT,
                "tracing": {"endpoint": "http://c:4318"},
            },
            "tracing needs the adapter or front of ours",
        ),
        (
            {
                "mode": "managed",
                "transport": "streamable-http",
                "deployment": DEPLOYMENT,
                "access": {"authentication": "none"},
                "tracing": {"endpoint": "http://c:4318"},
            },
            "tracing needs the adapter or front of ours",
        ),
        (
            {"mode": "managed", "deployment": DEPLOYMENT, "tracing": {"endpoint": "c:4318"}},
            "should match pattern",
        ),
        ({"mode": "external", "url": "ftp://x"}, "should match pattern"),
        ({"mode": "bogus", "url": "http://x"}, "Input should be 'managed' or 'external'"),
        ({"mode": "external", "url": "http://x", "toolsPrefix": "Abc"}, "should match pattern"),
        ({"mode": "external", "url": "http://x", "toolsPrefix": "a" * 33}, "at most 32"),
        ({"mode": "external", "url": "http://x", "toolsAllow": [""]}, "at least 1"),
        ({"mode": "external", "url": "http://x", "toolsDeny": ["a b"]}, "should match pattern"),
        ({"mode": "external", "url": "http://x", "toolsAllow": ["a", "a"]}, "must be unique"),
        (
            {"mode": "external", "url": "http://x", "probe": {"intervalSeconds": 5}},
            "greater than or equal to 10",
        ),
        (
            {"mode": "external", "url": "http://x", "headers": [{"name": "A"}]},
            "exactly one of value or valueFrom",
        ),
        (
            {
                "mode": "external",
                "url": "http://x",
                "headers": [{"name": "A", "value": "ok\r\nX-Forged: 1"}],
            },
            "must not contain control characters other than tab",
        ),
        (
            {"mode": "external", "url": "http://x", "headers": [{"name": "A", "value": "a\x00"}]},
            "must not contain control characters other than tab",
        ),
        (
            {
                "mode": "external",
                "url": "http://x",
                "headers": [
                    {
                        "name": "A",
                        "value": "1",
                        "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}},
                    }
                ],
            },
            "exactly one of value or valueFrom",
        ),
        (
            {
                "mode": "external",
                "url": "http://x",
                "headers": [{"name": "X-A", "value": "1"}, {"name": "x-a", "value": "2"}],
            },
            "header names (ignoring case) must be unique",
        ),
        (
            {"mode": "managed", "deployment": {**DEPLOYMENT, "port": 0}},
            "greater than or equal to 1",
        ),
        (
            {
                "mode": "managed",
                "deployment": {**DEPLOYMENT, "env": [{"name": "A", "value": "1", "valueFrom": {}}]},
            },
            "must set exactly one of secretKeyRef",
        ),
        (
            {
                "mode": "managed",
                "deployment": {
                    **DEPLOYMENT,
                    "env": [
                        {
                            "name": "A",
                            "value": "1",
                            "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                        }
                    ],
                },
            },
            "must not set both value and valueFrom",
        ),
        ({"mode": "external", "url": "http://x", "bogus": 1}, "Extra inputs are not permitted"),
    ],
    ids=lambda value: None if isinstance(value, str) else str(value)[:60],
)
def test_an_invalid_server_spec_is_rejected_with_the_crd_s_words(
    spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        MCPServerSpec.model_validate(spec)


@pytest.mark.parametrize(
    ("name", "prefix"),
    [
        ("everything", "everything"),
        ("Time.Server", "time-server"),
        ("1password", "m1password"),
        ("a" * 40, "a" * 32),
        ("abcdefghijklmnopqrstuvwxyz-12345-tail", "abcdefghijklmnopqrstuvwxyz-12345"),
        ("abcdefghijklmnopqrstuvwxyz-1234-6", "abcdefghijklmnopqrstuvwxyz-1234"),
    ],
)
def test_the_default_prefix_is_derived_from_the_name(name: str, prefix: str) -> None:
    assert default_prefix(name) == prefix
    assert server(name, mode="external", url="http://x").effective_prefix == prefix


def test_tools_prefix_wins_over_the_derived_prefix() -> None:
    assert server("abc", mode="external", url="http://x", toolsPrefix="p").effective_prefix == "p"


def run(**spec: Any) -> AgentRun:
    return AgentRun.model_validate(
        {"metadata": {"name": "r", "namespace": "team"}, "spec": {"agent": {"image": "a"}, **spec}}
    )


def test_an_agent_run_defaults_the_bridge_and_the_server_namespace() -> None:
    parsed = run(mcpServers=[{"name": "a"}, {"name": "b", "namespace": "other"}])
    assert parsed.spec.bridge.port == 7800
    assert parsed.spec.bridge.image is None
    assert [parsed.server_namespace(ref) for ref in parsed.spec.mcp_servers] == ["team", "other"]
    assert [ref.optional for ref in parsed.spec.mcp_servers] == [False, False]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"mcpServers": []}, "at least 1 item"),
        ({"mcpServers": [{"name": "a"}, {"name": "a", "namespace": "x"}]}, "must be unique"),
        ({"mcpServers": [{"name": "a", "namespace": "Bad"}]}, "should match pattern"),
        ({"mcpServers": [{"name": "a"}], "bridge": {"port": 80}}, "greater than or equal to 1024"),
        ({"mcpServers": [{"name": "a"}], "activeDeadlineSeconds": 0}, "greater than or equal to 1"),
    ],
    ids=["no-servers", "duplicate-server", "bad-namespace", "bridge-port-80", "deadline-0"],
)
def test_an_invalid_agent_run_is_rejected(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        run(**spec)


def test_an_agent_run_needs_an_agent_image() -> None:
    with pytest.raises(ValidationError, match=r"spec\.agent\.image"):
        AgentRun.model_validate(
            {"metadata": {"name": "r"}, "spec": {"mcpServers": [{"name": "a"}], "agent": {}}}
        )


def test_status_with_fields_from_a_newer_operator_still_parses() -> None:
    parsed = MCPServer.model_validate(
        {
            "metadata": {"name": "s"},
            "spec": {"mode": "external", "url": "http://x"},
            "status": {
                "toolCount": 1,
                "futureField": True,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "Probed",
                        "message": "",
                        "lastTransitionTime": "2026-01-02T03:04:05Z",
                    }
                ],
            },
        }
    )
    assert parsed.status is not None
    assert parsed.status.conditions is not None
    dumped = parsed.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert dumped["status"]["conditions"][0]["lastTransitionTime"] == "2026-01-02T03:04:05Z"


def test_a_managed_server_needs_no_command_whatever_its_transport() -> None:
    stdio = server(mode="managed", deployment={"image": "ghcr.io/github/github-mcp-server"})
    assert stdio.spec.effective_transport == "stdio"
    http = server(mode="managed", transport="streamable-http", deployment={"image": "x"})
    assert http.spec.effective_transport == "streamable-http"


@pytest.mark.parametrize(
    ("writable", "message"),
    [
        ({"mountPath": "/tmp"}, "reserved"),
        ({"mountPath": "/run/mcp-exec"}, "reserved"),
        ({"mountPath": "/data/../etc"}, r"'\.\.' segment"),
        ({"mountPath": "/data/"}, "pattern"),
        ({"mountPath": "relative"}, "pattern"),
    ],
)
def test_a_writable_dir_cannot_shadow_the_operators_mounts_or_climb(
    writable: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        server(mode="managed", deployment={"image": "x", "writableDirs": [writable]})


def test_writable_dirs_and_pull_secrets_are_keyed_by_path_and_name() -> None:
    parsed = server(
        mode="managed",
        deployment={
            "image": "x",
            "writableDirs": [{"mountPath": "/home/node/.npm"}],
            "imagePullSecrets": [{"name": "registry-creds"}],
        },
    )
    assert parsed.spec.deployment is not None
    assert parsed.spec.deployment.writable_dirs is not None
    assert parsed.spec.deployment.writable_dirs[0].size_limit == "256Mi"
    with pytest.raises(ValueError, match="must be unique"):
        server(
            mode="managed",
            deployment={"image": "x", "imagePullSecrets": [{"name": "a"}, {"name": "a"}]},
        )
