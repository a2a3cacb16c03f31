"""The run Pod's identities: a projected token per managed server in the bridge container
alone, none for the agent unless the run asks for an API token, no shared process namespace;
and the tenant's attempts around it (a server that does not permit the run gets no token)."""

from __future__ import annotations

from typing import Any

from mcp_operator.api import AgentRun, MCPServer
from mcp_operator.api.bridge import parse_bridge_config
from mcp_operator.controller.agentrun import configmap, render, resolve
from mcp_operator.controller.settings import AgentRenderSettings
from tests.unit.test_agentrun_render import NOW, ready_server, run, servers

SETTINGS = AgentRenderSettings(bridge_image="registry.example/mcp-operator:1.2.3")


def managed(name: str, namespace: str = "agents", **access: Any) -> MCPServer:
    server = ready_server(name, namespace)
    body = server.model_dump(by_alias=True, exclude_none=True, mode="json")
    body["spec"] = {"mode": "managed", "deployment": {"image": "srv:1"}}
    if access:
        body["spec"]["access"] = access
    body["status"]["url"] = f"http://{name}.{namespace}.svc.cluster.local:8080/mcp"
    body["status"]["conditions"][0]["lastTransitionTime"] = NOW
    return MCPServer.model_validate(body)


def rendered(agent_run: AgentRun, *items: MCPServer) -> tuple[dict[str, Any], dict[str, Any]]:
    resolution = resolve.resolve(agent_run, servers(*items))
    return configmap.bridge_config(agent_run, resolution), render.pod(
        agent_run, resolution, SETTINGS
    )


def mounts(pod: dict[str, Any], container: str) -> dict[str, str]:
    everything = pod["spec"]["containers"] + pod["spec"].get("initContainers", [])
    (found,) = [c for c in everything if c["name"] == container]
    return {m["name"]: m["mountPath"] for m in found["volumeMounts"]}


def test_each_managed_server_gets_a_token_of_its_own_audience_in_the_bridge_only() -> None:
    agent_run = run({"name": "git"}, {"name": "time"}, {"name": "docs"})
    config, pod = rendered(
        agent_run, managed("git"), managed("time", authentication="none"), ready_server("docs")
    )
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    tokens = [v for v in volumes.values() if "projected" in v and v["name"].startswith("token-")]
    assert [v["projected"]["sources"] for v in tokens] == [
        [
            {
                "serviceAccountToken": {
                    "audience": "mcpserver.mcp-operator.dev/agents/git",
                    "expirationSeconds": 600,
                    "path": "token",
                }
            }
        ]
    ]
    bridge = mounts(pod, render.BRIDGE_CONTAINER)
    assert bridge["token-0"] == "/var/run/mcp-bridge/tokens/agents/git"
    agent = mounts(pod, render.AGENT_CONTAINER)
    assert not any(name.startswith("token-") for name in agent)
    assert "kube-api-access" not in agent and "kube-api-access" not in volumes
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert "shareProcessNamespace" not in pod["spec"]
    by_name = {s["name"]: s for s in config["servers"]}
    assert by_name["git"]["tokenFile"] == "/var/run/mcp-bridge/tokens/agents/git/token"
    assert "tokenFile" not in by_name["time"]  # authentication: none
    assert "tokenFile" not in by_name["docs"]  # external: not ours to authenticate to
    parsed = parse_bridge_config(configmap.config_text(config))
    assert parsed.identity is not None
    assert (parsed.identity.namespace, parsed.identity.service_account, parsed.identity.pod) == (
        "agents",
        "default",
        "triage",
    )


def test_the_agent_gets_an_api_token_only_when_the_run_asks_and_never_a_server_token() -> None:
    agent_run = run({"name": "git"})
    body = agent_run.model_dump(by_alias=True, exclude_none=True)
    body["spec"]["agent"].update(serviceAccountName="triager", automountServiceAccountToken=True)
    asking = AgentRun.model_validate(body)
    config, pod = rendered(asking, managed("git"))
    agent = mounts(pod, render.AGENT_CONTAINER)
    assert agent["kube-api-access"] == "/var/run/secrets/kubernetes.io/serviceaccount"
    assert not any(name.startswith("token-") for name in agent)
    (api,) = [v for v in pod["spec"]["volumes"] if v["name"] == "kube-api-access"]
    token = api["projected"]["sources"][0]["serviceAccountToken"]
    assert "audience" not in token  # the API server's audience, not a server's
    assert "kube-api-access" not in mounts(pod, render.BRIDGE_CONTAINER)
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert config["identity"]["serviceAccount"] == "triager"


def test_a_server_that_does_not_permit_the_runs_namespace_gets_no_token_mount() -> None:
    agent_run = run({"name": "git", "namespace": "team-a"})
    config, pod = rendered(agent_run, managed("git", "team-a"))
    assert config["servers"] == []
    assert not any(v["name"].startswith("token-") for v in pod["spec"]["volumes"])
    resolution = resolve.resolve(agent_run, servers(managed("git", "team-a")))
    assert resolution.bindings[0].reason == "NotPermitted"


def test_a_service_account_the_server_does_not_list_gets_no_token_mount() -> None:
    server = managed("git", serviceAccounts=["triager", "ops/robot"])
    config, pod = rendered(run({"name": "git"}), server)
    assert config["servers"] == []
    assert not any(v["name"].startswith("token-") for v in pod["spec"]["volumes"])
    resolution = resolve.resolve(run({"name": "git"}), servers(server))
    assert resolution.bindings[0].reason == "NotPermitted"
    assert "agents/default" in resolution.bindings[0].message

    body = run({"name": "git"}).model_dump(by_alias=True, exclude_none=True)
    body["spec"]["agent"]["serviceAccountName"] = "triager"
    config, _pod = rendered(AgentRun.model_validate(body), server)
    assert [s["name"] for s in config["servers"]] == ["git"]
