"""Apply the NetworkPolicies of managed servers and AgentRuns, and say which posture applies.

Rendering is pure (:mod:`mcp_operator.controller.mcpserver.network`,
:mod:`mcp_operator.controller.agentrun.network`); this module does the I/O around it:

- applies the policy with :meth:`~mcp_operator.kube.Kube.apply`, so that a NetworkPolicy of
  the name that the owner did not create is never written (it raises
  :class:`~mcp_operator.kube.NameConflict`, and the caller starts nothing: fail closed) and
  an owned one that someone edited is put back (drift; the owned policies' watch,
  :func:`drifted`, wakes the owner);
- removes the owner's own policy (and only it) when there should be none: the operator
  renders none (``--network-policies=disabled``), or a run's egress is ``open``;
- resolves, on every reconcile, the names of a run's external servers to the addresses the
  egress policy allows (:mod:`mcp_operator.net.egress`: never link-local, metadata or the
  API server's);
- reads at start-up the API server's advertised addresses (what the ``default/kubernetes``
  endpoints hold) for an operator outside the cluster, whose probes reach the Pods through
  the API server.

Each function returns the ``NetworkPolicy`` condition of its object.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import logging
import os
import socket
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from mcp_operator import FIELD_MANAGER
from mcp_operator.api import AgentRun, MCPServer
from mcp_operator.controller import network
from mcp_operator.controller.agentrun import network as run_network
from mcp_operator.controller.agentrun.resolve import Resolution
from mcp_operator.controller.conditions import WantedCondition
from mcp_operator.controller.mcpserver import network as server_network
from mcp_operator.controller.settings import NetworkPolicySettings
from mcp_operator.kube import (
    NETWORKPOLICIES,
    SERVICE_ACCOUNT_DIR,
    Kube,
    KubeError,
    NameConflict,
)
from mcp_operator.net.egress import EgressPolicy

logger = logging.getLogger(__name__)

RESOLVE_TIMEOUT_SECONDS = 5.0
"""How long one external server's name may take to resolve; past it, it gets no rule."""


class PolicyNotApplied(KubeError):
    """The API server refused to write a NetworkPolicy (not a name conflict: RBAC, say)."""


async def for_server(kube: Kube, server: MCPServer, settings: NetworkPolicySettings) -> None:
    """Apply (or, when disabled, remove) a managed server's NetworkPolicy; its condition is
    :func:`~mcp_operator.controller.mcpserver.network.condition`.

    Raises:
        NameConflict: a NetworkPolicy of the server's name that the server does not control.
        PolicyNotApplied: the API server refused the write.
    """
    name = server_network.policy_name(server)
    try:
        if not settings.enabled:
            await _remove(kube, server.metadata.namespace, name, server.metadata.uid)
            return
        await kube.apply(NETWORKPOLICIES, server_network.network_policy(server, settings))
    except NameConflict:
        raise
    except KubeError as error:
        raise PolicyNotApplied(error.status, str(error), error.fields) from error


async def for_run(
    kube: Kube,
    run: AgentRun,
    resolution: Resolution,
    settings: NetworkPolicySettings,
    refused_endpoints: frozenset[tuple[str, int | None]] = frozenset(),
) -> WantedCondition:
    """Apply the run's egress NetworkPolicy (restricted), or remove it (open, disabled).

    Raises:
        NameConflict: a NetworkPolicy of the run's Pod's name that the run does not control.
        KubeError: the API server refused the write.
    """
    name = run_network.policy_name(run)
    if not settings.enabled:
        await _remove(kube, run.metadata.namespace, name, run.metadata.uid)
        return network.disabled()
    if run_network.egress(run, settings) == "open":
        await _remove(kube, run.metadata.namespace, name, run.metadata.uid)
        return WantedCondition(
            network.CONDITION,
            "False",
            "EgressOpen",
            "The run's egress is open (spec.network.egress, or the operator's default "
            "--agent-egress): no NetworkPolicy",
        )
    policy = EgressPolicy(allow_private=True).with_refused(refused_endpoints)
    addresses, refused = await resolve(run_network.external_endpoints(resolution), policy)
    manifest = run_network.network_policy(run, resolution, addresses, settings)
    await kube.apply(NETWORKPOLICIES, manifest)
    return network.restricted(name, run_network.describe(manifest, refused))


async def resolve(
    endpoints: Sequence[run_network.Endpoint], policy: EgressPolicy
) -> tuple[dict[run_network.Endpoint, list[str]], list[str]]:
    """The addresses each ``(host, port)`` resolves to now that ``policy`` allows, and the
    refused ones (``host address``, for the condition). A name that does not resolve gets no
    addresses (and so no rule): the bridge cannot reach it either."""
    loop = asyncio.get_running_loop()
    allowed: dict[run_network.Endpoint, list[str]] = {}
    refused: list[str] = []
    for host, port in endpoints:
        if policy.host_refusal(host, port) is not None:
            refused.append(host)
            continue
        try:
            found = await asyncio.wait_for(
                loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), RESOLVE_TIMEOUT_SECONDS
            )
        except (OSError, TimeoutError) as error:
            logger.info("Could not resolve %s for a run's egress policy: %s", host, error)
            continue
        for address in sorted({str(info[4][0]).split("%", 1)[0] for info in found}):
            if policy.refusal(address, port) is None:
                allowed.setdefault((host, port), []).append(address)
            else:
                refused.append(f"{host} {address}")
    return allowed, refused


async def _remove(kube: Kube, namespace: str | None, name: str, uid: str | None) -> None:
    if uid and await kube.delete_owned(NETWORKPOLICIES, namespace, name, uid):
        logger.info("Deleted NetworkPolicy %s/%s: no longer wanted", namespace, name)


async def api_server_addresses(kube: Kube) -> tuple[str, ...]:
    """The API server's advertised addresses (``serverAddressByClientCIDRs`` of ``GET /api``,
    which every authenticated client may read: the address the ``default/kubernetes``
    endpoints hold), from which its service proxy dials the Pods; empty when unknown."""
    try:
        answer = await kube.request("GET", "/api")
    except (KubeError, httpx.HTTPError) as error:
        logger.warning("Could not read the API server's advertised address: %s", error)
        return ()
    found = set()
    for entry in (answer or {}).get("serverAddressByClientCIDRs") or ():
        host = str(entry.get("serverAddress") or "")
        host = host.rsplit(":", 1)[0] if host.count(":") == 1 or "]" in host else host
        try:
            found.add(str(ipaddress.ip_address(host.strip("[]"))))
        except ValueError:
            continue
    return tuple(sorted(found))


def drifted(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(kind, uid)`` of the owner to wake when an event of one of our NetworkPolicies may
    mean it drifted: deleted, or written by another field manager than the operator. The
    operator's own writes wake nobody (a fleet of 10,000 servers is not re-probed because
    its policies were applied)."""
    metadata = body.get("metadata") or {}
    managers = {str(entry.get("manager")) for entry in metadata.get("managedFields") or ()}
    if managers <= {FIELD_MANAGER} and not metadata.get("deletionTimestamp"):
        return []
    return _owners(metadata)


def owners(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(kind, uid)`` of the policy's controller (at most one)."""
    return _owners(body.get("metadata") or {})


def _owners(metadata: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [
        (str(ref.get("kind")), str(ref.get("uid")))
        for ref in metadata.get("ownerReferences") or ()
        if ref.get("controller") is True and ref.get("uid")
    ]


async def where_probes_come_from(
    kube: Kube, settings: NetworkPolicySettings
) -> NetworkPolicySettings:
    """The settings with the origin of the operator's probes filled in, once at start-up: in
    a Pod, its namespace (``POD_NAMESPACE``; its Pods are selected by their labels); outside
    the cluster, the API server's addresses (its service proxy dials the Pods)."""
    if not settings.enabled:
        return settings
    if kube.in_cluster:
        namespace = os.environ.get("POD_NAMESPACE") or _service_account_namespace()
        if namespace is None:
            logger.warning(
                "The operator's namespace is unknown (no POD_NAMESPACE): managed servers' "
                "NetworkPolicies will not let its probes in"
            )
        return dataclasses.replace(settings, operator_namespace=namespace)
    addresses = await api_server_addresses(kube)
    logger.info(
        "Managed servers' NetworkPolicies let the API server's service proxy in from %s",
        ", ".join(addresses) or "(no address found)",
    )
    return dataclasses.replace(settings, api_server_addresses=addresses)


def _service_account_namespace() -> str | None:
    try:
        return (SERVICE_ACCOUNT_DIR / "namespace").read_text().strip() or None
    except OSError:
        return None
