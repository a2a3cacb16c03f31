"""Render an AgentRun's Pod: the agent container and the bridge as a native sidecar.

Pure: no I/O, no clock, no randomness; the resolution (:mod:`.resolve`) comes in,
complete manifest dicts come out; golden files pin them down. This module also owns the
names, labels and paths of a run's children; the bridge's configuration and its ConfigMap are
:mod:`.configmap`'s, the directories of its secrets and tokens :mod:`.mounts`'.

The Pod runs the agent container and, unless the bridge is switched off, the
``mcp-bridge`` as a native sidecar: an init container with ``restartPolicy:
Always``, started (and its startup probe on ``/readyz`` passed) before the agent,
and still running while the agent finishes. The bridge serves MCP on the Pod's
loopback at ``spec.bridge.port`` (the agent gets ``MCP_BRIDGE_URL``) and its
health and metrics on ``port + 1`` on the Pod IP, where the kubelet's probes and
a metrics scraper can reach them.

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
from typing import Any

from mcp_operator.api import AgentRun
from mcp_operator.api.access import token_audience
from mcp_operator.controller.agentrun.mounts import (
    TOKEN_FILE,
    exchange_mounts,
    secret_mounts,
    token_mounts,
)
from mcp_operator.controller.agentrun.resolve import Resolution
from mcp_operator.controller.render import (
    AGENT_RUN_LABEL,
    METRICS_ACCESS_KEY,
    owner_reference,
    recommended_labels,
    restricted_container_security,
    restricted_pod_security,
    tracing_env,
)
from mcp_operator.controller.settings import AgentRenderSettings

CONFIG_DIR = "/etc/mcp-bridge"
CONFIG_KEY = "config.yaml"
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
    """The bridge's image: the run's ``spec.bridge.image`` if set, else the compiled data
    plane's (``settings.dataplane_image``, when the platform names one), else the operator's.

    The compiled bridge serves the same configuration, flags and endpoints, but does not yet
    export traces: a run that asks for them (``spec.bridge.tracing``) keeps the Python bridge
    of ``settings.bridge_image``, as a managed server with ``spec.tracing`` keeps the Python
    adapter."""
    if run.spec.bridge.image:
        return run.spec.bridge.image
    if settings.dataplane_image is None or run.spec.bridge.tracing is not None:
        return settings.bridge_image
    return settings.dataplane_image


def bridge_image_allowed(run: AgentRun, settings: AgentRenderSettings) -> bool:
    """Whether the run's bridge image is the platform's choice: unset, the operator's own or
    its compiled data plane's, or matched by a pattern of ``settings.bridge_images`` (``*``
    and ``?`` globs, which match any character, ``/`` and ``:`` included, as
    ``--allowed-registries`` does)."""
    image = run.spec.bridge.image
    if image is None or image in (settings.bridge_image, settings.dataplane_image):
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


def service_account(run: AgentRun) -> str:
    """The run Pod's ServiceAccount."""
    return run.spec.agent.service_account_name or "default"


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
        "metadata": child_metadata(run, pod_name(run)),
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


def child_metadata(run: AgentRun, name: str) -> dict[str, Any]:
    """The metadata of a run's child ``name``: its namespace, labels and owner."""
    return {
        "name": name,
        "namespace": run.metadata.namespace,
        "labels": labels(run),
        "ownerReferences": [owner_reference(run)],
    }
