"""Render an AgentRun's children: the bridge configuration, its ConfigMap and the agent Pod.

Pure: no I/O, no clock, no randomness; the resolution (:mod:`.resolve`) comes in,
complete manifest dicts come out; golden files pin them down.

The Pod runs the agent container and, unless the bridge is switched off, the
``mcp-bridge`` as a native sidecar: an init container with ``restartPolicy:
Always``, started (and its startup probe on ``/readyz`` passed) before the agent,
and still running while the agent finishes. The bridge serves MCP on the Pod's
loopback at ``spec.bridge.port`` (the agent gets ``MCP_BRIDGE_URL``) and its
health and metrics on ``port + 1`` on the Pod IP, where the kubelet's probes and
a metrics scraper can reach them.

The configuration pins the tools the operator has probed (``tools``, when the
server's status lists them all): the bridge exposes a tool only when it passes
the filters and is listed there, so a tool a server adds later reaches agents
after the next probe has seen it, never before.

Secret values never enter the ConfigMap: a header whose value comes from a
Secret is rendered as the path of a file that a Secret volume mounts into the
bridge container only.
"""

from __future__ import annotations

import copy
import fnmatch
import hashlib
from collections.abc import Mapping
from typing import Any

import yaml

from mcp_operator import API_VERSION, GROUP
from mcp_operator.api import AgentRun, CallPolicySpec, MCPServer
from mcp_operator.api.bridge import CallPolicy, CallPolicyOverride, tighten
from mcp_operator.controller.agentrun.resolve import Binding, Resolution
from mcp_operator.controller.render import (
    owner_reference,
    recommended_labels,
    restricted_container_security,
    restricted_pod_security,
)
from mcp_operator.controller.settings import AgentRenderSettings

CONFIG_DIR = "/etc/mcp-bridge"
CONFIG_KEY = "config.yaml"
SECRETS_DIR = "/var/run/mcp-bridge/secrets"
AUDIT_DIR = "/var/log/mcp-bridge"
AUDIT_FILE = f"{AUDIT_DIR}/audit.jsonl"
BRIDGE_PATH = "/mcp"
BRIDGE_CONTAINER = "mcp-bridge"
AGENT_CONTAINER = "agent"
AGENT_RUN_LABEL = f"{GROUP}/agent-run"
"""The label naming a child's AgentRun (the operator watches Pods that carry it)."""
BRIDGE_URL_ENV = "MCP_BRIDGE_URL"
BRIDGE_RESOURCES = {
    "requests": {"cpu": "50m", "memory": "64Mi"},
    "limits": {"memory": "256Mi"},
}


def bridge_enabled(run: AgentRun, settings: AgentRenderSettings) -> bool:
    """Whether this run's Pod gets the bridge (the operator-wide switch and the run's own)."""
    return settings.bridge_enabled and run.spec.bridge.enabled


def bridge_image(run: AgentRun, settings: AgentRenderSettings) -> str:
    """The bridge's image: the run's ``spec.bridge.image`` if set, else the operator's."""
    return run.spec.bridge.image or settings.bridge_image


def bridge_image_allowed(run: AgentRun, settings: AgentRenderSettings) -> bool:
    """Whether the run's bridge image is the platform's choice: unset, the operator's own, or
    matched by a pattern of ``settings.bridge_images`` (``*`` and ``?`` globs, which match
    any character, ``/`` and ``:`` included, as ``--allowed-registries`` does)."""
    image = run.spec.bridge.image
    if image is None or image == settings.bridge_image:
        return True
    return any(fnmatch.fnmatchcase(image, pattern) for pattern in settings.bridge_images)


def agent_secrets(run: AgentRun) -> list[str]:
    """Names of the Secrets the agent container reads (``env[].valueFrom.secretKeyRef``)."""
    return sorted(
        {
            var.value_from.secret_key_ref.name
            for var in run.spec.agent.env or ()
            if var.value_from is not None and var.value_from.secret_key_ref is not None
        }
    )


def labels(run: AgentRun) -> dict[str, str]:
    """The recommended ``app.kubernetes.io/*`` labels of a run's children, and ours."""
    return {
        **recommended_labels(name="agent-run", instance=run.metadata.name, component="agent"),
        AGENT_RUN_LABEL: run.metadata.name,
    }


def config_map_name(run: AgentRun) -> str:
    """``<run>-bridge``, cut to stay a valid object name."""
    return f"{run.metadata.name[:246]}-bridge"


def pod_name(run: AgentRun) -> str:
    return run.metadata.name


def bridge_url(run: AgentRun) -> str:
    """What the agent gets in ``MCP_BRIDGE_URL``."""
    return f"http://127.0.0.1:{run.spec.bridge.port}{BRIDGE_PATH}"


# -- the bridge configuration -------------------------------------------------------------------


def effective_policy(server: CallPolicySpec | None, run: CallPolicySpec | None) -> dict[str, Any]:
    """The server's policy tightened by the run's (:func:`mcp_operator.api.bridge.tighten`),
    complete: what neither sets is the bridge's default, written out."""
    base = CallPolicy.model_validate(_fields(server))
    override = CallPolicyOverride.model_validate(_fields(run)) if run is not None else None
    return tighten(base, override).model_dump(by_alias=True)


def _fields(policy: CallPolicySpec | None) -> dict[str, Any]:
    return policy.model_dump(by_alias=True, exclude_none=True) if policy is not None else {}


def secret_mounts(resolution: Resolution) -> dict[str, str]:
    """Secret name → the directory the bridge reads its keys from (usable servers only)."""
    names = sorted(
        {
            header.value_from.secret_key_ref.name
            for binding in resolution.usable
            for header in _server(binding).spec.headers or ()
            if header.value_from is not None
        }
    )
    return {name: f"{SECRETS_DIR}/{name}" for name in names}


def bridge_config(run: AgentRun, resolution: Resolution) -> dict[str, Any]:
    """The bridge's configuration file (``api.bridge.BridgeConfig``): no secret value in it."""
    mounts = secret_mounts(resolution)
    audit: dict[str, Any] = {"stdout": run.spec.bridge.audit.stdout}
    if run.spec.bridge.audit.file:
        audit["file"] = AUDIT_FILE
    return {
        "apiVersion": API_VERSION,
        "kind": "BridgeConfig",
        "run": {"name": run.metadata.name, "namespace": run.metadata.namespace},
        "listen": {"host": "127.0.0.1", "port": run.spec.bridge.port, "path": BRIDGE_PATH},
        "servers": [_server_config(run, binding, mounts) for binding in resolution.usable],
        "audit": audit,
    }


def _server_config(run: AgentRun, binding: Binding, mounts: Mapping[str, str]) -> dict[str, Any]:
    server = _server(binding)
    status = server.status
    assert status is not None and status.url is not None  # a usable binding is Ready
    filters = [
        _filter(server.spec.tools_allow, server.spec.tools_deny) | other_filters(server.spec),
        _filter(binding.ref.tools_allow, binding.ref.tools_deny) | other_filters(binding.ref),
    ]
    headers: list[dict[str, str]] = []
    for header in server.spec.headers or ():
        if header.value is not None:
            headers.append({"name": header.name, "value": header.value})
        elif header.value_from is not None:
            ref = header.value_from.secret_key_ref
            headers.append({"name": header.name, "valueFile": f"{mounts[ref.name]}/{ref.key}"})
    config: dict[str, Any] = {
        "name": server.metadata.name,
        "namespace": binding.namespace,
        "url": status.url,
        "transport": "sse" if server.spec.effective_transport == "sse" else "streamable-http",
        "prefix": server.effective_prefix,
        # Always both layers, the server's first: the bridge names tools by the first layer
        # (as the server's status does) and narrows by the second.
        "filters": filters,
        "headers": headers,
        "policy": effective_policy(server.spec.policy, run.spec.bridge.policy),
    }
    if status.server_info is not None and status.server_info.protocol_version:
        config["protocolVersion"] = status.server_info.protocol_version
    if status.tools is not None and status.tool_count == len(status.tools):
        # The pins: the tools the operator has seen, by original name, as one more allowlist
        # (a tool the server adds later reaches the agent only after the next probe has
        # listed it here) and as the incumbents of the naming plan (it never takes a name).
        config["tools"] = sorted(tool.original_name for tool in binding.tools)
    return config


def _filter(allow: list[str] | None, deny: list[str] | None) -> dict[str, list[str]]:
    layer: dict[str, list[str]] = {}
    if allow:
        layer["allow"] = list(allow)
    if deny:
        layer["deny"] = list(deny)
    return layer


def other_filters(spec: Any) -> dict[str, list[str]]:
    """The prompt and resource filters of an MCPServer spec or a run's server reference, as a
    bridge filter layer's keys (the unset ones left out)."""
    layer: dict[str, list[str]] = {}
    for field, key in (
        ("prompts_allow", "promptsAllow"),
        ("prompts_deny", "promptsDeny"),
        ("resources_allow", "resourcesAllow"),
        ("resources_deny", "resourcesDeny"),
    ):
        value = getattr(spec, field)
        if value:
            layer[key] = list(value)
    return layer


def _server(binding: Binding) -> MCPServer:
    if binding.server is None:
        raise ValueError(f"reference {binding.name} resolved to no server")
    return binding.server


def config_text(config: Mapping[str, Any]) -> str:
    """The configuration as the file holds it: YAML in render order (same input, same bytes)."""
    return yaml.safe_dump(dict(config), sort_keys=False)


def config_map(run: AgentRun, config: Mapping[str, Any]) -> dict[str, Any]:
    """The ConfigMap the bridge reads its configuration from (mounted, so updates reach it)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(run, config_map_name(run)),
        "data": {CONFIG_KEY: config_text(config)},
    }


def config_checksum(config: Mapping[str, Any]) -> str:
    return hashlib.sha256(config_text(config).encode()).hexdigest()[:32]


# -- the Pod ------------------------------------------------------------------------------------


def pod(run: AgentRun, resolution: Resolution, settings: AgentRenderSettings) -> dict[str, Any]:
    """The agent Pod: the agent container, and the bridge as a native sidecar unless disabled."""
    agent = run.spec.agent
    with_bridge = bridge_enabled(run, settings)
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}}]
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": agent.service_account_name is not None,
        "enableServiceLinks": False,
        "securityContext": restricted_pod_security(),
        "containers": [_agent_container(run, with_bridge)],
        "volumes": volumes,
    }
    if with_bridge:
        spec["initContainers"] = [_bridge_container(run, resolution, settings)]
        volumes.append(
            {
                "name": "bridge-config",
                "configMap": {"name": config_map_name(run), "defaultMode": 0o444},
            }
        )
        for index, (secret, _path) in enumerate(secret_mounts(resolution).items()):
            volumes.append(
                {
                    "name": f"secret-{index}",
                    "secret": {"secretName": secret, "defaultMode": 0o440},
                }
            )
        if run.spec.bridge.audit.file:
            volumes.append({"name": "audit", "emptyDir": {"sizeLimit": "256Mi"}})
    if agent.service_account_name is not None:
        spec["serviceAccountName"] = agent.service_account_name
    if run.spec.active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = run.spec.active_deadline_seconds
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _metadata(run, pod_name(run)),
        "spec": spec,
    }


def _agent_container(run: AgentRun, with_bridge: bool) -> dict[str, Any]:
    agent = run.spec.agent
    # MCP_BRIDGE_URL is the operator's to set: present exactly when the bridge runs.
    user = [
        var.model_dump(by_alias=True, exclude_none=True)
        for var in agent.env or ()
        if var.name != BRIDGE_URL_ENV
    ]
    env = [{"name": "HOME", "value": "/tmp"}] if all(v["name"] != "HOME" for v in user) else []
    env += user
    if with_bridge:
        env.append({"name": BRIDGE_URL_ENV, "value": bridge_url(run)})
    container: dict[str, Any] = {
        "name": AGENT_CONTAINER,
        "image": agent.image,
        "env": env,
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
        "securityContext": restricted_container_security(),
    }
    if agent.command:
        container["command"] = list(agent.command)
    if agent.args:
        container["args"] = list(agent.args)
    if agent.resources is not None:
        container["resources"] = agent.resources.model_dump(by_alias=True, exclude_none=True)
    return container


def _bridge_container(
    run: AgentRun, resolution: Resolution, settings: AgentRenderSettings
) -> dict[str, Any]:
    port = run.spec.bridge.port
    health = {"path": "/readyz", "port": "bridge-health"}
    mounts: list[dict[str, Any]] = [
        {"name": "bridge-config", "mountPath": CONFIG_DIR, "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    for index, (_secret, path) in enumerate(secret_mounts(resolution).items()):
        mounts.append({"name": f"secret-{index}", "mountPath": path, "readOnly": True})
    if run.spec.bridge.audit.file:
        mounts.append({"name": "audit", "mountPath": AUDIT_DIR})
    return {
        "name": BRIDGE_CONTAINER,
        "image": bridge_image(run, settings),
        "imagePullPolicy": settings.bridge_image_pull_policy,
        # A native sidecar: started before the agent, kept running until the agent ends.
        "restartPolicy": "Always",
        "args": [
            "bridge",
            f"--config={CONFIG_DIR}/{CONFIG_KEY}",
            f"--health-port={port + 1}",
        ],
        "ports": [{"name": "bridge-health", "containerPort": port + 1, "protocol": "TCP"}],
        "startupProbe": {"httpGet": health, "periodSeconds": 1, "failureThreshold": 60},
        "readinessProbe": {"httpGet": dict(health), "periodSeconds": 5},
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": "bridge-health"},
            "periodSeconds": 10,
            "failureThreshold": 3,
        },
        "env": [{"name": "HOME", "value": "/tmp"}, *_tracing_env(run)],
        "resources": copy.deepcopy(BRIDGE_RESOURCES),
        "volumeMounts": mounts,
        "securityContext": restricted_container_security(),
    }


def _tracing_env(run: AgentRun) -> list[dict[str, str]]:
    """The standard OpenTelemetry variables of ``spec.bridge.tracing`` (none when unset)."""
    tracing = run.spec.bridge.tracing
    if tracing is None:
        return []
    resource = (
        f"k8s.namespace.name={run.metadata.namespace},mcp_operator.agent_run={run.metadata.name}"
    )
    return [
        {"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": tracing.endpoint},
        {"name": "OTEL_SERVICE_NAME", "value": "mcp-operator-bridge"},
        {"name": "OTEL_RESOURCE_ATTRIBUTES", "value": resource},
        {"name": "OTEL_TRACES_SAMPLER", "value": "parentbased_traceidratio"},
        {"name": "OTEL_TRACES_SAMPLER_ARG", "value": f"{tracing.sample_percent / 100:g}"},
    ]


def _metadata(run: AgentRun, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": run.metadata.namespace,
        "labels": labels(run),
        "ownerReferences": [owner_reference(run)],
    }
