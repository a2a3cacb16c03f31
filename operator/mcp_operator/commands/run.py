"""``mcp-operator run``: the operator itself, in a cluster or from a laptop.

From a laptop it uses ``KUBECONFIG`` (or ``~/.kube/config``); in a Pod, the
service account. It runs as a single replica (kopf in standalone mode: no
peering objects are needed or created).
"""

from __future__ import annotations

import argparse
import dataclasses
import os

from mcp_operator.controller.settings import (
    AgentRenderSettings,
    AgentRunSettings,
    EgressSettings,
    FleetSettings,
    ListenerSettings,
    RenderSettings,
    ScheduleSettings,
)


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
    parser.add_argument("--log-format", choices=["text", "json"], default="text")
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
        "--bridge-enabled",
        choices=["true", "false"],
        default=os.environ.get("MCP_ENABLED", "true").strip().lower(),
        help="give AgentRun Pods the mcp-bridge sidecar (env MCP_ENABLED); 'false' runs every "
        "agent without it and without the bridge's URL (default %(default)s)",
    )
    parser.add_argument(
        "--private-destinations",
        choices=["refused", "labelled", "allowed"],
        default=os.environ.get(
            "MCP_OPERATOR_PRIVATE_DESTINATIONS", EgressSettings.private_destinations
        ),
        help="may probes of external servers connect to private addresses (cluster Services, "
        "nodes)? 'labelled': only for servers in Namespaces labelled "
        "mcp-operator.dev/private-destinations=allowed (env MCP_OPERATOR_PRIVATE_DESTINATIONS; "
        "default %(default)s)",
    )
    parser.add_argument(
        "--loopback-destinations",
        choices=["refused", "labelled", "allowed"],
        default=os.environ.get(
            "MCP_OPERATOR_LOOPBACK_DESTINATIONS", EgressSettings.loopback_destinations
        ),
        help="may probes connect to loopback addresses (the operator's own Pod or machine)? "
        "'labelled': only for Namespaces labelled mcp-operator.dev/loopback-destinations=allowed "
        "(env MCP_OPERATOR_LOOPBACK_DESTINATIONS; default %(default)s)",
    )


def run(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    import kopf

    import mcp_operator.controller.handlers  # noqa: F401  (registers the handlers)

    log_format = kopf.LogFormat.JSON if args.log_format == "json" else kopf.LogFormat.PLAIN
    kopf.configure(verbose=args.verbose, debug=args.debug, log_format=log_format)
    if not args.debug:
        # The SDK logs whole tracebacks, with bytes of the server's answer, when a server
        # misbehaves; the probe turns those into one clear condition message instead.
        logging.getLogger("mcp").setLevel(logging.CRITICAL)
        # httpx logs every request at INFO; the operator's own lines say what matters.
        logging.getLogger("httpx").setLevel(logging.WARNING)
        for noisy in ("httpcore", "httpx2", "httpcore2"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    render = RenderSettings(cluster_domain=args.cluster_domain)
    if args.adapter_image:
        render = RenderSettings(
            adapter_image=args.adapter_image, cluster_domain=args.cluster_domain
        )
    bridge = AgentRenderSettings(bridge_enabled=args.bridge_enabled == "true")
    if args.adapter_image:
        bridge = dataclasses.replace(bridge, bridge_image=args.adapter_image)
    memo = kopf.Memo(
        agentrun_settings=AgentRunSettings(render=bridge),
        fleet_settings=FleetSettings(
            schedule=ScheduleSettings(max_concurrent=args.max_concurrent_probes),
            listeners=ListenerSettings(max_listeners=args.max_listeners),
            render=render,
            egress=EgressSettings(
                private_destinations=args.private_destinations,
                loopback_destinations=args.loopback_destinations,
            ),
        ),
        # Without --adapter-image, the operator's own image (read from its Pod) is used, for
        # the stdio adapter and the bridge alike.
        adapter_image_from_pod=not args.adapter_image,
    )
    liveness = None if args.liveness == "none" else args.liveness
    asyncio.run(
        kopf.operator(
            clusterwide=not args.namespace,
            namespaces=args.namespace,
            liveness_endpoint=liveness,
            standalone=True,
            memo=memo,
        )
    )
    return 0
