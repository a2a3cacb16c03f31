"""An AgentRun's egress NetworkPolicy applied: its external servers' names resolved, then
the rendered policy (:mod:`mcp_operator.controller.agentrun.network`) applied or removed.

The names are resolved on every reconcile, to the addresses the egress policy allows
(:mod:`mcp_operator.net.egress`: never link-local, metadata or the API server's); a name that
does not resolve gets no rule, so the bridge cannot reach it either.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Sequence

from mcp_operator.api import AgentRun
from mcp_operator.controller import network, network_policies
from mcp_operator.controller.agentrun import network as run_network
from mcp_operator.controller.agentrun.resolve import Resolution
from mcp_operator.controller.conditions import WantedCondition
from mcp_operator.controller.settings import NetworkPolicySettings
from mcp_operator.kube import NETWORKPOLICIES, Kube
from mcp_operator.net.egress import EgressPolicy

logger = logging.getLogger(__name__)

RESOLVE_TIMEOUT_SECONDS = 5.0
"""How long one external server's name may take to resolve; past it, it gets no rule."""


async def apply_egress_policy(
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
        await network_policies.remove_owned(kube, run.metadata.namespace, name, run.metadata.uid)
        return network.disabled()
    if run_network.egress(run, settings) == "open":
        await network_policies.remove_owned(kube, run.metadata.namespace, name, run.metadata.uid)
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
