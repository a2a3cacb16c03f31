"""Managed mode: apply a server's Deployment, Service and NetworkPolicy, and tell the truth
about them.

:func:`deploy` reads the image's configuration when the Pod needs it
(:mod:`mcp_operator.controller.mcpserver.images`), renders (pure,
:mod:`mcp_operator.controller.mcpserver.render` and ``.network``) and applies the children
with server-side apply (the NetworkPolicy first: :func:`apply_network_policy`);
:func:`deployed_condition` reads the
Deployment's own status (and its Pods' phases) into the ``Deployed``
condition; :func:`probe_endpoint` says how the operator reaches the Service:
by its DNS name in a cluster, through the API server's service proxy from a
laptop (``/api/v1/namespaces/NS/services/NAME:PORT/proxy/PATH``).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

import httpx

from mcp_operator.api import MCPServer
from mcp_operator.controller import network_policies, opt_in
from mcp_operator.controller.conditions import WantedCondition
from mcp_operator.controller.mcpserver import images, render
from mcp_operator.controller.mcpserver import network as server_network
from mcp_operator.controller.settings import NetworkPolicySettings
from mcp_operator.kube import (
    DEPLOYMENTS,
    NETWORKPOLICIES,
    PODS,
    SERVICES,
    Kube,
    KubeError,
    NameConflict,
)
from mcp_operator.oci.client import RegistryClient


async def secrets_version(kube: Kube, server: MCPServer) -> str:
    """A checksum of the identities of the Secrets the Pod reads ("" when it reads none).

    Raises:
        SecretReferenceError: a Secret the Pod would read is missing or not opted in for
            MCP servers (the Pod runs an image of the MCPServer author's choosing).
    """
    names = render.secret_references(server)
    if not names:
        return ""
    namespace = server.metadata.namespace or ""
    versions: dict[str, str] = {}
    for name in names:
        secret = await opt_in.require_secret(kube, namespace, name, reader="the Pod")
        meta = secret.get("metadata", {})
        versions[name] = f"{meta.get('uid', 'missing')}/{meta.get('resourceVersion', '')}"
    return render.secrets_checksum(versions)


async def check_service_account(kube: Kube, server: MCPServer) -> None:
    """A ServiceAccount named by ``spec.deployment.serviceAccountName`` must exist and be opted
    in (``mcp-operator.dev/for-mcp-servers=true``): otherwise the right to create an MCPServer
    would be the right to run Pods as any identity of the namespace. Unnamed, the Pods run
    as ``default`` with no token mounted.

    Raises:
        SecretReferenceError: ``ServiceAccountNotFound`` or ``ServiceAccountNotOptedIn``.
    """
    spec = server.spec.deployment
    name = spec.service_account_name if spec is not None else None
    if name is None:
        return
    await opt_in.require_service_account(
        kube, server.metadata.namespace or "", name, runs="managed servers"
    )


async def deploy(
    kube: Kube,
    server: MCPServer,
    settings: render.RenderSettings,
    registry: RegistryClient | None = None,
    *,
    network: NetworkPolicySettings | None = None,
) -> Mapping[str, Any]:
    """Apply the NetworkPolicy (``network``: how), the Service and the Deployment, in that
    order; return the Deployment as the API server has it.

    Nothing is applied when the image's configuration is needed and cannot be read (the
    previous Deployment, if any, keeps running): the errors of
    :func:`~mcp_operator.controller.mcpserver.images.image_config` and
    :class:`~mcp_operator.oci.config.ImageConfigError` reach the caller.

    Raises:
        SecretReferenceError: a Secret or the ServiceAccount is not usable (nothing applied).
        NameConflict: the NetworkPolicy's, Service's or Deployment's name is taken by an
            object this server does not control (that object is left untouched).
        PolicyNotApplied: the API server refused the NetworkPolicy (nothing else applied).
    """
    await check_service_account(kube, server)
    image = None
    if render.needs_image_config(server):
        if registry is None:
            raise ValueError("a stdio server without command needs a registry client")
        image = await images.image_config(kube, server, registry)
    version = await secrets_version(kube, server)
    manifest = render.deployment(server, settings, secrets_version=version, image=image)
    if network is not None:
        await apply_network_policy(kube, server, network)
    await kube.apply(SERVICES, render.service(server))
    applied: Mapping[str, Any] = await kube.apply(DEPLOYMENTS, manifest)
    return applied


async def apply_network_policy(
    kube: Kube, server: MCPServer, settings: NetworkPolicySettings
) -> None:
    """Apply (or, when disabled, remove) a managed server's NetworkPolicy; its condition is
    :func:`~mcp_operator.controller.mcpserver.network.condition`.

    Raises:
        NameConflict: a NetworkPolicy of the server's name that the server does not control.
        PolicyNotApplied: the API server refused the write.
    """
    name = server_network.policy_name(server)
    try:
        if not settings.enabled:
            await network_policies.remove_owned(
                kube, server.metadata.namespace, name, server.metadata.uid
            )
            return
        await kube.apply(NETWORKPOLICIES, server_network.network_policy(server, settings))
    except NameConflict:
        raise
    except KubeError as error:
        raise network_policies.PolicyNotApplied(error.status, str(error), error.fields) from error


async def deployed_condition(
    kube: Kube, server: MCPServer, deployment: Mapping[str, Any]
) -> WantedCondition:
    """The ``Deployed`` condition, from the Deployment's status and its Pods' phases."""
    spec = deployment.get("spec", {})
    status = deployment.get("status", {}) or {}
    wanted = int(spec.get("replicas", 1))
    generation = deployment.get("metadata", {}).get("generation")
    if status.get("observedGeneration") != generation:
        return WantedCondition(
            "Deployed",
            "False",
            "RolloutPending",
            f"Waiting for the Deployment controller to observe generation {generation}",
        )
    available = int(status.get("availableReplicas") or 0)
    updated = int(status.get("updatedReplicas") or 0)
    if wanted == 0:
        return WantedCondition("Deployed", "True", "ScaledToZero", "The Deployment has 0 replicas")
    if available >= wanted and updated >= wanted:
        return WantedCondition(
            "Deployed", "True", "Available", f"{available} of {wanted} replicas available"
        )
    message = f"{available} of {wanted} replicas available, {updated} updated"
    pods = await kube.list(
        PODS,
        server.metadata.namespace,
        label_selector=",".join(f"{k}={v}" for k, v in render.selector(server).items()),
    )
    phases: dict[str, int] = {}
    for pod in pods:
        phase = pod.get("status", {}).get("phase", "Unknown")
        phases[phase] = phases.get(phase, 0) + 1
    if phases:
        message += "; Pods: " + ", ".join(f"{n} {phase}" for phase, n in sorted(phases.items()))
        if set(phases) == {"Pending"}:
            message += " (no node has started them yet)"
    else:
        message += "; no Pods yet"
    reason = "RolloutInProgress" if updated < wanted else "ReplicasUnavailable"
    return WantedCondition("Deployed", "False", reason, message)


class OutsideProxy(ValueError):
    """A service-proxy URL whose path would leave the Service's proxy prefix."""


def service_proxy_url(api_server: str, namespace: str, name: str, port: int, path: str) -> str:
    """The API server's service-proxy URL of a Service's endpoint ``path``.

    The URL carries the operator's own credentials, so its path must stay under
    ``/api/v1/namespaces/NS/services/NAME:PORT/proxy/`` once a client has collapsed
    its dot segments (as HTTP clients do) and once the API server has decoded it:
    anything else raises :class:`OutsideProxy`. The model already refuses such
    paths (``spec.deployment.path``); this holds even if it did not.
    """
    prefix = f"/api/v1/namespaces/{namespace}/services/{name}:{port}/proxy"
    base = httpx.URL(api_server)
    url = base.join(base.raw_path.decode("ascii").rstrip("/") + prefix + path)
    final = unquote(unquote(url.path))
    base_path = base.path.rstrip("/")
    if (
        not final.startswith(base_path + prefix + "/")
        or "\\" in final
        or any(part in (".", "..") for part in final.split("/"))
    ):
        raise OutsideProxy(f"the path {path!r} leaves the service proxy of {namespace}/{name}")
    return str(url)


def service_host(server: MCPServer, settings: render.RenderSettings) -> str:
    """The ``host:port`` of the Service's in-cluster URL (``status.url``)."""
    return str(httpx.URL(render.service_url(server, settings)).netloc.decode("ascii"))


def probe_endpoint(
    kube: Kube, server: MCPServer, settings: render.RenderSettings
) -> tuple[str, dict[str, str], ssl.SSLContext | bool]:
    """URL, extra headers and TLS verification to probe the managed server's Service."""
    if kube.in_cluster:
        return render.service_url(server, settings), {}, True
    spec = server.spec.deployment
    assert spec is not None
    url = service_proxy_url(
        kube.server, server.metadata.namespace or "", server.metadata.name, spec.port, spec.path
    )
    headers, verify = kube.proxy_credentials()
    # The service proxy passes the client's Host on to the Pod: without this, the adapter
    # would see the API server's address and refuse it (421). The Service's in-cluster name
    # is what an in-cluster client sends, and what the adapter allows.
    return url, {**headers, "Host": service_host(server, settings)}, verify
