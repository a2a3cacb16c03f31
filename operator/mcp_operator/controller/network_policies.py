"""What applying the NetworkPolicies of both kinds shares, and which posture applies.

Rendering is pure (:mod:`mcp_operator.controller.mcpserver.network`,
:mod:`mcp_operator.controller.agentrun.network`); each kind applies its own policy
(:func:`mcp_operator.controller.mcpserver.managed.apply_network_policy`,
:func:`mcp_operator.controller.agentrun.egress.apply_egress_policy`) with
:meth:`~mcp_operator.kube.Kube.apply`, so that a NetworkPolicy of the name that the owner did
not create is never written (:class:`~mcp_operator.kube.NameConflict`: the caller starts
nothing, fail closed) and an owned one that someone edited is put back. This module holds
what both need:

- :func:`remove_owned`: the owner's own policy (and only it) removed when there should be
  none (``--network-policies=disabled``, or a run's egress is ``open``);
- :func:`drifted`, :func:`owners`: which owner an event of one of our policies wakes;
- :func:`where_probes_come_from`: read at start-up, the origin of the operator's probes (its
  namespace in a Pod; outside the cluster, the API server's advertised addresses, whose
  service proxy reaches the Pods);
- :class:`PolicyNotApplied`: the API server refused the write.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import os
from collections.abc import Mapping
from typing import Any

from mcp_operator import FIELD_MANAGER
from mcp_operator.controller.settings import NetworkPolicySettings
from mcp_operator.kube import (
    NETWORKPOLICIES,
    SERVICE_ACCOUNT_DIR,
    Kube,
    KubeError,
)

logger = logging.getLogger(__name__)


class PolicyNotApplied(KubeError):
    """The API server refused to write a NetworkPolicy (not a name conflict: RBAC, say)."""


async def remove_owned(kube: Kube, namespace: str | None, name: str, uid: str | None) -> None:
    """Delete the owner's own NetworkPolicy of that name (and never another's)."""
    if uid and await kube.delete_owned(NETWORKPOLICIES, namespace, name, uid):
        logger.info("Deleted NetworkPolicy %s/%s: no longer wanted", namespace, name)


async def api_server_addresses(kube: Kube) -> tuple[str, ...]:
    """The API server's advertised addresses (``serverAddressByClientCIDRs`` of ``GET /api``,
    which every authenticated client may read: the address the ``default/kubernetes``
    endpoints hold), from which its service proxy dials the Pods; empty when unknown."""
    try:
        answer = await kube.request("GET", "/api")
    except KubeError as error:
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
