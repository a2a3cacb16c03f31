"""The kopf handlers: thin on purpose (and async: kopf runs sync handlers in threads).

Start-up configures kopf and creates the shared clients; every MCPServer watch
event goes to :class:`mcp_operator.controller.mcpserver.fleet.Fleet`, which parses it and
schedules the reconciles; Deployment and Secret events go there too, and the fleet's
wake policy decides whom they wake. Every AgentRun event goes to
:class:`mcp_operator.controller.agentrun.runs.Runs`; an MCPServer event also wakes the
runs that reference the server, and an agent Pod's event wakes its run. Clean-up stops
the workers and closes the clients.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from typing import Any

import kopf

from mcp_operator import GROUP, OPT_IN_LABEL, OPT_IN_VALUE, VERSION
from mcp_operator.controller import network_policies
from mcp_operator.controller.admission import admission_layer, bridge_key_policy
from mcp_operator.controller.agentrun.runs import Runs
from mcp_operator.controller.login import Logins
from mcp_operator.controller.mcpserver.containers import pinned_image
from mcp_operator.controller.mcpserver.data_path import DataPath
from mcp_operator.controller.mcpserver.fleet import Fleet
from mcp_operator.controller.mcpserver.wake import owning_servers, rollout_state
from mcp_operator.controller.metrics import OperatorMetrics
from mcp_operator.controller.render import AGENT_RUN_LABEL, MANAGED_BY
from mcp_operator.controller.settings import (
    AgentRunSettings,
    FleetSettings,
    NetworkPolicySettings,
)
from mcp_operator.controller.shards import owns
from mcp_operator.kube import PODS, Kube, KubeClient, KubeError
from mcp_operator.kube.credentials import load_credentials
from mcp_operator.kube.identity import OwnTokens, own_identity

logger = logging.getLogger(__name__)


@kopf.on.login()
async def authenticate(memo: kopf.Memo, **_: Any) -> kopf.ConnectionInfo:
    """kopf's watches are the same identity as the operator's own API client, resolved by the
    same client (``kube.credentials``: the ``kubernetes`` package's loaders, read as kopf's own
    ``login_via_client`` reads them) and renewed the same way. kopf calls it again when its
    credential is refused, has expired or lost its session: then the client is asked again,
    after the pause :class:`~mcp_operator.controller.login.Logins` decides."""
    logins: Logins = memo.setdefault("logins", Logins())
    if pause := logins.pause():
        logger.warning("kopf asks for credentials again within a minute: in %.0f s", pause)
        await asyncio.sleep(pause)
    credentials = getattr(memo, "login_credentials", None)
    if credentials is None:
        # The operator's own client, loaded at start-up (kopf logs in after it), is the one
        # identity: kopf's watches and the operator's requests renew the same credential.
        kube = getattr(memo, "kube", None)
        if kube is not None:
            memo.login_credentials = kube.credentials
        else:  # off the event loop: the first load may run an exec plugin
            memo.login_credentials = await asyncio.to_thread(load_credentials, None)
        current = memo.login_credentials.cached()
    else:
        current = await credentials.renew()
    return logins.connection_info(current)


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # Finalizer and progress storage under our own domain, never kopf's defaults, so
    # that two kopf-based operators on one cluster cannot step on each other's marks.
    settings.persistence.finalizer = f"{GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    # Ask the API server to end each watch after 5 minutes and give up on our side a bit
    # later: a watch that silently stalls behind a load balancer is then re-established.
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 10
    # Only Secrets opted in for MCP servers matter (the others are never used): the API
    # server filters them, and initial lists come in pages rather than one response.
    settings.watching.label_selectors["", "v1", "secrets"] = f"{OPT_IN_LABEL}={OPT_IN_VALUE}"
    settings.watching.chunk_size = 500
    # Requests other than watches must not hang forever on a sick API server.
    settings.networking.request_timeout = 30
    # A stop kopf cannot finish (its exit waits for watches that a failed orchestrator left
    # behind) must not leave a process that answers /healthz and reconciles nothing: 30 s
    # after kopf began to stop, it kills the process and the Pod starts again (Kubernetes
    # gives a SIGTERM the same 30 s by default).
    settings.process.ultimate_exiting_timeout = 30
    # kopf turns log lines into Events; we post our own Events on transitions, so only
    # warnings and errors of the framework itself become Events.
    settings.posting.level = logging.WARNING
    settings.scanning.disabled = not getattr(memo, "scanning", True)
    fleet_settings = getattr(memo, "fleet_settings", None) or FleetSettings()
    run_settings = getattr(memo, "agentrun_settings", None) or AgentRunSettings()
    metrics = getattr(memo, "metrics", None) or OperatorMetrics()
    memo.kube = await KubeClient.open(on_error=metrics.api_error)
    if getattr(memo, "adapter_image_from_pod", False):
        image = await own_image(memo.kube)
        if image is not None:
            render = dataclasses.replace(fleet_settings.render, adapter_image=image)
            fleet_settings = dataclasses.replace(fleet_settings, render=render)
            bridge = dataclasses.replace(run_settings.render, bridge_image=image)
            run_settings = dataclasses.replace(run_settings, render=bridge)
    refused = await memo.kube.api_server_endpoints()
    egress = dataclasses.replace(
        fleet_settings.egress, refused_endpoints=fleet_settings.egress.refused_endpoints | refused
    )
    fleet_settings = dataclasses.replace(fleet_settings, egress=egress)
    network = await network_policies.where_probes_come_from(memo.kube, fleet_settings.network)
    fleet_settings = dataclasses.replace(fleet_settings, network=network)
    run_settings = dataclasses.replace(
        run_settings,
        network=dataclasses.replace(run_settings.network, **_origin(network)),
        refused_endpoints=run_settings.refused_endpoints | egress.refused_endpoints,
    )
    logger.info(
        "Refusing probes to the API server at %s; private destinations %s, "
        "loopback destinations %s",
        ", ".join(f"{a} port {p}" for a, p in sorted(egress.refused_endpoints, key=str))
        or "(not found)",
        egress.private_destinations,
        egress.loopback_destinations,
    )
    # Which admission layer guards tenants' objects, for status.admission.
    layer = await admission_layer(memo.kube, getattr(memo, "tenant_admission_policy", None))
    keys = await bridge_key_policy(memo.kube, getattr(memo, "bridge_key_policy", None))
    fleet_settings = dataclasses.replace(fleet_settings, admission=layer, bridge_key_policy=keys)
    run_settings = dataclasses.replace(run_settings, admission=layer)
    identity = own_identity(getattr(memo, "identity", None))
    if identity is None:
        logger.warning(
            "Found no ServiceAccount of the operator's own (run with --identity "
            "NAMESPACE/NAME): probes of managed servers that authenticate will be refused"
        )
    else:
        logger.info("Probing managed servers as ServiceAccount %s", identity)
    tokens = OwnTokens(memo.kube, identity) if identity is not None else None
    data_path = DataPath(memo.kube, tokens=tokens, metrics_scrapers=fleet_settings.metrics_scrapers)
    memo.fleet = Fleet(memo.kube, fleet_settings, metrics=metrics, data_path=data_path)
    memo.runs = Runs(memo.kube, run_settings, metrics=metrics, issuer=data_path.issuer)


def _origin(network: NetworkPolicySettings) -> dict[str, Any]:
    return {
        "operator_namespace": network.operator_namespace,
        "api_server_addresses": network.api_server_addresses,
    }


async def own_image(kube: Kube) -> str | None:
    """The image this operator runs from, read from its own Pod (``None`` outside a Pod),
    pinned to the digest the node pulled (the container's ``imageID``) when the Pod names a
    tag: the bridge and the adapters then run exactly the operator's bytes, whatever the tag
    points to later."""
    name, namespace = os.environ.get("POD_NAME"), os.environ.get("POD_NAMESPACE")
    if not name or not namespace:
        return None
    try:
        pod = await kube.get(PODS, namespace, name)
    except KubeError as error:
        logger.warning("Could not read the operator's own Pod %s/%s: %s", namespace, name, error)
        return None
    containers = (pod or {}).get("spec", {}).get("containers") or []
    image = next((c.get("image") for c in containers if c.get("name") == "operator"), None)
    if not image:
        return None
    statuses = (pod or {}).get("status", {}).get("containerStatuses") or []
    pulled = next((s.get("imageID") for s in statuses if s.get("name") == "operator"), None)
    digest = str(pulled or "").rpartition("@")[2]
    if digest.startswith("sha256:") and len(digest) == len("sha256:") + 64:
        image = pinned_image(image, digest)
    logger.info("Using the operator's own image %s for stdio adapters and the bridge", image)
    return str(image)


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    for controller in (getattr(memo, "fleet", None), getattr(memo, "runs", None)):
        if controller is not None:
            await controller.stop()
    kube = getattr(memo, "kube", None)
    if kube is not None:
        await kube.close()
    # Nothing of ours writes any more (kopf's watchers and handlers stopped before the
    # clean-up): leader election may release the Lease now.
    quiesced = getattr(memo, "quiesced", None)
    if quiesced is not None:
        quiesced.set()


def _event_type(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo) -> str | None:
    """The event's type, or ``DELETED`` for an object outside this operator's shard."""
    selector = getattr(memo, "shard_selector", ())
    if selector and not owns(selector, body.get("metadata", {}).get("labels")):
        return "DELETED"
    return event.get("type")


@kopf.on.event(GROUP, VERSION, "mcpservers")
async def mcpserver_event(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    memo.fleet.observe(_event_type(event, body, memo), dict(body))
    metadata = body.get("metadata", {})
    memo.runs.server_changed(metadata.get("namespace"), metadata.get("name"))


@kopf.on.event(GROUP, VERSION, "agentruns")
async def agentrun_event(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    memo.runs.observe(_event_type(event, body, memo), dict(body))


@kopf.on.event(
    "",
    "v1",
    "pods",
    labels={"app.kubernetes.io/managed-by": MANAGED_BY, AGENT_RUN_LABEL: kopf.PRESENT},
)
async def agent_pod_event(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    memo.runs.pod_changed(dict(body))
    if event.get("type") == "DELETED":
        # Its tokens stay valid until they expire: the servers they were for refuse them now.
        memo.fleet.pod_deleted(dict(body))


@kopf.on.event("apps", "v1", "deployments", labels={"app.kubernetes.io/managed-by": MANAGED_BY})
async def deployment_event(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    for uid in owning_servers(body):
        memo.fleet.deployment_changed(uid, rollout_state(body))


@kopf.on.event(
    "networking.k8s.io",
    "v1",
    "networkpolicies",
    labels={"app.kubernetes.io/managed-by": MANAGED_BY},
)
async def network_policy_event(
    event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any
) -> None:
    """One of our NetworkPolicies was deleted or written by someone else: its owner
    reconciles now and puts it back (the operator's own writes wake nobody)."""
    owners = (
        network_policies.owners(body)
        if event.get("type") == "DELETED"
        else network_policies.drifted(body)
    )
    for kind, uid in owners:
        if kind == "MCPServer":
            memo.fleet.wake(uid)
        elif kind == "AgentRun":
            memo.runs.wake(uid)


@kopf.on.event("", "v1", "secrets")
async def secret_event(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    if event.get("type") in ("MODIFIED", "DELETED", "ADDED"):
        metadata = body.get("metadata", {})
        memo.fleet.secret_changed(metadata.get("namespace"), metadata.get("name"))
