"""One reconcile of one MCPServer: deploy (managed) -> resolve headers -> probe.

This module decides; :mod:`mcp_operator.controller.mcpserver.fleet` parses (where the
event arrives), schedules and writes status. Secret values resolved here go straight
into the probe's request headers and nowhere else: not into the outcome, not into logs.
"""

from __future__ import annotations

import dataclasses
import logging
import ssl
import time
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from mcp_operator import tracing
from mcp_operator.api import MCPServer
from mcp_operator.controller import network, network_policies
from mcp_operator.controller.conditions import WantedCondition
from mcp_operator.controller.mcpserver import (
    auth,
    destinations,
    isolation,
    managed,
    render,
    report,
)
from mcp_operator.controller.mcpserver import network as server_network
from mcp_operator.controller.mcpserver.data_path import DataPath
from mcp_operator.controller.mcpserver.pins import APPROVED_TOOLS_ANNOTATION
from mcp_operator.controller.mcpserver.status import Outcome
from mcp_operator.controller.parsing import InvalidSpec
from mcp_operator.controller.settings import (
    EgressSettings,
    NetworkPolicySettings,
    RenderSettings,
)
from mcp_operator.kube import NAMESPACES, Kube, KubeError, NameConflict, SecretReferenceError
from mcp_operator.kube.credentials import CredentialError
from mcp_operator.mcp import naming
from mcp_operator.mcp.credentials import Credentials
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
    authentication: str | None = None
    """The authentication a managed server's endpoint enforces (``status.access``)."""


async def resolve_headers(kube: Kube, namespace: str, server: MCPServer) -> dict[str, str]:
    """The request headers of a server, with ``secretKeyRef`` values read from the API."""
    headers = {h.name: h.value for h in server.spec.headers or () if h.value is not None}
    for use in server.referenced_secrets():
        if use.reader == "probe":
            headers[use.name] = await kube.read_secret_key(namespace, use.secret, use.key)
    return headers


async def check_auth_secret(kube: Kube, namespace: str, server: MCPServer) -> None:
    """Raise :class:`SecretReferenceError` when the client secret the probe's ``auth`` names
    cannot be read (its value is read again, and only, when a token is requested)."""
    ref = server.spec.probe_auth.client_secret_ref if server.spec.probe_auth else None
    if ref is not None:
        await kube.read_secret_key(namespace, ref.name, ref.key)


READY_REASONS = frozenset({"DestinationRefused", "AuthRequired", "InsufficientScope"})
"""Probe failures that are ``Ready``'s reason too (the policy's verdict, the server's
authorization layer), not ``ProbeFailed``: a user acts on them differently."""

_PROBE_CREDENTIALS = auth.ProbeCredentials()
"""The credentials of callers that keep none of their own (the fleet keeps its own)."""


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
    probe_credentials: auth.ProbeCredentials | None = None,
    data_path: DataPath | None = None,
    network_settings: NetworkPolicySettings | None = None,
    bridge_key_policy: str | None = None,
) -> Result:
    """Reconcile an MCPServer once and say what its status should say.

    A managed server's NetworkPolicy is applied with its children, before its Service and
    Deployment (:func:`~mcp_operator.controller.mcpserver.managed.deploy`): one that cannot
    be applied (a NetworkPolicy of the name that is not the server's, the API server refusing
    it) leaves the Deployment as it is, so that a new server's Pods never start unprotected."""
    policy = _Policy()
    result = await _mcpserver(
        kube,
        server,
        probe_slots=probe_slots,
        render_settings=render_settings,
        registry=registry,
        egress_settings=egress_settings,
        data_path=data_path,
        probe_credentials=probe_credentials,
        network_settings=network_settings or NetworkPolicySettings(),
        policy=policy,
    )
    if policy.condition is not None:
        result = dataclasses.replace(
            result, outcome=dataclasses.replace(result.outcome, network=policy.condition)
        )
    if not isinstance(server, InvalidSpec) and server.spec.mode == "managed":
        result = dataclasses.replace(
            result,
            authentication=render.authentication(server),
            outcome=dataclasses.replace(
                result.outcome, isolation=isolation.condition(server, bridge_key_policy)
            ),
        )
    return result


@dataclass
class _Policy:
    """The ``NetworkPolicy`` condition, once this reconcile applied the policy or failed to."""

    condition: WantedCondition | None = None


async def _mcpserver(
    kube: Kube,
    server: MCPServer | InvalidSpec,
    *,
    probe_slots: AbstractAsyncContextManager[None],
    render_settings: RenderSettings,
    registry: RegistryClient | None,
    egress_settings: EgressSettings | None,
    data_path: DataPath | None,
    probe_credentials: auth.ProbeCredentials | None,
    network_settings: NetworkPolicySettings,
    policy: _Policy,
) -> Result:
    if isinstance(server, InvalidSpec):
        return Result(Outcome("invalid", "InvalidSpec", server.message), None, None)
    namespace = server.metadata.namespace
    assert namespace is not None, "MCPServer is a namespaced kind"

    spec = server.spec
    interval = float(spec.probe.interval_seconds)
    deployed: WantedCondition | None = None
    extra_headers: dict[str, str] = {}
    verify: ssl.SSLContext | bool = True
    credentials: Credentials | None = None
    if spec.mode == "managed":
        url = render.service_url(server, render_settings)
        try:
            if data_path is not None:
                await data_path.write_access(server)
            applied = await managed.deploy(
                kube, server, render_settings, registry, network=network_settings
            )
            policy.condition = server_network.condition(server, network_settings)
            deployed = await managed.deployed_condition(kube, server, applied)
        except (RegistryError, ImageConfigError, PullSecretError) as error:
            return Result(_image_unusable(server, error), url, interval)
        except CredentialError as error:
            # The cluster's ServiceAccount issuer could not be read: no access configuration,
            # so nothing is rolled out that would refuse every caller.
            message = str(error)[:1024]
            deployed = WantedCondition("Deployed", "False", "IssuerUnavailable", message)
            outcome = Outcome(
                "failed",
                "IssuerUnavailable",
                message,
                deployed=deployed,
                ready_reason="IssuerUnavailable",
            )
            return Result(outcome, url, interval)
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
            if message.startswith("NetworkPolicy"):
                policy.condition = network.failed(NameConflict.reason, message)
            outcome = Outcome(
                "failed", error.reason, message, deployed=deployed, ready_reason=error.reason
            )
            # No url: the Service of that name is not this server's.
            return Result(outcome, None, interval)
        except KubeError as error:
            refused_policy = isinstance(error, network_policies.PolicyNotApplied)
            what = "NetworkPolicy" if refused_policy else "Deployment or Service"
            message = f"Applying the {what} failed: {error.summary}"
            logger.warning("MCPServer %s/%s: %s", namespace, server.metadata.name, message)
            if refused_policy:
                policy.condition = network.failed("ApplyFailed", message)
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
        if data_path is not None:
            credentials = data_path.probe_credentials(server, proxied=not kube.in_cluster)
    else:
        assert spec.url is not None
        url = probe_url = spec.url

    if spec.suspend:
        return Result(Outcome("suspended", deployed=deployed), url, None)
    if not spec.probe.enabled:
        return Result(Outcome("not-probed", deployed=deployed), url, None)

    try:
        headers = await resolve_headers(kube, namespace, server)
        await check_auth_secret(kube, namespace, server)
    except SecretReferenceError as error:
        outcome = Outcome(
            "failed", error.reason, str(error), deployed=deployed, ready_reason=error.reason
        )
        return Result(outcome, url, interval)

    egress = await egress_policy(
        kube, namespace, egress_settings or EgressSettings(), managed=spec.mode == "managed"
    )
    if spec.mode == "external":
        kept = _PROBE_CREDENTIALS if probe_credentials is None else probe_credentials
        credentials = kept.credentials(kube, server, egress)
    target = ProbeTarget(
        url=probe_url,
        transport="sse" if spec.effective_transport == "sse" else "streamable-http",
        headers={**headers, **extra_headers},
        timeout_seconds=float(spec.probe.timeout_seconds),
        verify_tls=verify,
        egress=egress,
        credentials=credentials,
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
        ready = error.reason if error.reason in READY_REASONS else "ProbeFailed"
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
        pinning=spec.tools_pinning,
        approved_tools=(server.metadata.annotations or {}).get(APPROVED_TOOLS_ANNOTATION),
        server=server.metadata.name,
    )
    watch = target if discovery.list_changed else None
    return Result(outcome, url, interval, watch=watch, probe_seconds=probe_seconds)
