"""The bridge's configuration file for one AgentRun, and the ConfigMap that carries it.

Pure: the resolution (:mod:`.resolve`) comes in, the ``BridgeConfig`` document
(:mod:`mcp_operator.api.bridge`) and its ConfigMap come out, in render order (same input,
same bytes). This module owns what the bridge is told: each usable server's URL, filter
layers, headers, effective call policy, credentials and pins, the run's audit and approval.

The configuration pins the tools the operator has probed (``tools``, when the server's status
lists them all): the bridge exposes a tool only when it passes the filters and is listed
there, so a tool a server adds later reaches agents after the next probe has seen it, never
before. Secret values never enter it: a header whose value comes from a Secret is rendered as
the path of a file (:mod:`.mounts`) that a Secret volume mounts into the bridge container only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import yaml

from mcp_operator import API_VERSION
from mcp_operator.api import AgentRun, CallPolicySpec, MCPServer
from mcp_operator.api.bridge_policy import CallPolicy, CallPolicyOverride, tighten
from mcp_operator.controller.agentrun.mounts import (
    TOKEN_FILE,
    approval_webhook,
    exchange_mount,
    secret_mounts,
    token_mounts,
)
from mcp_operator.controller.agentrun.render import (
    AUDIT_FILE,
    BRIDGE_PATH,
    CONFIG_KEY,
    child_metadata,
    config_map_name,
    pod_name,
    service_account,
)
from mcp_operator.controller.agentrun.resolve import Binding, Resolution
from mcp_operator.controller.render import (
    METRICS_ACCESS_KEY,
    metrics_access_text,
)


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
    server = binding.resolved_server()
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
        "metadata": child_metadata(run, config_map_name(run)),
        "data": data,
    }


def config_checksum(config: Mapping[str, Any]) -> str:
    return hashlib.sha256(config_text(config).encode()).hexdigest()[:32]
