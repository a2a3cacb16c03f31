"""``mcp-operator run``: the operator itself, in a cluster or from a laptop.

From a laptop it uses ``KUBECONFIG`` (or ``~/.kube/config``); in a Pod, the
service account. Any number of processes may run: they elect a leader on a
``coordination.k8s.io`` Lease (:mod:`mcp_operator.controller.leader`), only the
leader runs kopf (in standalone mode: kopf's own peering is not used) and the
controllers, and every process serves ``/healthz`` and the metrics
(:mod:`mcp_operator.controller.endpoints`). A laptop ``run`` takes part in the
same election unless ``--no-leader-election``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, get_args

from mcp_operator.commands.run_ha import (
    add_high_availability_arguments,
    candidate_identity,
    election_settings,
    identity_setting,
)
from mcp_operator.commands.run_network import (
    add_network_policy_arguments,
    network_policy_settings,
    scraper_list,
)
from mcp_operator.controller.settings import (
    AgentRenderSettings,
    AgentRunSettings,
    EgressSettings,
    EndpointSettings,
    FleetSettings,
    LeaderElectionSettings,
    ListenerSettings,
    Permission,
    RenderSettings,
    ScheduleSettings,
)
from mcp_operator.oci.settings import RegistrySettings, host_list

if TYPE_CHECKING:
    import asyncio

    from mcp_operator.controller.metrics import OperatorMetrics


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-n",
        "--namespace",
        action="append",
        default=[],
        help="watch only this namespace (repeatable); default: all namespaces",
    )
    parser.add_argument(
        "--liveness",
        default="http://0.0.0.0:8080/healthz",
        help="liveness endpoint URL (default %(default)s); 'none' disables it",
    )
    parser.add_argument(
        "--log-format",
        choices=["text", "full", "json"],
        default="text",
        help="text: the messages alone (the container runtime adds the time); full: with "
        "time, logger and level; json: for log collectors (default %(default)s)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log more")
    parser.add_argument("--debug", action="store_true", help="log everything kopf does")
    parser.add_argument(
        "--adapter-image",
        default=os.environ.get("MCP_OPERATOR_ADAPTER_IMAGE"),
        help="image of the stdio adapter sidecar of managed servers and of the bridge sidecar of "
        "AgentRuns (env "
        "MCP_OPERATOR_ADAPTER_IMAGE); default: the operator's own image, read from its Pod "
        f"(POD_NAME, POD_NAMESPACE), else {RenderSettings.adapter_image}",
    )
    parser.add_argument(
        "--dataplane-image",
        default=os.environ.get("MCP_OPERATOR_DATAPLANE_IMAGE") or None,
        help="image of the compiled data plane (mcp-dataplane; env "
        "MCP_OPERATOR_DATAPLANE_IMAGE): managed servers' adapters and fronts and AgentRuns' "
        "bridges run it instead of the operator's image, but for servers with spec.tracing "
        "and runs with spec.bridge.tracing, which it does not serve yet; default: none (the "
        "Python data plane everywhere)",
    )
    parser.add_argument(
        "--cluster-domain",
        default=os.environ.get("MCP_OPERATOR_CLUSTER_DOMAIN", RenderSettings.cluster_domain),
        help="the cluster's DNS domain, for status.url of managed servers (default %(default)s)",
    )
    parser.add_argument(
        "--max-listeners",
        type=int,
        default=ListenerSettings.max_listeners,
        help="servers listened to at once for tools/list_changed, one connection each; "
        "0 turns listening off (default %(default)s)",
    )
    parser.add_argument(
        "--max-concurrent-probes",
        type=int,
        default=ScheduleSettings.max_concurrent,
        help="probes running at once across all servers (default %(default)s)",
    )
    parser.add_argument(
        "--bridge-images",
        default=os.environ.get("MCP_OPERATOR_BRIDGE_IMAGES"),
        help="comma-separated image references (* and ? globs) that AgentRuns may name in "
        "spec.bridge.image besides the operator's own bridge image (env "
        "MCP_OPERATOR_BRIDGE_IMAGES); a run naming any other image is refused with "
        "BridgeImageNotAllowed (default: none)",
    )
    parser.add_argument(
        "--metrics-scrapers",
        default=os.environ.get("MCP_OPERATOR_METRICS_SCRAPERS"),
        help="comma-separated ServiceAccounts (NAMESPACE/NAME) that may read /metrics of "
        "bridges and adapters, with a token of the audience metrics.mcp-operator.dev (env "
        "MCP_OPERATOR_METRICS_SCRAPERS); everyone else gets 401 or 403 (default: none)",
    )
    parser.add_argument(
        "--bridge-enabled",
        choices=["true", "false"],
        default=os.environ.get("MCP_ENABLED", "true").strip().lower(),
        help="give AgentRun Pods the mcp-bridge sidecar (env MCP_ENABLED); 'false' runs every "
        "agent without it and without the bridge's URL (default %(default)s)",
    )
    _add_destinations_argument(
        parser,
        "private",
        "MCP_OPERATOR_PRIVATE_DESTINATIONS",
        EgressSettings.private_destinations,
        "private addresses (cluster Services, nodes)",
    )
    _add_destinations_argument(
        parser,
        "loopback",
        "MCP_OPERATOR_LOOPBACK_DESTINATIONS",
        EgressSettings.loopback_destinations,
        "loopback addresses (the operator's own Pod or machine)",
    )
    parser.add_argument(
        "--insecure-registries",
        default=os.environ.get("MCP_OPERATOR_INSECURE_REGISTRIES"),
        help="comma-separated host[:port] of registries read over plain HTTP when the operator "
        "reads an image's ENTRYPOINT (env MCP_OPERATOR_INSECURE_REGISTRIES; default none)",
    )
    parser.add_argument(
        "--allowed-registries",
        default=os.environ.get("MCP_OPERATOR_ALLOWED_REGISTRIES"),
        help="comma-separated host[:port] patterns (* globs) of the only registries the operator "
        "may read image configurations from (env MCP_OPERATOR_ALLOWED_REGISTRIES; default any)",
    )
    add_network_policy_arguments(parser)
    add_high_availability_arguments(parser)


def _add_destinations_argument(
    parser: argparse.ArgumentParser, which: str, env: str, default: str, addresses: str
) -> None:
    """The ``--<which>-destinations`` flag: may probes of external servers connect to one class
    of address the egress policy guards (refused, labelled, allowed)? Every class has the same
    form: its environment variable ``env`` and, for ``labelled``, its Namespace label
    ``mcp-operator.dev/<which>-destinations=allowed``."""
    parser.add_argument(
        f"--{which}-destinations",
        choices=list(get_args(Permission)),
        default=os.environ.get(env, default),
        help=f"may probes of external servers connect to {addresses}? 'labelled': only for "
        f"servers in Namespaces labelled mcp-operator.dev/{which}-destinations=allowed "
        f"(env {env}; default %(default)s)",
    )


def run(args: argparse.Namespace) -> int:
    import logging

    import kopf

    # kopf's Identity type is not exported; the value is any string.
    from kopf._core.engines.peering import Identity

    import mcp_operator.controller.handlers  # noqa: F401  (registers the handlers)
    from mcp_operator import tracing
    from mcp_operator.controller.metrics import OperatorMetrics
    from mcp_operator.controller.shards import parse_selector
    from mcp_operator.serve.process import freeze_startup_heap, run_on_fastest_loop

    tracing.configure("mcp-operator")  # reconciles and probes, when OTEL_* configure it
    log_format = {"json": kopf.LogFormat.JSON, "full": kopf.LogFormat.FULL}.get(
        args.log_format, kopf.LogFormat.PLAIN
    )
    kopf.configure(verbose=args.verbose, debug=args.debug, log_format=log_format)
    if not args.debug:
        # httpx logs every request at INFO; the operator's own lines say what matters.
        for noisy in ("httpx", "httpcore"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    election = election_settings(args)
    try:
        shard_selector = parse_selector(args.shard_selector or "")
    except ValueError as error:
        raise SystemExit(f"--shard-selector: {error}") from None
    if args.namespace_scoped and not args.namespace:
        raise SystemExit("--namespace-scoped needs the namespaces to watch (--namespace NS)")
    endpoints = EndpointSettings(
        liveness=None if args.liveness == "none" else args.liveness,
        metrics=None if args.metrics == "none" else args.metrics,
    )
    render = RenderSettings(
        cluster_domain=args.cluster_domain, dataplane_image=args.dataplane_image
    )
    if args.adapter_image:
        render = dataclasses.replace(render, adapter_image=args.adapter_image)
    bridge = AgentRenderSettings(
        dataplane_image=args.dataplane_image,
        bridge_enabled=args.bridge_enabled == "true",
        bridge_images=tuple(i.strip() for i in (args.bridge_images or "").split(",") if i.strip()),
    )
    if args.adapter_image:
        bridge = dataclasses.replace(bridge, bridge_image=args.adapter_image)
    metrics = OperatorMetrics()
    network = network_policy_settings(args)
    scrapers = scraper_list(args.metrics_scrapers or "")
    memo = kopf.Memo(
        agentrun_settings=AgentRunSettings(
            render=bridge, network=network, metrics_scrapers=scrapers
        ),
        fleet_settings=FleetSettings(
            schedule=ScheduleSettings(max_concurrent=args.max_concurrent_probes),
            listeners=ListenerSettings(max_listeners=args.max_listeners),
            render=render,
            registry=RegistrySettings(
                insecure_hosts=host_list(args.insecure_registries or ""),
                allowed_hosts=host_list(args.allowed_registries or ""),
            ),
            egress=EgressSettings(
                private_destinations=args.private_destinations,
                loopback_destinations=args.loopback_destinations,
            ),
            network=network,
            metrics_scrapers=scrapers,
        ),
        # Without --adapter-image, the operator's own image (read from its Pod) is used, for
        # the stdio adapter and the bridge alike.
        adapter_image_from_pod=not args.adapter_image,
        metrics=metrics,
        # Namespaced RBAC cannot list CRDs or namespaces; kopf then serves what it found at
        # start-up in the listed namespaces, without warning about the missing permission.
        scanning=not args.namespace_scoped,
        shard_selector=shard_selector,
        tenant_admission_policy=args.tenant_admission_policy,
        bridge_key_policy=args.bridge_key_policy,
        identity=identity_setting(args.identity),
    )

    async def operate(stop: asyncio.Event, quiesced: asyncio.Event) -> None:
        memo.quiesced = quiesced  # set by the clean-up handler once nothing writes any more
        await kopf.operator(
            clusterwide=not args.namespace,
            namespaces=args.namespace,
            # /healthz is ours (controller.endpoints), served by followers too.
            liveness_endpoint=None,
            standalone=True,
            # kopf's default identity asks the passwd database for the user's name, which a
            # numeric USER without a passwd entry (our image's 65532, OpenShift's random
            # UIDs) does not have: kopf.operator raised KeyError and the Pod crash-looped.
            identity=Identity(candidate_identity()),
            memo=memo,
            stop_flag=stop,
        )

    freeze_startup_heap()
    return run_on_fastest_loop(_main(operate, election, endpoints, metrics))


async def _main(
    operate: Callable[[asyncio.Event, asyncio.Event], Coroutine[Any, Any, None]],
    election: LeaderElectionSettings,
    endpoint_settings: EndpointSettings,
    metrics: OperatorMetrics,
) -> int:
    import asyncio
    import logging
    import signal

    from mcp_operator.controller import endpoints
    from mcp_operator.controller.leader import ElectionError, Elector, lead
    from mcp_operator.kube import KubeClient

    logger = logging.getLogger("mcp_operator.commands.run")
    served = await endpoints.serve(endpoint_settings, metrics)
    try:
        if not election.enabled:
            metrics.leading(True)
            await operate(asyncio.Event(), asyncio.Event())  # kopf stops on SIGTERM, SIGINT
            return 0
        # Until kopf runs (it installs its own handlers), a signal stops the follower.
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        kube = await KubeClient.open(on_error=metrics.api_error)
        metrics.leading(False)
        try:
            elector = Elector(kube, election, candidate_identity(), on_change=metrics.leading)
            clean = await lead(elector, operate, stop)
        except ElectionError as error:
            logger.error("%s", error)
            return 2
        finally:
            await kube.close()
        if not clean:
            logger.error("Exiting after losing the leadership, to start over as a follower")
            return 1
        return 0
    finally:
        await served.close()
