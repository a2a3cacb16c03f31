"""Render the children of a managed MCPServer: parsed objects in, manifest dicts out.

Pure: no I/O, no clock, no randomness, no kopf or kubernetes imports; golden
files in ``tests/unit/golden/`` pin the output down. This module owns the Deployment and
the Service, their names and labels; what each container of the Pod runs is
:mod:`.containers`'.

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

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from mcp_operator import GROUP
from mcp_operator.api import DeploymentSpec, MCPServer
from mcp_operator.controller.mcpserver.containers import (
    ACCESS_VOLUME,
    ADAPTER_PORT_NAME,
    exec_init_container,
    fifo_init_container,
    front_container,
    http_container,
    stdio_containers,
)
from mcp_operator.controller.render import (
    owner_reference,
    recommended_labels,
    restricted_pod_security,
)

# Re-exported: callers render with ``render.deployment(server, render.RenderSettings())``.
from mcp_operator.controller.settings import RenderSettings as RenderSettings
from mcp_operator.oci.config import ImageConfig


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
    auth, hosts = authentication(server), allowed_hosts(server, settings)
    pod_annotations: dict[str, str] = {}
    if secrets_version:
        pod_annotations[f"{GROUP}/secrets-version"] = secrets_version
    pod_spec: dict[str, Any] = {
        "automountServiceAccountToken": spec.service_account_name is not None,
        "enableServiceLinks": False,
        "securityContext": restricted_pod_security(),
        "containers": (
            stdio_containers(server, spec, settings, image, auth=auth, hosts=hosts)
            if stdio
            else [http_container(spec, fronted(server))]
        ),
        "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}}],
    }
    if stdio:
        pod_spec["initContainers"] = [
            fifo_init_container(server, settings),
            exec_init_container(server, settings),
        ]
        pod_spec["volumes"] += [
            {"name": "fifos", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
            {"name": "exec", "emptyDir": {"sizeLimit": "16Mi"}},
        ]
    if not stdio and fronted(server):
        pod_spec["containers"].append(
            front_container(server, spec, settings, auth=auth, hosts=hosts)
        )
    if (stdio or fronted(server)) and auth != "none":
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
