"""``mcp-operator dev``: the local control plane and the demo, for laptops and CI.

``dev cluster up`` starts etcd, kube-apiserver and kube-controller-manager (see
:mod:`mcp_operator.dev.cluster`) in the foreground and stops them on Ctrl-C
(``--node``: with the machine's one real node, :mod:`mcp_operator.dev.node`);
``dev cluster down`` stops one started by another shell. ``dev demo`` is what
``make demo`` runs (see :mod:`mcp_operator.dev.demo`); it also runs from an
installed package, and says what is missing, with the fix, before it starts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

DEFAULT_DIR = (
    Path(os.environ.get("MCP_OPERATOR_CACHE", Path.home() / ".cache" / "mcp-operator")) / "cluster"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="dev_command", metavar="WHAT", required=True)
    cluster = sub.add_parser("cluster", help="Start or stop the local control plane")
    cluster.add_argument("action", choices=["up", "down"])
    cluster.add_argument(
        "--dir", type=Path, default=DEFAULT_DIR, help=f"state directory (default {DEFAULT_DIR})"
    )
    cluster.add_argument(
        "--node",
        action="store_true",
        help="also run one real node (containerd, kubelet, kube-proxy, a registry on the "
        "cluster bridge); needs root and `make node`",
    )
    demo = sub.add_parser(
        "demo",
        help="Run the demo (what `make demo` runs)",
        description="A cluster with a node (your kubeconfig's, else the local one), the chart "
        "installed from the built images, a managed and an external MCPServer, and an AgentRun "
        "whose agent calls tools through the bridge; prints the run's phases, the agent's "
        "output and the bridge's audit lines. Needs kubectl, helm (`make helm`) and the images "
        "(`make images`); the local cluster needs root and `make control-plane node`.",
    )
    demo.add_argument(
        "--local",
        action="store_true",
        help="use the local cluster even when a kubeconfig points at a cluster",
    )
    demo.add_argument(
        "--no-wait",
        action="store_true",
        help="end after printing instead of waiting for Ctrl-C (also without a terminal)",
    )
    demo.add_argument(
        "--registry",
        metavar="HOST[:PORT]",
        help="push the images here (a registry the cluster's nodes pull from); default: the "
        "one the cluster publishes in kube-public/local-registry-hosting",
    )


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if args.dev_command == "demo":
        from mcp_operator.dev import demo

        wait = not args.no_wait and sys.stdin is not None and sys.stdin.isatty()
        return demo.main(force_local=args.local, wait=wait, registry=args.registry)
    if args.action == "up":
        return _up(args.dir, node=args.node)
    return _down(args.dir)


def _up(directory: Path, node: bool = False) -> int:
    from mcp_operator.dev.cluster import ControlPlane
    from mcp_operator.dev.processes import ControlPlaneError

    if directory.exists():
        _down(directory, quiet=True)
        for stale in ("etcd",):
            import shutil

            shutil.rmtree(directory / stale, ignore_errors=True)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    plane = ControlPlane(directory=directory, keep_directory=True, node=node)
    try:
        plane.start()
    except ControlPlaneError as error:
        plane.stop()
        print(f"Could not start the local cluster: {error}")
        return 1
    except BaseException:
        plane.stop()  # whatever failed: nothing of a half-started node stays on the host
        raise
    try:
        state = {"pids": plane.pids, "owner": os.getpid()}
        (directory / "state.json").write_text(json.dumps(state))
        print(
            f"Control plane {plane.version.get('gitVersion')} is ready at {plane.server} "
            f"({plane.started_seconds:.1f}s)"
        )
        if plane.node is not None:
            print(f"  node {plane.node.name} Ready at {plane.node.ip}; registry {plane.registry}")
        print(f"  export KUBECONFIG={plane.kubeconfig}")
        print("Press Ctrl-C to stop it.", flush=True)
        stop.wait()
    finally:
        plane.stop()
    (directory / "state.json").unlink(missing_ok=True)
    return 0


def _down(directory: Path, quiet: bool = False) -> int:
    state = directory / "state.json"
    if not state.exists():
        if not quiet:
            print(f"No control plane recorded in {directory}")
        return 0
    recorded = json.loads(state.read_text())
    owner = recorded.get("owner")
    if owner:
        # The `up` process stops everything itself (the node's cleanup runs in it).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(owner, signal.SIGTERM)
            for _ in range(300):
                os.kill(owner, 0)
                time.sleep(0.1)
    for pid in recorded.get("pids", []):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    state.unlink(missing_ok=True)
    if not quiet:
        print("Stopped the control plane")
    return 0
