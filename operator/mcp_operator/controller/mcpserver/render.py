"""Render the children of a managed MCPServer: parsed objects in, manifest dicts out.

Pure: no I/O, no clock, no randomness, no kopf or kubernetes imports; golden
files in ``tests/unit/golden/`` pin the output down.

A managed ``stdio`` server runs as two containers in one Pod, sharing an
``emptyDir`` that holds two FIFOs (see ``docs/managed-mode.md``):

- ``fifos`` (init container, our image) creates the FIFOs;
- ``stdio-exec`` (init container, our image) copies ``mcp-stdio-exec``, a small
  static program of ours, into a second ``emptyDir``;
- ``server`` (the user's unmodified image) starts through that program, which
  puts its stdin and stdout on the FIFOs and becomes the server's own
  process: ``command``/``args``, or the image's ``ENTRYPOINT``/``CMD`` that the
  caller read from the registry (:class:`~mcp_operator.oci.config.ImageConfig`);
  nothing is needed from the image, not even a shell;
- ``adapter`` (our image) serves Streamable HTTP on the port and speaks stdio
  to the server through the FIFOs.

A managed ``stdio`` server's adapter authenticates every request as
``spec.access.authentication`` says (``--auth``, default ``kubernetes``), with the access
configuration the operator writes into the ConfigMap ``<server>-access``
(:mod:`~mcp_operator.controller.mcpserver.access`) mounted read-only at
``/etc/mcp-operator/access/``.

A managed ``streamable-http`` server that authenticates (the default) runs its container
behind ``front``, our adapter in front mode (``--upstream-url``) in the same Pod: the front
takes the Service's port (the container port named ``mcp``), checks every request as the
adapter does and forwards what passes to the server on ``127.0.0.1:<port>``; the server's own
port is named ``server`` and is not the Service's (a NetworkPolicy admits only ``mcp``). A
managed ``sse`` server, and one with ``authentication: none``, runs its container alone (its
status says ``none``).
With ``spec.tracing``, the adapter or front gets the ``OTEL_*`` variables that turn its
traces on (``controller.render.tracing_env``, as an AgentRun's bridge does).
Reading the registry is the caller's business; this module only uses what it read.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from mcp_operator import GROUP
from mcp_operator.api import DeploymentSpec, MCPServer
from mcp_operator.controller.render import (
    METRICS_ACCESS_KEY,
    owner_reference,
    recommended_labels,
    restricted_container_security,
    restricted_pod_security,
    tracing_env,
)

# Re-exported: callers render with ``render.deployment(server, render.RenderSettings())``.
from mcp_operator.controller.settings import RenderSettings as RenderSettings
from mcp_operator.oci.config import ImageConfig, container_argv, numeric_user

FIFO_DIR = "/run/mcp"
EXEC_DIR = "/run/mcp-exec"
EXEC_HELPER = "mcp-stdio-exec"
"""Our static helper: on ``PATH`` in our image, copied to ``EXEC_DIR`` for the server."""
SPAWN_SOCKET = "spawn.sock"
"""The helper's socket of ``perSession`` (the adapter's ``socket_child.SPAWN_SOCKET``)."""
ADAPTER_PORT_NAME = "mcp"
ACCESS_DIR = "/etc/mcp-operator/access"
ACCESS_KEY = "access.json"
ACCESS_VOLUME = "access"
SERVER_PORT_NAME = "server"
FRONT_PORT = 18080
"""Where the authenticating front of an HTTP-native server listens (18081 when the server
itself uses 18080)."""
ADAPTER_RESOURCES = {
    "requests": {"cpu": "50m", "memory": "64Mi"},
    "limits": {"memory": "256Mi"},
}


def labels(server: MCPServer) -> dict[str, str]:
    """The recommended ``app.kubernetes.io/*`` labels of every child."""
    return {
        **recommended_labels(
            name="mcp-server", instance=server.metadata.name, component="mcp-server"
        ),
        f"{GROUP}/server": server.metadata.name,
    }


def selector(server: MCPServer) -> dict[str, str]:
    """The Pod selector (immutable in a Deployment, so it uses only stable labels)."""
    return {
        "app.kubernetes.io/instance": server.metadata.name,
        f"{GROUP}/server": server.metadata.name,
    }


def service_url(server: MCPServer, settings: RenderSettings) -> str:
    """``status.url`` of a managed server: the Service's in-cluster URL."""
    spec = _deployment(server)
    return (
        f"http://{server.metadata.name}.{server.metadata.namespace}.svc."
        f"{settings.cluster_domain}:{spec.port}{spec.path}"
    )


def allowed_hosts(server: MCPServer, settings: RenderSettings) -> list[str]:
    """Host header values the adapter accepts: every name of the Service."""
    name, namespace = server.metadata.name, server.metadata.namespace
    return [
        name,
        f"{name}.{namespace}",
        f"{name}.{namespace}.svc",
        f"{name}.{namespace}.svc.{settings.cluster_domain}",
    ]


def access_config_map_name(server: MCPServer) -> str:
    """``<server>-access``: the adapter's access configuration."""
    return f"{server.metadata.name[:246]}-access"


def authentication(server: MCPServer) -> str:
    """The authentication the server's endpoint enforces: ``spec.access.authentication``
    (``kubernetes`` when unset) where our adapter or front serves it, ``none`` for a legacy
    ``sse`` server (no front of ours speaks that transport)."""
    if server.spec.effective_transport == "sse":
        return "none"
    access = server.spec.access
    return access.authentication if access is not None else "kubernetes"


def fronted(server: MCPServer) -> bool:
    """Whether an HTTP-native server runs behind our authenticating front."""
    return server.spec.effective_transport == "streamable-http" and authentication(server) != "none"


def front_port(spec: DeploymentSpec) -> int:
    return FRONT_PORT + 1 if spec.port == FRONT_PORT else FRONT_PORT


def secret_references(server: MCPServer) -> list[str]:
    """Names of the Secrets the Pod reads (a change of any of them rolls the Deployment)."""
    return sorted({use.secret for use in server.referenced_secrets() if use.reader == "pod"})


def secrets_checksum(versions: Mapping[str, str]) -> str:
    """A checksum of Secret identities (name, uid and resourceVersion), never of their data."""
    return hashlib.sha256(json.dumps(sorted(versions.items())).encode()).hexdigest()[:32]


def needs_image_config(server: MCPServer) -> bool:
    """Whether rendering needs the image's configuration from its registry: a stdio server
    without ``command`` (its ``ENTRYPOINT`` and ``CMD`` are wrapped, its ``USER`` honoured)."""
    spec = server.spec.deployment
    return spec is not None and server.spec.effective_transport == "stdio" and not spec.command


def pinned_image(image: str, digest: str) -> str:
    """``image`` pinned to the manifest ``digest`` the configuration was read from, so that
    the node runs exactly the image whose ``ENTRYPOINT`` was wrapped (kept if already pinned)."""
    return image if "@" in image else f"{image}@{digest}"


def deployment(
    server: MCPServer,
    settings: RenderSettings,
    *,
    secrets_version: str = "",
    image: ImageConfig | None = None,
) -> dict[str, Any]:
    """The Deployment of a managed server; ``image`` is required when
    :func:`needs_image_config` says so (it may raise
    :class:`~mcp_operator.oci.config.ImageConfigError` when the image cannot be wrapped)."""
    spec = _deployment(server)
    stdio = server.spec.effective_transport == "stdio"
    pod_annotations: dict[str, str] = {}
    if secrets_version:
        pod_annotations[f"{GROUP}/secrets-version"] = secrets_version
    pod_spec: dict[str, Any] = {
        "automountServiceAccountToken": spec.service_account_name is not None,
        "enableServiceLinks": False,
        "securityContext": restricted_pod_security(),
        "containers": (
            _stdio_containers(server, settings, image)
            if stdio
            else [_http_container(spec, fronted(server))]
        ),
        "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}}],
    }
    if stdio:
        pod_spec["initContainers"] = [
            _fifo_init_container(settings),
            _exec_init_container(settings),
        ]
        pod_spec["volumes"] += [
            {"name": "fifos", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
            {"name": "exec", "emptyDir": {"sizeLimit": "16Mi"}},
        ]
    if not stdio and fronted(server):
        pod_spec["containers"].append(_front_container(server, settings))
    if (stdio or fronted(server)) and authentication(server) != "none":
        pod_spec["volumes"].append(
            {
                "name": ACCESS_VOLUME,
                "configMap": {"name": access_config_map_name(server), "defaultMode": 0o444},
            }
        )
    pod_spec["volumes"] += [
        {"name": f"writable-{i}", "emptyDir": {"sizeLimit": writable.size_limit}}
        for i, writable in enumerate(spec.writable_dirs or ())
    ]
    if spec.service_account_name is not None:
        pod_spec["serviceAccountName"] = spec.service_account_name
    if spec.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": ref.name} for ref in spec.image_pull_secrets]
    template_metadata: dict[str, Any] = {"labels": labels(server)}
    if pod_annotations:
        template_metadata["annotations"] = pod_annotations
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(server),
        "spec": {
            "replicas": 0 if server.spec.suspend else spec.replicas,
            "selector": {"matchLabels": selector(server)},
            "strategy": {"type": "RollingUpdate"},
            "template": {"metadata": template_metadata, "spec": pod_spec},
        },
    }


def service(server: MCPServer) -> dict[str, Any]:
    """The ClusterIP Service of a managed server."""
    spec = _deployment(server)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(server),
        "spec": {
            "type": "ClusterIP",
            "selector": selector(server),
            "ports": [
                {
                    "name": ADAPTER_PORT_NAME,
                    "port": spec.port,
                    "targetPort": ADAPTER_PORT_NAME,
                    "protocol": "TCP",
                    "appProtocol": "http",
                }
            ],
        },
    }


# -- containers ------------------------------------------------------------------------------


def server_argv(spec: DeploymentSpec, image: ImageConfig | None) -> list[str]:
    """The server's own process: ``command`` + ``args``, or the image's, by the Pod's rules."""
    if image is None:
        if not spec.command:
            raise ValueError("a stdio server without command needs its image configuration")
        return [*spec.command, *(spec.args or ())]
    # The kubelet expands $(VAR) in a Pod's command, a runtime never does in ENTRYPOINT/CMD:
    # the image's words are escaped ($ -> $$, which the kubelet turns back into $).
    verbatim = dataclasses.replace(
        image,
        entrypoint=tuple(word.replace("$", "$$") for word in image.entrypoint),
        cmd=tuple(word.replace("$", "$$") for word in image.cmd),
    )
    return container_argv(verbatim, spec.command, spec.args)


def _stdio_containers(
    server: MCPServer, settings: RenderSettings, image: ImageConfig | None
) -> list[dict[str, Any]]:
    spec = _deployment(server)
    helper = [f"{EXEC_DIR}/{EXEC_HELPER}", _helper_mode(spec), "--"]
    security = restricted_container_security()
    user = numeric_user(image.user) if image is not None else None
    if user is not None and user[0] != 0:
        # The image's own non-root user; root, names and no USER keep the Pod's 65532.
        security["runAsUser"] = user[0]
        if user[1] is not None:
            security["runAsGroup"] = user[1]
    server_container: dict[str, Any] = {
        "name": "server",
        "image": spec.image if image is None else pinned_image(spec.image, image.pinned_digest),
        "command": [*helper, *server_argv(spec, image)],
        "env": _env(spec, extra={"HOME": "/tmp"}),
        "volumeMounts": [
            {"name": "fifos", "mountPath": FIFO_DIR},
            {"name": "exec", "mountPath": EXEC_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
            *_writable_mounts(spec),
        ],
        "securityContext": security,
    }
    _add_optional(server_container, spec)
    adapter_args = [
        "adapter",
        "--host=::",  # every address, IPv4 and IPv6: single-stack clusters of either family
        f"--port={spec.port}",
        f"--path={spec.path}",
        f"--stdio-fifo-dir={FIFO_DIR}",
    ]
    if spec.sessions == "perSession":
        adapter_args.append("--child-per-session")
    mounts = [{"name": "fifos", "mountPath": FIFO_DIR}]
    adapter = _adapter_container(server, settings, "adapter", adapter_args, spec.port, mounts)
    return [server_container, adapter]


def _adapter_container(
    server: MCPServer,
    settings: RenderSettings,
    name: str,
    args: list[str],
    port: int,
    mounts: list[dict[str, Any]],
) -> dict[str, Any]:
    """Our adapter (stdio, or the front of an HTTP-native server): ``args`` plus the
    authentication and the allowed hosts, serving on ``port`` (the Service's ``mcp``)."""
    probe_port = {"port": ADAPTER_PORT_NAME}
    adapter_args = [*args, f"--auth={authentication(server)}"]
    adapter_mounts: list[dict[str, Any]] = [*mounts, {"name": "tmp", "mountPath": "/tmp"}]
    if authentication(server) != "none":
        adapter_args.append(f"--access-config={ACCESS_DIR}/{ACCESS_KEY}")
        adapter_args.append(f"--metrics-access={ACCESS_DIR}/{METRICS_ACCESS_KEY}")
        adapter_mounts.append({"name": ACCESS_VOLUME, "mountPath": ACCESS_DIR, "readOnly": True})
    # The Service's names (an operator outside the cluster, through the API server's service
    # proxy, sends one too: managed.probe_endpoint), and the Pod's own IP, for a client that
    # addresses the Pod itself.
    hosts = [*allowed_hosts(server, settings), "$(POD_IP)"]
    adapter_args += [f"--allowed-host={host}" for host in hosts]
    return {
        "name": name,
        "image": settings.adapter_image,
        "imagePullPolicy": settings.adapter_image_pull_policy,
        "args": adapter_args,
        "ports": [{"name": ADAPTER_PORT_NAME, "containerPort": port, "protocol": "TCP"}],
        "readinessProbe": {
            "httpGet": {"path": "/readyz", **probe_port},
            "periodSeconds": 5,
            "failureThreshold": 2,
        },
        # Liveness asks only whether the adapter itself answers: while the server container
        # restarts, /healthz is red, but restarting the adapter would not help.
        "livenessProbe": {
            "tcpSocket": probe_port,
            "periodSeconds": 10,
            "failureThreshold": 3,
        },
        "env": [
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            *_tracing_env(server),
        ],
        "resources": copy.deepcopy(ADAPTER_RESOURCES),
        "volumeMounts": adapter_mounts,
        "securityContext": restricted_container_security(),
    }


def _tracing_env(server: MCPServer) -> list[dict[str, str]]:
    """The ``OTEL_*`` variables of ``spec.tracing`` for the adapter or front (none when
    unset); the server's own container gets none (its ``deployment.env`` is the user's)."""
    resource = {
        "k8s.namespace.name": server.metadata.namespace,
        "mcp_operator.mcp_server": server.metadata.name,
    }
    return tracing_env(server.spec.tracing, "mcp-operator-adapter", resource)


def _front_container(server: MCPServer, settings: RenderSettings) -> dict[str, Any]:
    """The authenticating front of an HTTP-native server, on the Service's port."""
    spec = _deployment(server)
    args = [
        "adapter",
        f"--upstream-url=http://127.0.0.1:{spec.port}{spec.path}",
        "--host=::",
        f"--port={front_port(spec)}",
        f"--path={spec.path}",
    ]
    return _adapter_container(server, settings, "front", args, front_port(spec), [])


def _helper_mode(spec: DeploymentSpec) -> str:
    """How the helper starts the server: once on the FIFOs (``shared``), or once per
    connection to its socket in the same volume (``perSession``, ``socket_child``)."""
    if spec.sessions == "perSession":
        return f"--spawn-socket={FIFO_DIR}/{SPAWN_SOCKET}"
    return f"--fifo-dir={FIFO_DIR}"


def _fifo_init_container(settings: RenderSettings) -> dict[str, Any]:
    return {
        "name": "fifos",
        "image": settings.adapter_image,
        "imagePullPolicy": settings.adapter_image_pull_policy,
        "args": ["adapter", f"--stdio-fifo-dir={FIFO_DIR}", "--make-fifos"],
        "volumeMounts": [{"name": "fifos", "mountPath": FIFO_DIR}],
        "resources": copy.deepcopy(ADAPTER_RESOURCES),
        "securityContext": restricted_container_security(),
    }


def _exec_init_container(settings: RenderSettings) -> dict[str, Any]:
    return {
        "name": "stdio-exec",
        "image": settings.adapter_image,
        "imagePullPolicy": settings.adapter_image_pull_policy,
        "command": [EXEC_HELPER, f"--install={EXEC_DIR}"],
        "volumeMounts": [{"name": "exec", "mountPath": EXEC_DIR}],
        "resources": copy.deepcopy(ADAPTER_RESOURCES),
        "securityContext": restricted_container_security(),
    }


def _writable_mounts(spec: DeploymentSpec) -> list[dict[str, Any]]:
    return [
        {"name": f"writable-{i}", "mountPath": writable.mount_path}
        for i, writable in enumerate(spec.writable_dirs or ())
    ]


def _http_container(spec: DeploymentSpec, behind_front: bool) -> dict[str, Any]:
    # Behind the front, the server's own port is not the Service's (named "mcp").
    port_name = SERVER_PORT_NAME if behind_front else ADAPTER_PORT_NAME
    container: dict[str, Any] = {
        "name": "server",
        "image": spec.image,
        "ports": [{"name": port_name, "containerPort": spec.port, "protocol": "TCP"}],
        "env": _env(spec, extra={"HOME": "/tmp"}),
        "readinessProbe": {"tcpSocket": {"port": port_name}, "periodSeconds": 5},
        "livenessProbe": {
            "tcpSocket": {"port": port_name},
            "periodSeconds": 10,
            "failureThreshold": 3,
        },
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, *_writable_mounts(spec)],
        "securityContext": restricted_container_security(),
    }
    if spec.command:
        container["command"] = list(spec.command)
    if spec.args:
        container["args"] = list(spec.args)
    _add_optional(container, spec)
    return container


def _add_optional(container: dict[str, Any], spec: DeploymentSpec) -> None:
    if spec.image_pull_policy:
        container["imagePullPolicy"] = spec.image_pull_policy
    if spec.resources is not None:
        container["resources"] = spec.resources.model_dump(by_alias=True, exclude_none=True)


def _env(spec: DeploymentSpec, *, extra: Mapping[str, str]) -> list[dict[str, Any]]:
    user = [var.model_dump(by_alias=True, exclude_none=True) for var in spec.env or ()]
    names = {var["name"] for var in user}
    return [{"name": k, "value": v} for k, v in extra.items() if k not in names] + user


def _metadata(server: MCPServer) -> dict[str, Any]:
    return {
        "name": server.metadata.name,
        "namespace": server.metadata.namespace,
        "labels": labels(server),
        "ownerReferences": [owner_reference(server)],
    }


def _deployment(server: MCPServer) -> DeploymentSpec:
    if server.spec.deployment is None:
        raise ValueError("only a managed MCPServer has a Deployment")
    return server.spec.deployment
