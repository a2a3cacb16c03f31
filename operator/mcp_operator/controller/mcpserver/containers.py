"""The containers of a managed server's Pod: the server, our adapter or front, the init steps.

Pure. This module owns what each container runs and mounts: a ``stdio`` server started
through our ``mcp-stdio-exec`` helper on the FIFOs (``command``/``args`` or the image's
``ENTRYPOINT``/``CMD``, :func:`server_argv`), the adapter that serves it, the authenticating
front of an HTTP-native server, the init containers that make the FIFOs and copy the helper,
and the paths, ports and resources they share. :mod:`.render` puts them into the Deployment.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

from mcp_operator.api import DeploymentSpec, MCPServer
from mcp_operator.controller.render import (
    METRICS_ACCESS_KEY,
    restricted_container_security,
    tracing_env,
)
from mcp_operator.controller.settings import RenderSettings
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


def front_port(spec: DeploymentSpec) -> int:
    return FRONT_PORT + 1 if spec.port == FRONT_PORT else FRONT_PORT


def data_plane_image(server: MCPServer, settings: RenderSettings) -> str:
    """The image of ``server``'s adapter or front and of its init containers.

    The compiled data plane (``settings.dataplane_image``, opt-in) serves the adapter's flags
    as the Python adapter does, a child per session (``sessions: perSession``) included, but
    not yet traces (``spec.tracing``): a server that asks for them keeps the Python adapter of
    ``settings.adapter_image``, whose image also holds the stdio helper."""
    if settings.dataplane_image is None or server.spec.tracing is not None:
        return settings.adapter_image
    return settings.dataplane_image


def pinned_image(image: str, digest: str) -> str:
    """``image`` pinned to the manifest ``digest`` the configuration was read from, so that
    the node runs exactly the image whose ``ENTRYPOINT`` was wrapped (kept if already pinned)."""
    return image if "@" in image else f"{image}@{digest}"


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


def stdio_containers(
    server: MCPServer,
    spec: DeploymentSpec,
    settings: RenderSettings,
    image: ImageConfig | None,
    *,
    auth: str,
    hosts: list[str],
) -> list[dict[str, Any]]:
    """The server (started through our helper on the FIFOs) and the adapter that serves it;
    ``auth``: the authentication the adapter enforces, ``hosts``: the Host values it accepts."""
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
    adapter = _adapter_container(
        server, settings, "adapter", adapter_args, spec.port, mounts, auth=auth, hosts=hosts
    )
    return [server_container, adapter]


def _adapter_container(
    server: MCPServer,
    settings: RenderSettings,
    name: str,
    args: list[str],
    port: int,
    mounts: list[dict[str, Any]],
    *,
    auth: str,
    hosts: list[str],
) -> dict[str, Any]:
    """Our adapter (stdio, or the front of an HTTP-native server): ``args`` plus the
    authentication and the allowed hosts, serving on ``port`` (the Service's ``mcp``)."""
    probe_port = {"port": ADAPTER_PORT_NAME}
    adapter_args = [*args, f"--auth={auth}"]
    adapter_mounts: list[dict[str, Any]] = [*mounts, {"name": "tmp", "mountPath": "/tmp"}]
    if auth != "none":
        adapter_args.append(f"--access-config={ACCESS_DIR}/{ACCESS_KEY}")
        adapter_args.append(f"--metrics-access={ACCESS_DIR}/{METRICS_ACCESS_KEY}")
        adapter_mounts.append({"name": ACCESS_VOLUME, "mountPath": ACCESS_DIR, "readOnly": True})
    # The Service's names (an operator outside the cluster, through the API server's service
    # proxy, sends one too: managed.probe_endpoint), and the Pod's own IP, for a client that
    # addresses the Pod itself.
    adapter_args += [f"--allowed-host={host}" for host in [*hosts, "$(POD_IP)"]]
    return {
        "name": name,
        "image": data_plane_image(server, settings),
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


def front_container(
    server: MCPServer,
    spec: DeploymentSpec,
    settings: RenderSettings,
    *,
    auth: str,
    hosts: list[str],
) -> dict[str, Any]:
    """The authenticating front of an HTTP-native server, on the Service's port."""
    args = [
        "adapter",
        f"--upstream-url=http://127.0.0.1:{spec.port}{spec.path}",
        "--host=::",
        f"--port={front_port(spec)}",
        f"--path={spec.path}",
    ]
    return _adapter_container(
        server, settings, "front", args, front_port(spec), [], auth=auth, hosts=hosts
    )


def _helper_mode(spec: DeploymentSpec) -> str:
    """How the helper starts the server: once on the FIFOs (``shared``), or once per
    connection to its socket in the same volume (``perSession``, ``socket_child``)."""
    if spec.sessions == "perSession":
        return f"--spawn-socket={FIFO_DIR}/{SPAWN_SOCKET}"
    return f"--fifo-dir={FIFO_DIR}"


def fifo_init_container(server: MCPServer, settings: RenderSettings) -> dict[str, Any]:
    """Makes the FIFOs in their shared ``emptyDir`` before the server and the adapter start."""
    return {
        "name": "fifos",
        "image": data_plane_image(server, settings),
        "imagePullPolicy": settings.adapter_image_pull_policy,
        "args": ["adapter", f"--stdio-fifo-dir={FIFO_DIR}", "--make-fifos"],
        "volumeMounts": [{"name": "fifos", "mountPath": FIFO_DIR}],
        "resources": copy.deepcopy(ADAPTER_RESOURCES),
        "securityContext": restricted_container_security(),
    }


def exec_init_container(server: MCPServer, settings: RenderSettings) -> dict[str, Any]:
    """Copies our helper into the ``emptyDir`` the server container starts it from (both
    images hold it on ``PATH``)."""
    return {
        "name": "stdio-exec",
        "image": data_plane_image(server, settings),
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


def http_container(spec: DeploymentSpec, behind_front: bool) -> dict[str, Any]:
    """An HTTP-native server's own container (its port not the Service's behind the front)."""
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
