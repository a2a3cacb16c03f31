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

The bridge's identity towards each managed server that authenticates with
Kubernetes tokens is a projected ServiceAccount token whose audience names that
server (:func:`~mcp_operator.api.access.token_audience`), short-lived and
rotated by the kubelet, in a volume mounted into the bridge container only. The
Pod mounts no API token by itself (``automountServiceAccountToken: false``); the
agent gets one, as its own projected volume, only when the run asks for it. No
shared process namespace: the agent cannot read the bridge's files through
``/proc``.
"""

from __future__ import annotations

import copy
import fnmatch
import hashlib
from collections.abc import Mapping
from typing import Any

import yaml

from mcp_operator import API_VERSION
from mcp_operator.api import AgentRun, CallPolicySpec, MCPServer
from mcp_operator.api.access import token_audience
from mcp_operator.api.agentrun import ApprovalWebhookSpec
from mcp_operator.api.bridge_policy import CallPolicy, CallPolicyOverride, tighten
from mcp_operator.controller.agentrun.resolve import Binding, Resolution
from mcp_operator.controller.mcpserver.render import authentication as server_authentication
from mcp_operator.controller.render import (
    AGENT_RUN_LABEL,
    METRICS_ACCESS_KEY,
    metrics_access_text,
    owner_reference,
    recommended_labels,
    restricted_container_security,
    restricted_pod_security,
    tracing_env,
)
from mcp_operator.controller.settings import AgentRenderSettings

CONFIG_DIR = "/etc/mcp-bridge"
CONFIG_KEY = "config.yaml"
SECRETS_DIR = "/var/run/mcp-bridge/secrets"
TOKENS_DIR = "/var/run/mcp-bridge/tokens"
EXCHANGE_DIR = "/var/run/mcp-bridge/exchange"
"""Where the run's projected tokens for token exchanges are mounted (bridge container only)."""
TOKEN_FILE = "token"
TOKEN_EXPIRATION_SECONDS = 600
"""The lifetime of the bridge's projected tokens; the kubelet renews them at 80 %."""
API_TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
AUDIT_DIR = "/var/log/mcp-bridge"
AUDIT_FILE = f"{AUDIT_DIR}/audit.jsonl"
BRIDGE_PATH = "/mcp"
BRIDGE_CONTAINER = "mcp-bridge"
AGENT_CONTAINER = "agent"
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
    """The server's policy tightened by the run's (:func:`mcp_operator.api.bridge_policy.tighten`),
    complete: what neither sets is the bridge's default, written out."""
    base = CallPolicy.model_validate(_fields(server))
    override = CallPolicyOverride.model_validate(_fields(run)) if run is not None else None
    policy = tighten(base, override).model_dump(by_alias=True, exclude_none=True)
    for key in ("rules", "rateLimits", "requireApproval", "approveDestructive"):
        if not policy[key]:  # written only when set
            del policy[key]
    return policy


def _fields(policy: CallPolicySpec | None) -> dict[str, Any]:
    return policy.model_dump(by_alias=True, exclude_none=True) if policy is not None else {}


def secret_mounts(resolution: Resolution, run: AgentRun | None = None) -> dict[str, str]:
    """Secret name → the directory the bridge reads its keys from (usable servers' headers
    and OAuth client secrets, and the run's approval webhook key)."""
    names = {
        header.value_from.secret_key_ref.name
        for binding in resolution.usable
        for header in _server(binding).spec.headers or ()
        if header.value_from is not None
    } | {name for binding in resolution.usable if (name := _auth_secret(_server(binding)))}
    webhook = approval_webhook(run) if run is not None else None
    if webhook is not None:
        names.add(webhook.secret_ref.name)
    return {name: f"{SECRETS_DIR}/{name}" for name in sorted(names)}


def approval_webhook(run: AgentRun) -> ApprovalWebhookSpec | None:
    """The run's approval webhook, when the bridge runs and has one."""
    approval = run.spec.bridge.approval
    return approval.webhook if approval is not None else None


def _auth_secret(server: MCPServer) -> str | None:
    """The Secret of the client secret the bridge sends to ``spec.auth``'s token endpoint."""
    ref = server.spec.auth.client_secret_ref if server.spec.auth is not None else None
    return ref.name if ref is not None else None


def exchange_mounts(resolution: Resolution) -> dict[tuple[str, str], tuple[str, str]]:
    """``(namespace, name)`` of each usable server whose ``spec.auth`` is a token exchange →
    the directory of the run's projected token that the bridge exchanges for it (the subject
    token) and that token's audience (what the authorization server expects)."""
    mounts: dict[tuple[str, str], tuple[str, str]] = {}
    for binding in resolution.usable:
        server = _server(binding)
        directory = exchange_mount(binding)
        if directory is not None and server.spec.auth and server.spec.auth.token_exchange:
            audience = server.spec.auth.token_exchange.effective_subject_token_audience
            mounts[(binding.namespace, server.metadata.name)] = (directory, audience)
    return mounts


def exchange_mount(binding: Binding) -> str | None:
    """The directory of the subject token of ``binding``'s token exchange, if it has one."""
    server = _server(binding)
    if server.spec.auth is None or server.spec.auth.token_exchange is None:
        return None
    return f"{EXCHANGE_DIR}/{binding.namespace}/{server.metadata.name}"


def _auth_config(
    server: MCPServer,
    url: str,
    mounts: Mapping[str, str],
    exchange_dir: str | None,
) -> dict[str, Any] | None:
    """The bridge's ``auth`` of a server: files for secrets, the resource defaulted to the
    server's URL (RFC 8707)."""
    auth = server.spec.auth
    if auth is None:
        return None
    method = auth.method
    config: dict[str, Any] = {
        "tokenURL": method.token_url,
        "resource": method.resource or url,
        "scopes": list(method.scopes or ()),
    }
    if method.audience:
        config["audience"] = method.audience
    if method.client_id:
        config["clientID"] = method.client_id
    ref = method.client_secret_ref
    if ref is not None:
        config["clientSecretFile"] = f"{mounts[ref.name]}/{ref.key}"
    if auth.token_exchange is not None:
        assert exchange_dir is not None  # exchange_mounts names every token exchange
        config["subjectTokenFile"] = f"{exchange_dir}/{TOKEN_FILE}"
        return {"tokenExchange": config}
    return {"oauth2ClientCredentials": config}


def token_mounts(resolution: Resolution) -> dict[tuple[str, str], str]:
    """``(namespace, name)`` of each usable server that authenticates with Kubernetes tokens
    → the directory of the bridge's projected token for it."""
    return {
        (binding.namespace, server.metadata.name): (
            f"{TOKENS_DIR}/{binding.namespace}/{server.metadata.name}"
        )
        for binding in resolution.usable
        if _authenticates(server := _server(binding))
    }


def _authenticates(server: MCPServer) -> bool:
    """Whether the server's endpoint checks Kubernetes tokens (so the bridge needs one)."""
    return server.spec.mode == "managed" and server_authentication(server) == "kubernetes"


def service_account(run: AgentRun) -> str:
    """The run Pod's ServiceAccount."""
    return run.spec.agent.service_account_name or "default"


def bridge_config(run: AgentRun, resolution: Resolution) -> dict[str, Any]:
    """The bridge's configuration file (``api.bridge.BridgeConfig``): no secret value in it."""
    mounts = secret_mounts(resolution, run)
    tokens = token_mounts(resolution)
    audit: dict[str, Any] = {"stdout": run.spec.bridge.audit.stdout}
    if run.spec.bridge.audit.file:
        audit["file"] = AUDIT_FILE
    config: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "BridgeConfig",
        "run": {"name": run.metadata.name, "namespace": run.metadata.namespace},
        "listen": {"host": "127.0.0.1", "port": run.spec.bridge.port, "path": BRIDGE_PATH},
        "servers": [_server_config(run, binding, mounts, tokens) for binding in resolution.usable],
        "audit": audit,
        "identity": {
            "namespace": run.metadata.namespace,
            "serviceAccount": service_account(run),
            "pod": pod_name(run),
        },
    }
    if run.spec.bridge.discovery != "full":
        config["discovery"] = run.spec.bridge.discovery
    approval = _approval_config(run, mounts)
    if approval:
        config["approval"] = approval
    return config


def _approval_config(run: AgentRun, mounts: Mapping[str, str]) -> dict[str, Any]:
    """The bridge's ``approval``: the agent's wait and the webhook, as the run sets them."""
    approval: dict[str, Any] = {}
    spec = run.spec.bridge.approval
    if spec is not None and spec.elicitation is not None:
        approval["elicitation"] = {"timeoutSeconds": spec.elicitation.timeout_seconds}
    webhook = approval_webhook(run)
    if webhook is not None:
        key = webhook.secret_ref
        approval["webhook"] = {
            "url": webhook.url,
            "timeoutSeconds": webhook.timeout_seconds,
            "secretFile": f"{mounts[key.name]}/{key.key}",
        }
    return approval


def _server_config(
    run: AgentRun,
    binding: Binding,
    mounts: Mapping[str, str],
    tokens: Mapping[tuple[str, str], str],
) -> dict[str, Any]:
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
    token_dir = tokens.get((binding.namespace, server.metadata.name))
    if token_dir is not None:
        config["tokenFile"] = f"{token_dir}/{TOKEN_FILE}"
    exchange = exchange_mount(binding)
    auth = _auth_config(server, status.url, mounts, exchange)
    if auth is not None:
        config["auth"] = auth
    if server.spec.tools_override:
        config["overrides"] = [
            o.model_dump(by_alias=True, exclude_none=True) for o in server.spec.tools_override
        ]
    if status.server_info is not None and status.server_info.protocol_version:
        config["protocolVersion"] = status.server_info.protocol_version
    if status.tools is not None and status.tool_count == len(status.tools):
        # The pins: the tools the operator has seen, by original name, as one more allowlist
        # (a tool the server adds later reaches the agent only after the next probe has
        # listed it here) and as the incumbents of the naming plan (it never takes a name).
        config["tools"] = sorted(tool.original_name for tool in binding.tools)
        # The pinned definitions (status.tools[].definitionSha256): a live definition that
        # differs is refused by the bridge (definition_changed) until the operator re-pins it.
        config["pinning"] = server.spec.tools_pinning
        config["toolDigests"] = {
            tool.original_name: tool.definition_sha256
            for tool in sorted(binding.tools, key=lambda t: t.original_name)
            if tool.definition_sha256
        }
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


def config_map(
    run: AgentRun, config: Mapping[str, Any], *, metrics_access: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The ConfigMap the bridge reads its configuration from (mounted, so updates reach it);
    ``metrics_access``: who may read the bridge's ``/metrics`` (key ``metrics.json``, read
    with ``--metrics-access``; :func:`~mcp_operator.controller.render.metrics_access`)."""
    data = {CONFIG_KEY: config_text(config)}
    if metrics_access is not None:
        data[METRICS_ACCESS_KEY] = metrics_access_text(metrics_access)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(run, config_map_name(run)),
        "data": data,
    }


def config_checksum(config: Mapping[str, Any]) -> str:
    return hashlib.sha256(config_text(config).encode()).hexdigest()[:32]


# -- the Pod ------------------------------------------------------------------------------------


def pod(
    run: AgentRun,
    resolution: Resolution,
    settings: AgentRenderSettings,
    *,
    metrics: bool = False,
) -> dict[str, Any]:
    """The agent Pod: the agent container, and the bridge as a native sidecar unless disabled;
    ``metrics``: the bridge's ConfigMap holds who may read its ``/metrics``
    (``--metrics-access``)."""
    agent = run.spec.agent
    with_bridge = bridge_enabled(run, settings)
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}}]
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        # No API token by itself: the agent's, when asked for, is a volume of its own.
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": restricted_pod_security(),
        "containers": [_agent_container(run, with_bridge)],
        # Never shareProcessNamespace: through /proc the agent could read the bridge's files.
        "volumes": volumes,
    }
    if with_bridge:
        spec["initContainers"] = [_bridge_container(run, resolution, settings, metrics=metrics)]
        volumes.append(
            {
                "name": "bridge-config",
                "configMap": {"name": config_map_name(run), "defaultMode": 0o444},
            }
        )
        for index, (secret, _path) in enumerate(secret_mounts(resolution, run).items()):
            volumes.append(
                {
                    "name": f"secret-{index}",
                    "secret": {"secretName": secret, "defaultMode": 0o440},
                }
            )
        for index, (namespace, name) in enumerate(token_mounts(resolution)):
            volumes.append(_token_volume(f"token-{index}", namespace, name))
        for index, (_path, audience) in enumerate(exchange_mounts(resolution).values()):
            volumes.append(_token_volume(f"exchange-{index}", "", "", audience=audience))
        if run.spec.bridge.audit.file:
            volumes.append({"name": "audit", "emptyDir": {"sizeLimit": "256Mi"}})
    if agent.automount_service_account_token:
        volumes.append(API_TOKEN_VOLUME)
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


def _token_volume(
    volume: str, namespace: str, name: str, *, audience: str | None = None
) -> dict[str, Any]:
    """The bridge's projected token for the server ``namespace/name``: its audience only
    (``audience``: another one, the subject token of a token exchange)."""
    token = {
        "audience": audience or token_audience(namespace, name),
        "expirationSeconds": TOKEN_EXPIRATION_SECONDS,
        "path": TOKEN_FILE,
    }
    return {
        "name": volume,
        "projected": {"defaultMode": 0o440, "sources": [{"serviceAccountToken": token}]},
    }


API_TOKEN_VOLUME: dict[str, Any] = {
    # What the kubelet would mount for automountServiceAccountToken, for the agent alone.
    "name": "kube-api-access",
    "projected": {
        "defaultMode": 0o444,
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {
                "configMap": {
                    "name": "kube-root-ca.crt",
                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                }
            },
            {
                "downwardAPI": {
                    "items": [
                        {"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}
                    ]
                }
            },
        ],
    },
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
    if agent.automount_service_account_token:
        container["volumeMounts"].append(
            {"name": "kube-api-access", "mountPath": API_TOKEN_DIR, "readOnly": True}
        )
    if agent.command:
        container["command"] = list(agent.command)
    if agent.args:
        container["args"] = list(agent.args)
    if agent.resources is not None:
        container["resources"] = agent.resources.model_dump(by_alias=True, exclude_none=True)
    return container


def _bridge_container(
    run: AgentRun, resolution: Resolution, settings: AgentRenderSettings, *, metrics: bool
) -> dict[str, Any]:
    port = run.spec.bridge.port
    health = {"path": "/readyz", "port": "bridge-health"}
    mounts: list[dict[str, Any]] = [
        {"name": "bridge-config", "mountPath": CONFIG_DIR, "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    for index, (_secret, path) in enumerate(secret_mounts(resolution, run).items()):
        mounts.append({"name": f"secret-{index}", "mountPath": path, "readOnly": True})
    for index, path in enumerate(token_mounts(resolution).values()):
        mounts.append({"name": f"token-{index}", "mountPath": path, "readOnly": True})
    for index, (path, _audience) in enumerate(exchange_mounts(resolution).values()):
        mounts.append({"name": f"exchange-{index}", "mountPath": path, "readOnly": True})
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
            *([f"--metrics-access={CONFIG_DIR}/{METRICS_ACCESS_KEY}"] if metrics else []),
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
    resource = {
        "k8s.namespace.name": run.metadata.namespace,
        "mcp_operator.agent_run": run.metadata.name,
    }
    return tracing_env(run.spec.bridge.tracing, "mcp-operator-bridge", resource)


def _metadata(run: AgentRun, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": run.metadata.namespace,
        "labels": labels(run),
        "ownerReferences": [owner_reference(run)],
    }
