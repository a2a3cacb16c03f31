"""An AgentRun's resolution and children: references, collisions, the bridge config, the Pod.

Golden files pin the Pod and the ConfigMap; regenerate them after an intended change with
``UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_agentrun_render.py`` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_operator.api import AgentRun, MCPServer
from mcp_operator.api.bridge import parse_bridge_config
from mcp_operator.controller.agentrun import configmap, render, resolve
from mcp_operator.controller.settings import AgentRenderSettings
from mcp_operator.mcp.naming import exposed_name

GOLDEN = Path(__file__).parent / "golden"
SETTINGS = AgentRenderSettings(bridge_image="registry.example/mcp-operator:1.2.3")
NOW = "2026-12-01T10:00:00Z"


def ready_server(
    name: str,
    namespace: str = "agents",
    *,
    tools: tuple[str, ...] = ("echo", "add"),
    generation: int = 1,
    observed: int = 1,
    ready: str = "True",
    **spec: Any,
) -> MCPServer:
    prefix = spec.get("toolsPrefix", name)
    return MCPServer.model_validate(
        {
            "metadata": {"name": name, "namespace": namespace, "generation": generation},
            "spec": {"mode": "external", "url": f"http://{name}.example/mcp", **spec},
            "status": {
                "observedGeneration": observed,
                "url": f"http://{name}.example/mcp",
                "toolCount": len(tools),
                "tools": [{"name": exposed_name(prefix, t), "originalName": t} for t in tools],
                "serverInfo": {"protocolVersion": "2025-11-25"},
                "conditions": [
                    {
                        "type": "Ready",
                        "status": ready,
                        "reason": "ToolsDiscovered" if ready == "True" else "ProbeFailed",
                        "message": "m",
                        "lastTransitionTime": NOW,
                    }
                ],
            },
        }
    )


def run(*refs: dict[str, Any], **spec: Any) -> AgentRun:
    return AgentRun.model_validate(
        {
            "metadata": {
                "name": "triage",
                "namespace": "agents",
                "uid": "run-uid",
                "generation": 1,
            },
            "spec": {
                "mcpServers": list(refs),
                "agent": {"image": "agent:1", "command": ["python", "-m", "agent"]},
                **spec,
            },
        }
    )


def servers(*items: MCPServer) -> dict[tuple[str, str], MCPServer | None]:
    return {(s.metadata.namespace or "", s.metadata.name): s for s in items}


def test_required_servers_that_are_ready_resolve_and_count_their_tools() -> None:
    resolution = resolve.resolve(
        run({"name": "docs"}, {"name": "git"}), servers(ready_server("docs"), ready_server("git"))
    )
    assert resolution.ready
    assert [b.reason for b in resolution.bindings] == ["Resolved", "Resolved"]
    assert resolution.tool_count == 4


def test_a_missing_required_server_blocks_and_a_missing_optional_one_is_skipped() -> None:
    missing = resolve.resolve(run({"name": "docs"}), {})
    assert not missing.ready
    assert missing.blocking[0].reason == "ServerNotFound"
    assert "agents/docs does not exist" in missing.blocking[0].message

    optional = resolve.resolve(
        run({"name": "docs"}, {"name": "extra", "optional": True}), servers(ready_server("docs"))
    )
    assert optional.ready
    assert [b.name for b in optional.skipped] == ["extra"]


@pytest.mark.parametrize(
    ("server", "why"),
    [
        (ready_server("docs", ready="False"), "ProbeFailed"),
        (ready_server("docs", generation=2, observed=1), "older generation"),
    ],
)
def test_a_server_that_is_not_ready_for_its_current_spec_blocks(
    server: MCPServer, why: str
) -> None:
    resolution = resolve.resolve(run({"name": "docs"}), servers(server))
    assert resolution.blocking[0].reason == "ServerNotReady"
    assert why in resolution.blocking[0].message


def test_a_server_in_another_namespace_is_usable_only_where_it_permits_that_namespace() -> None:
    ref = {"name": "docs", "namespace": "shared"}
    closed = ready_server("docs", "shared")
    assert resolve.resolve(run(ref), servers(closed)).blocking[0].reason == "NotPermitted"
    listed = ready_server("docs", "shared", access={"namespaces": ["agents"]})
    assert resolve.resolve(run(ref), servers(listed)).ready
    everyone = ready_server("docs", "shared", access={"namespaces": ["*"]})
    assert resolve.resolve(run(ref), servers(everyone)).ready
    other = ready_server("docs", "shared", access={"namespaces": ["team-b"]})
    assert resolve.resolve(run(ref), servers(other)).blocking[0].reason == "NotPermitted"


def test_secret_backed_headers_are_never_shared_across_namespaces() -> None:
    server = ready_server(
        "docs",
        "shared",
        access={"namespaces": ["*"]},
        headers=[
            {"name": "Authorization", "valueFrom": {"secretKeyRef": {"name": "t", "key": "k"}}}
        ],
    )
    resolution = resolve.resolve(run({"name": "docs", "namespace": "shared"}), servers(server))
    assert resolution.blocking[0].reason == "SecretNotShareable"


def test_run_filters_narrow_the_tools_of_a_server() -> None:
    resolution = resolve.resolve(
        run({"name": "docs", "toolsAllow": ["e*", "add"], "toolsDeny": ["add"]}),
        servers(ready_server("docs", tools=("echo", "add", "sub"))),
    )
    assert [t.name for t in resolution.bindings[0].tools] == ["docs_echo"]
    assert resolution.tool_count == 1


def test_two_servers_offering_one_exposed_name_collide() -> None:
    resolution = resolve.resolve(
        run({"name": "a"}, {"name": "b"}),
        servers(
            ready_server("a", toolsPrefix="gh", tools=("echo", "x")),
            ready_server("b", toolsPrefix="gh", tools=("echo", "y")),
        ),
    )
    assert not resolution.ready
    assert resolution.collisions == ("tool gh_echo is offered by agents/a and agents/b",)


def test_a_collision_disappears_when_a_run_filter_removes_one_side() -> None:
    resolution = resolve.resolve(
        run({"name": "a"}, {"name": "b", "toolsDeny": ["echo"]}),
        servers(
            ready_server("a", toolsPrefix="gh", tools=("echo",)),
            ready_server("b", toolsPrefix="gh", tools=("echo", "y")),
        ),
    )
    assert resolution.ready


def test_the_run_may_only_tighten_the_servers_call_policy() -> None:
    from mcp_operator.api import CallPolicySpec

    server = CallPolicySpec.model_validate(
        {"pii": {"arguments": "redact", "results": "detect"}, "retry": {"maxAttempts": 3}}
    )
    loosen = CallPolicySpec.model_validate(
        {
            "pii": {"arguments": "off", "results": "block"},
            "retry": {"maxAttempts": 5},
            "timeoutSeconds": 9,
        }
    )
    policy = configmap.effective_policy(server, loosen)
    assert policy["pii"] == {"arguments": "redact", "results": "block"}
    assert policy["retry"]["maxAttempts"] == 3
    assert policy["timeoutSeconds"] == 9
    defaults = configmap.effective_policy(None, None)
    assert defaults["pii"] == {"arguments": "off", "results": "off"}
    assert (defaults["retry"]["maxAttempts"], defaults["timeoutSeconds"]) == (3, 30)


TWO = run(
    {"name": "docs", "toolsAllow": ["search*"]},
    {"name": "git"},
    bridge={"policy": {"pii": {"arguments": "block"}}, "audit": {"file": True}},
    activeDeadlineSeconds=600,
)
TWO_SERVERS = servers(
    ready_server(
        "docs",
        tools=("search", "read"),
        toolsDeny=["*_admin"],
        headers=[
            {"name": "X-Team", "value": "platform"},
            {
                "name": "Authorization",
                "valueFrom": {"secretKeyRef": {"name": "docs-token", "key": "header"}},
            },
        ],
        policy={"pii": {"results": "redact"}, "timeoutSeconds": 20},
    ),
    ready_server("git", tools=("log",)),
)


class _Literal(yaml.SafeDumper):
    """Multi-line strings as ``|`` blocks, so that the golden ConfigMap reads like the file."""


_Literal.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar(
        "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None
    ),
)


def check_golden(name: str, rendered: dict[str, Any]) -> None:
    path = GOLDEN / name
    text = yaml.dump(rendered, Dumper=_Literal, sort_keys=False)
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{name} changed; rerun with UPDATE_GOLDEN=1 and review"


def test_the_agent_pod_with_the_bridge_sidecar_matches_its_golden_file() -> None:
    resolution = resolve.resolve(TWO, TWO_SERVERS)
    check_golden("agentrun-pod.yaml", render.pod(TWO, resolution, SETTINGS))


def test_the_bridge_configmap_matches_its_golden_file_and_holds_no_secret_value() -> None:
    resolution = resolve.resolve(TWO, TWO_SERVERS)
    config_map = configmap.config_map(TWO, configmap.bridge_config(TWO, resolution))
    check_golden("agentrun-configmap.yaml", config_map)
    config = yaml.safe_load(config_map["data"]["config.yaml"])
    docs = config["servers"][0]
    assert docs["headers"] == [
        {"name": "X-Team", "value": "platform"},
        {"name": "Authorization", "valueFile": "/var/run/mcp-bridge/secrets/docs-token/header"},
    ]
    assert docs["filters"] == [{"deny": ["*_admin"]}, {"allow": ["search*"]}]
    assert docs["policy"]["pii"] == {"arguments": "block", "results": "redact"}
    assert docs["policy"]["timeoutSeconds"] == 20
    parsed = parse_bridge_config(config_map["data"]["config.yaml"], "config.yaml")
    # The pins are original names (issue 17: keyed by server and original name).
    assert [server.tools for server in parsed.servers] == [["search"], ["log"]]


def test_the_bridge_sidecar_is_native_and_starts_before_the_agent() -> None:
    pod = render.pod(TWO, resolve.resolve(TWO, TWO_SERVERS), SETTINGS)
    (bridge,) = pod["spec"]["initContainers"]
    assert bridge["restartPolicy"] == "Always"
    assert bridge["startupProbe"]["httpGet"]["path"] == "/readyz"
    (agent,) = pod["spec"]["containers"]
    assert {"name": "MCP_BRIDGE_URL", "value": "http://127.0.0.1:7800/mcp"} in agent["env"]
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "run-uid"
    assert pod["spec"]["activeDeadlineSeconds"] == 600
    for container in [bridge, agent]:
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] and security["runAsNonRoot"]
        assert security["capabilities"] == {"drop": ["ALL"]}


@pytest.mark.parametrize(
    "settings",
    [AgentRenderSettings(bridge_enabled=False), SETTINGS],
    ids=["operator-wide", "per-run"],
)
def test_without_the_bridge_the_pod_has_no_sidecar_and_no_bridge_url(
    settings: AgentRenderSettings,
) -> None:
    spec: dict[str, Any] = {} if not settings.bridge_enabled else {"bridge": {"enabled": False}}
    agent_run = run(
        {"name": "docs"},
        agent={"image": "agent:1", "env": [{"name": "MCP_BRIDGE_URL", "value": "http://x"}]},
        **spec,
    )
    pod = render.pod(agent_run, resolve.resolve(agent_run, {}), settings)
    assert "initContainers" not in pod["spec"]
    names = [var["name"] for var in pod["spec"]["containers"][0]["env"]]
    assert "MCP_BRIDGE_URL" not in names
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["tmp"]


def test_the_empty_prefix_reaches_the_bridge_and_its_clashes_are_still_refused() -> None:
    unprefixed = ready_server("plain", toolsPrefix="", tools=("echo",))
    assert unprefixed.effective_prefix == ""  # explicit "" is not "absent: derived"
    assert ready_server("plain", tools=("echo",)).effective_prefix == "plain"
    one = run({"name": "plain"})
    resolution = resolve.resolve(one, servers(unprefixed))
    assert [t.name for t in resolution.bindings[0].tools] == ["echo"]
    config = parse_bridge_config(
        configmap.config_map(one, configmap.bridge_config(one, resolution))["data"]["config.yaml"]
    )
    assert config.servers[0].prefix == ""
    clash = resolve.resolve(
        run({"name": "plain"}, {"name": "other"}),
        servers(unprefixed, ready_server("other", toolsPrefix="", tools=("echo",))),
    )
    assert not clash.ready
    assert clash.collisions == ("tool echo is offered by agents/plain and agents/other",)


def test_prompt_and_resource_filters_of_server_and_run_become_bridge_filter_layers() -> None:
    server = ready_server(
        "docs", promptsDeny=["secret_*"], resourcesAllow=["file://*"], resourcesDeny=["*.key"]
    )
    one = run({"name": "docs", "promptsAllow": ["review"], "resourcesDeny": ["file:///tmp/*"]})
    config = parse_bridge_config(
        configmap.config_map(
            one, configmap.bridge_config(one, resolve.resolve(one, servers(server)))
        )["data"]["config.yaml"]
    )
    first, second = config.servers[0].filters
    assert (first.prompts_deny, first.resources_allow, first.resources_deny) == (
        ["secret_*"],
        ["file://*"],
        ["*.key"],
    )
    assert (second.prompts_allow, second.resources_deny) == (["review"], ["file:///tmp/*"])


def test_the_runs_tracing_setting_becomes_the_bridges_standard_otel_variables() -> None:
    resolution = resolve.resolve(TWO, TWO_SERVERS)
    (untraced,) = render.pod(TWO, resolution, SETTINGS)["spec"]["initContainers"]
    assert not [var for var in untraced["env"] if var["name"].startswith("OTEL_")]
    tracing = {"endpoint": "http://collector.obs:4318", "samplePercent": 25}
    traced_run = TWO.model_copy(deep=True)
    traced_run.spec.bridge = traced_run.spec.bridge.model_validate(
        {**traced_run.spec.bridge.model_dump(by_alias=True), "tracing": tracing}
    )
    (bridge,) = render.pod(traced_run, resolution, SETTINGS)["spec"]["initContainers"]
    env = {var["name"]: var["value"] for var in bridge["env"]}
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://collector.obs:4318"
    assert env["OTEL_TRACES_SAMPLER"] == "parentbased_traceidratio"
    assert env["OTEL_TRACES_SAMPLER_ARG"] == "0.25"
    assert "k8s.namespace.name=" in env["OTEL_RESOURCE_ATTRIBUTES"]


@pytest.mark.parametrize(
    "tracing",
    [{}, {"endpoint": "collector:4318"}, {"endpoint": "http://c:4318", "samplePercent": 101}],
)
def test_a_tracing_setting_without_an_http_endpoint_or_with_a_ratio_over_one_is_refused(
    tracing: dict[str, Any],
) -> None:
    with pytest.raises(ValueError):
        run({"name": "docs"}, bridge={"tracing": tracing})


def test_the_runs_approval_settings_reach_the_bridge_with_the_agents_wait_bounded() -> None:
    server = ready_server("docs")
    approval = {
        "elicitation": {"timeoutSeconds": 30},
        "webhook": {"url": "https://approvals.example/a", "secretRef": {"name": "k", "key": "h"}},
    }
    one = run({"name": "docs"}, bridge={"approval": approval})
    resolution = resolve.resolve(one, servers(server))
    config = parse_bridge_config(
        configmap.config_map(one, configmap.bridge_config(one, resolution))["data"]["config.yaml"]
    )
    assert config.approval is not None
    assert config.approval.elicitation.timeout_seconds == 30
    assert config.approval.webhook is not None and config.approval.webhook.timeout_seconds == 300
    unset = run({"name": "docs"})
    plain = configmap.bridge_config(unset, resolve.resolve(unset, servers(server)))
    assert "approval" not in plain  # the bridge's own default wait (300 s) applies
    for seconds in (0, 301):
        with pytest.raises(ValueError, match=r"timeout_?[sS]econds"):
            run({"name": "docs"}, bridge={"approval": {"elicitation": {"timeoutSeconds": seconds}}})
