"""One reconcile of one MCPServer: parse -> deploy (managed) -> resolve headers -> probe.

This module decides; :mod:`mcp_operator.controller.mcpserver.fleet` schedules and writes status.
Secret values resolved here go straight into the probe's request headers and
nowhere else: not into the outcome, not into logs.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pydantic

from mcp_operator.api.models import MCPServer
from mcp_operator.controller.conditions import Condition
from mcp_operator.controller.mcpserver import managed, render, report
from mcp_operator.controller.mcpserver.render import RenderSettings
from mcp_operator.controller.mcpserver.status import Outcome
from mcp_operator.kube import Kube, KubeError, SecretReferenceError
from mcp_operator.mcp import naming
from mcp_operator.mcp.discovery import discover
from mcp_operator.mcp.errors import ProbeError
from mcp_operator.mcp.target import ProbeTarget

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Result:
    outcome: Outcome
    url: str | None
    interval: float | None
    """Seconds until the next regular reconcile; ``None`` waits for a spec change."""
    watch: ProbeTarget | None = None
    """Where to listen for ``tools/list_changed``: set when the server advertises it."""


def describe_validation_error(error: pydantic.ValidationError) -> str:
    """One line per problem, each naming the field, e.g. ``spec.url: must start with http://``."""
    lines = []
    for problem in error.errors()[:10]:
        location = ".".join(
            str(part) for part in problem["loc"] if not str(part).startswith("function-")
        )
        lines.append(f"{location}: {problem['msg']}" if location else str(problem["msg"]))
    return "; ".join(lines)


async def resolve_headers(kube: Kube, namespace: str, server: MCPServer) -> dict[str, str]:
    """The request headers of a server, with ``secretKeyRef`` values read from the API."""
    headers: dict[str, str] = {}
    for header in server.spec.headers or []:
        if header.value is not None:
            headers[header.name] = header.value
        elif header.value_from is not None:
            ref = header.value_from.secret_key_ref
            headers[header.name] = await kube.read_secret_key(namespace, ref.name, ref.key)
    return headers


async def mcpserver(
    kube: Kube,
    body: Mapping[str, Any],
    *,
    probe_slots: asyncio.Semaphore,
    render_settings: RenderSettings,
) -> Result:
    """Reconcile an MCPServer once and say what its status should say."""
    namespace = body["metadata"]["namespace"]
    try:
        server = MCPServer.model_validate(body)
    except pydantic.ValidationError as error:
        message = describe_validation_error(error)
        logger.warning(
            "MCPServer %s/%s is invalid: %s", namespace, body["metadata"].get("name"), message
        )
        return Result(Outcome("invalid", "InvalidSpec", message), None, None)

    spec = server.spec
    interval = float(spec.probe.interval_seconds)
    deployed: Condition | None = None
    extra_headers: dict[str, str] = {}
    verify: ssl.SSLContext | bool = True
    if spec.mode == "managed":
        url = render.service_url(server, render_settings)
        try:
            applied = await managed.deploy(kube, server, render_settings)
            deployed = await managed.deployed_condition(kube, server, applied)
        except KubeError as error:
            message = f"Applying the Deployment or Service failed: HTTP {error.status}: {error}"
            logger.warning("MCPServer %s/%s: %s", namespace, server.metadata.name, message)
            deployed = Condition("Deployed", "False", "ApplyFailed", message[:1024])
            outcome = Outcome(
                "failed",
                "ApplyFailed",
                message[:1024],
                deployed=deployed,
                ready_reason="ApplyFailed",
            )
            return Result(outcome, url, interval)
        probe_url, extra_headers, verify = managed.probe_endpoint(kube, server, render_settings)
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

    target = ProbeTarget(
        url=probe_url,
        transport="sse" if spec.effective_transport == "sse" else "streamable-http",
        headers={**headers, **extra_headers},
        timeout_seconds=float(spec.probe.timeout_seconds),
        verify_tls=verify,
    )
    try:
        async with probe_slots:
            discovery = await discover(target, report.STATUS_KEEP)
    except ProbeError as error:
        return Result(
            Outcome("failed", error.reason, error.message, deployed=deployed), url, interval
        )

    selection = report.status_tools(
        naming.plan(
            discovery.tools,
            prefix=server.effective_prefix,
            allow=spec.tools_allow or (),
            deny=spec.tools_deny or (),
        )
    )
    outcome = Outcome(
        "probed",
        probe_fields=report.status_fields(discovery, selection),
        warnings=report.warnings(selection),
        deployed=deployed,
    )
    return Result(outcome, url, interval, watch=target if discovery.list_changed else None)
