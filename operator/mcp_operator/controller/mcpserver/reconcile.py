"""One reconcile of one MCPServer: deploy (managed) -> resolve headers -> probe.

This module decides; :mod:`mcp_operator.controller.mcpserver.fleet` parses (where the
event arrives), schedules and writes status. Secret values resolved here go straight
into the probe's request headers and nowhere else: not into the outcome, not into logs.
"""

from __future__ import annotations

import logging
import ssl
import time
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from mcp_operator import tracing
from mcp_operator.api import MCPServer
from mcp_operator.controller.conditions import WantedCondition
from mcp_operator.controller.mcpserver import destinations, managed, render, report
from mcp_operator.controller.mcpserver.status import Outcome
from mcp_operator.controller.parsing import InvalidSpec
from mcp_operator.controller.settings import EgressSettings, RenderSettings
from mcp_operator.kube import NAMESPACES, Kube, KubeError, NameConflict, SecretReferenceError
from mcp_operator.mcp import naming
from mcp_operator.mcp.discovery import discover
from mcp_operator.mcp.errors import ProbeError
from mcp_operator.mcp.target import ProbeTarget
from mcp_operator.net.egress import EgressPolicy
from mcp_operator.oci.auth import PullSecretError
from mcp_operator.oci.client import RegistryClient, RegistryError
from mcp_operator.oci.config import ImageConfigError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Result:
    outcome: Outcome
    url: str | None
    interval: float | None
    """Seconds until the next regular reconcile; ``None`` waits for a spec change."""
    watch: ProbeTarget | None = None
    """Where to listen for ``tools/list_changed``: set when the server advertises it."""
    probe_seconds: float | None = None
    """How long the probe took, when one ran (for the metrics)."""


async def resolve_headers(kube: Kube, namespace: str, server: MCPServer) -> dict[str, str]:
    """The request headers of a server, with ``secretKeyRef`` values read from the API."""
    headers = {h.name: h.value for h in server.spec.headers or () if h.value is not None}
    for use in server.referenced_secrets():
        if use.reader == "probe":
            headers[use.name] = await kube.read_secret_key(namespace, use.secret, use.key)
    return headers


def _image_unusable(
    server: MCPServer, error: RegistryError | ImageConfigError | PullSecretError
) -> Outcome:
    """Why the server's image configuration could not be had: its own reason, no Deployment
    change, and the worker's back-off retries (the registry may come back)."""
    reason: str
    if isinstance(error, RegistryError):
        reason, message = error.reason, error.message
    elif isinstance(error, ImageConfigError):
        reason, message = "ImageNotRunnable", str(error)
    else:
        reason, message = "ImagePullSecretInvalid", str(error)
    message = f"Reading the configuration of image {_image(server)} failed: {message}"[:1024]
    logger.warning("MCPServer %s/%s: %s", server.metadata.namespace, server.metadata.name, message)
    deployed = WantedCondition("Deployed", "False", reason, message)
    return Outcome("failed", reason, message, deployed=deployed, ready_reason=reason)


def _image(server: MCPServer) -> str:
    return server.spec.deployment.image if server.spec.deployment is not None else "?"


async def namespace_labels(kube: Kube, namespace: str) -> dict[str, str]:
    """The labels of a Namespace (none when it cannot be read: nothing is opted in)."""
    try:
        body = await kube.get(NAMESPACES, None, namespace)
    except KubeError as error:
        logger.warning("Could not read Namespace %s for its opt-in labels: %s", namespace, error)
        return {}
    return dict(((body or {}).get("metadata") or {}).get("labels") or {})


async def egress_policy(
    kube: Kube, namespace: str, settings: EgressSettings, *, managed: bool
) -> EgressPolicy:
    """Where this server's probe may connect (:mod:`.destinations`)."""
    if managed:
        return destinations.managed_policy(settings, through_api_server=not kube.in_cluster)
    labels = (
        await namespace_labels(kube, namespace) if destinations.needs_namespace(settings) else {}
    )
    return destinations.external_policy(settings, labels)


async def mcpserver(
    kube: Kube,
    server: MCPServer | InvalidSpec,
    *,
    probe_slots: AbstractAsyncContextManager[None],
    render_settings: RenderSettings,
    registry: RegistryClient | None = None,
    egress_settings: EgressSettings | None = None,
) -> Result:
    """Reconcile an MCPServer once and say what its status should say."""
    if isinstance(server, InvalidSpec):
        return Result(Outcome("invalid", "InvalidSpec", server.message), None, None)
    namespace = server.metadata.namespace
    assert namespace is not None, "MCPServer is a namespaced kind"

    spec = server.spec
    interval = float(spec.probe.interval_seconds)
    deployed: WantedCondition | None = None
    extra_headers: dict[str, str] = {}
    verify: ssl.SSLContext | bool = True
    if spec.mode == "managed":
        url = render.service_url(server, render_settings)
        try:
            applied = await managed.deploy(kube, server, render_settings, registry)
            deployed = await managed.deployed_condition(kube, server, applied)
        except (RegistryError, ImageConfigError, PullSecretError) as error:
            return Result(_image_unusable(server, error), url, interval)
        except SecretReferenceError as error:
            deployed = WantedCondition("Deployed", "False", error.reason, str(error))
            outcome = Outcome(
                "failed", error.reason, str(error), deployed=deployed, ready_reason=error.reason
            )
            return Result(outcome, url, interval)
        except NameConflict as error:
            # A Service or Deployment of the name that this server does not control: left
            # untouched (no takeover), and said in both conditions and a Warning Event.
            logger.warning("MCPServer %s/%s: %s", namespace, server.metadata.name, error)
            message = str(error)[:1024]
            deployed = WantedCondition("Deployed", "False", NameConflict.reason, message)
            outcome = Outcome(
                "failed", error.reason, message, deployed=deployed, ready_reason=error.reason
            )
            # No url: the Service of that name is not this server's.
            return Result(outcome, None, interval)
        except KubeError as error:
            message = f"Applying the Deployment or Service failed: HTTP {error.status}: {error}"
            logger.warning("MCPServer %s/%s: %s", namespace, server.metadata.name, message)
            deployed = WantedCondition("Deployed", "False", "ApplyFailed", message[:1024])
            outcome = Outcome(
                "failed",
                "ApplyFailed",
                message[:1024],
                deployed=deployed,
                ready_reason="ApplyFailed",
            )
            return Result(outcome, url, interval)
        try:
            probe_url, extra_headers, verify = managed.probe_endpoint(kube, server, render_settings)
        except managed.OutsideProxy as error:
            outcome = Outcome("invalid", "InvalidSpec", str(error), deployed=deployed)
            return Result(outcome, url, None)
    else:
        assert spec.url is not None
        url = probe_url = spec.url

    if spec.suspend:
        return Result(Outcome("suspended", deployed=deployed), url, None)
    if not spec.probe.enabled:
        return Result(Outcome("not-probed", deployed=deployed), url, None)

    try:
        headers = await resolve_headers(kube, namespace, server)
    except SecretReferenceError as error:
        outcome = Outcome(
            "failed", error.reason, str(error), deployed=deployed, ready_reason=error.reason
        )
        return Result(outcome, url, interval)

    egress = await egress_policy(
        kube, namespace, egress_settings or EgressSettings(), managed=spec.mode == "managed"
    )
    target = ProbeTarget(
        url=probe_url,
        transport="sse" if spec.effective_transport == "sse" else "streamable-http",
        headers={**headers, **extra_headers},
        timeout_seconds=float(spec.probe.timeout_seconds),
        verify_tls=verify,
        egress=egress,
    )
    started = time.monotonic()
    try:
        async with probe_slots:
            started = time.monotonic()
            with tracing.internal(
                "probe", k8s_namespace_name=namespace, mcpserver=server.metadata.name
            ) as span:
                try:
                    discovery = await discover(target, report.STATUS_KEEP)
                except ProbeError as error:
                    if span is not None:
                        span.set_attribute("error.type", error.reason)
                    raise
    except ProbeError as error:
        # A refused destination is the policy's verdict, not the server's fault: Ready says so.
        ready = error.reason if error.reason == "DestinationRefused" else "ProbeFailed"
        outcome = Outcome(
            "failed", error.reason, error.message, deployed=deployed, ready_reason=ready
        )
        return Result(outcome, url, interval, probe_seconds=time.monotonic() - started)
    probe_seconds = time.monotonic() - started

    selection = report.status_tools(
        naming.plan(
            discovery.tools,
            prefix=server.effective_prefix,
            allow=spec.tools_allow or (),
            deny=spec.tools_deny or (),
            # The tools status shows now keep their names when a newcomer collides.
            incumbents=[
                t.original_name for t in (server.status.tools if server.status else None) or ()
            ],
        )
    )
    outcome = Outcome(
        "probed",
        probe_fields=report.status_fields(discovery, selection),
        warnings=report.warnings(selection),
        deployed=deployed,
    )
    watch = target if discovery.list_changed else None
    return Result(outcome, url, interval, watch=watch, probe_seconds=probe_seconds)
