"""One reconcile of one AgentRun: read the servers → resolve → apply ConfigMap and Pod → status.

This module decides and applies; the per-object worker schedules it. It is
level-based: every pass reads the referenced MCPServers and the Pod afresh, so a
missed event costs a delay, never a wrong state.

- The ConfigMap is applied on every pass while the run may start, so that a
  referenced server's new url, tools or filters reach the bridge (which re-reads
  the mounted file) without a restart.
- The Pod is created once: a Pod's spec cannot change after creation, so a spec
  change of the AgentRun after its Pod exists affects the ConfigMap only. A Pod
  deleted behind the run's back is not created again (the agent may have acted
  already): the run fails with ``PodLost``.
- Nothing is created while a required server is missing or not Ready or while
  tool names collide: the run waits (and is retried), with the reason in status.
- Nothing is created either while the run is refused (:func:`refusal`): a Secret of the
  agent's environment or its ServiceAccount not opted in, a bridge image the operator does
  not allow, or a child's name taken by an object the run does not control (NameConflict;
  that object is never written, :mod:`mcp_operator.kube.ownership`).
- ``ttlSecondsAfterFinished`` deletes the AgentRun (its children follow by garbage
  collection) that long after the run finished.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pydantic

from mcp_operator.api import AgentRun, MCPServer
from mcp_operator.controller import network, opt_in
from mcp_operator.controller.agentrun import configmap, egress, mounts, render, resolve
from mcp_operator.controller.agentrun.status import BridgeState, Observed, status_patch
from mcp_operator.controller.conditions import WantedCondition, timestamp
from mcp_operator.controller.settings import AgentRenderSettings, NetworkPolicySettings
from mcp_operator.kube import (
    CONFIGMAPS,
    MCPSERVERS,
    PODS,
    SECRETS,
    Kube,
    KubeError,
    NameConflict,
    SecretReferenceError,
    opted_in,
    ownership,
)

logger = logging.getLogger(__name__)

WAIT_FOR_SERVERS_SECONDS = 15.0
"""Retry delay while the run waits for servers (their own events usually wake it sooner)."""
BRIDGE_IMAGE_NOT_ALLOWED = "BridgeImageNotAllowed"
"""The reason of a run whose ``spec.bridge.image`` is not among the allowed bridge images."""
RESYNC_SECONDS = 300.0
"""Regular re-reconcile of a run whose Pod exists, in case a Pod event was missed."""


@dataclass(frozen=True)
class Pass:
    """What one reconcile found and wants written."""

    patch: dict[str, Any]
    """The merge patch of ``status``."""
    delay: float | None
    """Seconds until the next pass; ``None``: only an event wakes it."""
    delete: bool = False
    """The run finished more than ``ttlSecondsAfterFinished`` ago: delete it."""


def bridge_state(run: AgentRun, settings: AgentRenderSettings) -> BridgeState:
    if not settings.bridge_enabled:
        return "disabled-operator-wide"
    if not run.spec.bridge.enabled:
        return "disabled-by-run"
    return "enabled"


async def read_servers(kube: Kube, run: AgentRun) -> dict[resolve.ServerKey, MCPServer | None]:
    """The referenced MCPServers as the API server has them (``None``: missing or unparsable)."""
    servers: dict[resolve.ServerKey, MCPServer | None] = {}
    for namespace, name in resolve.keys(run):
        body = await kube.get(MCPSERVERS, namespace, name)
        server = None
        if body is not None:
            try:
                server = MCPServer.model_validate(body)
            except pydantic.ValidationError:
                logger.warning(
                    "MCPServer %s/%s could not be parsed; treated as missing", namespace, name
                )
        servers[(namespace, name)] = server
    return servers


async def opted_in_secrets(
    kube: Kube, servers: dict[resolve.ServerKey, MCPServer | None]
) -> set[resolve.ServerKey]:
    """The servers' header Secrets that carry the opt-in label (metadata read, values unused)."""
    found: set[resolve.ServerKey] = set()
    for namespace, name in sorted(resolve.header_secrets(servers)):
        if opted_in(await kube.get(SECRETS, namespace, name)):
            found.add((namespace, name))
    return found


async def refusal(
    kube: Kube, run: AgentRun, settings: AgentRenderSettings
) -> tuple[str, str] | None:
    """Why the run must not start as written (reason, message), or ``None``.

    The agent runs an image of the run author's choosing, so what it would read or act as
    must be opted in like an MCPServer's (:mod:`mcp_operator.controller.opt_in`): every
    Secret of ``spec.agent.env`` and the named ``spec.agent.serviceAccountName``. The bridge
    holds the servers' header Secrets, so its image is the platform's choice
    (:func:`~mcp_operator.controller.agentrun.render.bridge_image_allowed`). Messages name
    objects and images, never a value.
    """
    namespace = run.metadata.namespace or ""
    if render.bridge_enabled(run, settings) and not render.bridge_image_allowed(run, settings):
        return (
            BRIDGE_IMAGE_NOT_ALLOWED,
            f"spec.bridge.image {run.spec.bridge.image} is not among the bridge images the "
            "operator allows (--bridge-images); leave it unset for the operator's own bridge",
        )
    try:
        for name in render.agent_secrets(run):
            await opt_in.require_secret(kube, namespace, name, reader="the agent")
        webhook = mounts.approval_webhook(run)
        if webhook is not None:
            await opt_in.require_secret(
                kube, namespace, webhook.secret_ref.name, reader="the approval webhook"
            )
        account = run.spec.agent.service_account_name
        if account is not None:
            await opt_in.require_service_account(kube, namespace, account, runs="agents")
    except SecretReferenceError as error:
        return (error.reason, str(error))
    return None


def _conflict(run: AgentRun, kind: str, name: str, found: ownership.Foreign) -> str:
    owner = f"AgentRun/{run.metadata.name}"
    return ownership.conflict_message(kind, run.metadata.namespace, name, owner, found)


async def reconcile(
    kube: Kube,
    run: AgentRun,
    previous: dict[str, Any] | None,
    settings: AgentRenderSettings,
    *,
    now: datetime.datetime,
    network_settings: NetworkPolicySettings | None = None,
    refused_endpoints: frozenset[tuple[str, int | None]] = frozenset(),
    metrics_access: Mapping[str, Any] | None = None,
) -> Pass:
    """Reconcile ``run`` once; ``previous`` is its status as last written.

    The Pod's egress NetworkPolicy is applied before the Pod is created (and again on every
    pass, with the external servers' addresses resolved afresh): a policy that cannot be
    applied keeps the Pod from being created."""
    namespace = run.metadata.namespace or ""
    bridge = bridge_state(run, settings)
    servers = await read_servers(kube, run) if bridge == "enabled" else {}
    resolution = resolve.resolve(run, servers, await opted_in_secrets(kube, servers))
    may_start = bridge != "enabled" or resolution.ready
    pod = await kube.get(PODS, namespace, render.pod_name(run))
    refused: tuple[str, str] | None = None
    found = ownership.decide(pod, run.metadata.uid or "")
    if isinstance(found, ownership.Foreign):
        # A Pod of the run's name that is not the run's: never read as the run's own.
        refused = (NameConflict.reason, _conflict(run, "Pod", render.pod_name(run), found))
        pod = None
    # A run starts its agent once: a Pod that existed and is gone is not started again
    # (the agent may have acted already); the run fails with PodLost.
    pod_lost = refused is None and pod is None and bool((previous or {}).get("podName"))
    if pod is None and not pod_lost and refused is None:
        refused = await refusal(kube, run, settings)
    may_start = may_start and not pod_lost and refused is None
    apply_error: str | None = None
    policy: WantedCondition | None = None
    try:
        if may_start or (pod is not None and refused is None):
            policy = await egress.apply_egress_policy(
                kube,
                run,
                resolution,
                network_settings or NetworkPolicySettings(),
                refused_endpoints,
            )
        if bridge == "enabled" and may_start:
            config = configmap.bridge_config(run, resolution)
            await kube.apply(
                CONFIGMAPS, configmap.config_map(run, config, metrics_access=metrics_access)
            )
        if pod is None and may_start:
            pod = await kube.apply(
                PODS,
                render.pod(run, resolution, settings, metrics=metrics_access is not None),
            )
            logger.info(
                "Created Pod %s/%s for AgentRun %s",
                namespace,
                render.pod_name(run),
                run.metadata.name,
            )
    except NameConflict as error:
        # The NetworkPolicy's, ConfigMap's or Pod's name is taken: that object is left as it
        # is, no Pod runs.
        refused = (error.reason, str(error)[:1024])
        if policy is None:
            policy = network.failed(error.reason, refused[1])
    except KubeError as error:
        what = "ConfigMap or Pod" if policy is not None else "NetworkPolicy"
        apply_error = f"Applying the {what} failed: {error.summary}"[:1024]
        if policy is None:
            policy = network.failed("ApplyFailed", apply_error)
    if refused is not None:
        logger.warning("AgentRun %s/%s: %s", namespace, run.metadata.name, refused[1])
    if apply_error is not None:
        logger.warning("AgentRun %s/%s: %s", namespace, run.metadata.name, apply_error)
    observed = Observed(
        resolution=resolution,
        bridge=bridge,
        pod=pod,
        pod_name=render.pod_name(run),
        config_map_name=render.config_map_name(run) if bridge == "enabled" else None,
        bridge_url=render.bridge_url(run),
        apply_error=apply_error,
        refused=refused,
        pod_lost=pod_lost,
        network=policy,
    )
    stamp = timestamp(now)
    patch = status_patch(previous, observed, generation=run.metadata.generation, now=stamp)
    return Pass(patch, *_next(run, observed, patch, now))


def _next(
    run: AgentRun, observed: Observed, patch: dict[str, Any], now: datetime.datetime
) -> tuple[float | None, bool]:
    if observed.pod_lost:
        return None, False
    if (
        observed.apply_error is not None
        or observed.refused is not None
        or (observed.pod is None and observed.blocked)
    ):
        return WAIT_FOR_SERVERS_SECONDS, False
    completion = patch.get("completionTime")
    if completion is None:
        return RESYNC_SECONDS, False
    ttl = run.spec.ttl_seconds_after_finished
    if ttl is None:
        return None, False
    finished = datetime.datetime.fromisoformat(str(completion).replace("Z", "+00:00"))
    left = ttl - (now - finished).total_seconds()
    return (max(left, 0.0), left <= 0)
