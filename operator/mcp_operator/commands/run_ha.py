"""The high-availability flags of ``mcp-operator run``, and the settings they make.

This module owns the flags of running several operator processes side by side: leader
election on a Lease (and this process's name in it), shards, the metrics endpoint, the
operator's own identity, the admission policies it looks for, and namespace-scoped mode
(docs/install.md, docs/metrics.md); and their checks.
"""

from __future__ import annotations

import argparse
import os

from mcp_operator.controller.settings import EndpointSettings, LeaderElectionSettings
from mcp_operator.kube.identity import ServiceAccountRef


def add_high_availability_arguments(parser: argparse.ArgumentParser) -> None:
    """Leader election and the metrics endpoint (docs/install.md, docs/metrics.md)."""
    election = LeaderElectionSettings()
    parser.add_argument(
        "--no-leader-election",
        action="store_true",
        help="reconcile at once, without electing a leader on the Lease (one process only)",
    )
    parser.add_argument(
        "--leader-election-namespace",
        default=os.environ.get("POD_NAMESPACE") or election.lease_namespace,
        help="namespace of the leader Lease (default: the Pod's namespace, env POD_NAMESPACE, "
        f"else {election.lease_namespace})",
    )
    parser.add_argument(
        "--leader-election-lease",
        default=election.lease_name,
        help="name of the leader Lease; processes sharing it elect one leader "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--leader-election-lease-duration",
        type=int,
        default=election.lease_duration_seconds,
        help="seconds a follower waits after the Lease last changed before taking it "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--leader-election-renew-deadline",
        type=float,
        default=election.renew_deadline_seconds,
        help="seconds the leader keeps reconciling without renewing the Lease; then it steps "
        "down and exits (default %(default)s)",
    )
    parser.add_argument(
        "--leader-election-retry-period",
        type=float,
        default=election.retry_period_seconds,
        help="seconds between two attempts to acquire or renew the Lease (default %(default)s)",
    )
    parser.add_argument(
        "--metrics",
        default=EndpointSettings.metrics,
        help="Prometheus metrics endpoint URL (default %(default)s); 'none' disables it",
    )
    parser.add_argument(
        "--shard-selector",
        default=None,
        help="reconcile only the MCPServers and AgentRuns whose labels match this selector "
        "(key=value, key!=value, key, !key; comma-separated); each shard runs its own "
        "Deployment and Lease (default: all)",
    )
    parser.add_argument(
        "--tenant-admission-policy",
        default=None,
        help="name of the installation's tenant ValidatingAdmissionPolicy (and of its "
        "binding); looked for at start, status.admission says whether it guards tenants' "
        "objects besides the opt-in labels (docs/security.md); default: none",
    )
    parser.add_argument(
        "--bridge-key-policy",
        default=None,
        help="name of the installation's bridge-key ValidatingAdmissionPolicy (and of its "
        "binding), which keeps tokens of managed servers' audiences to run bridges; looked "
        "for at start, managed servers' Isolation condition says whether it holds "
        "(docs/security.md); default: none (Isolation=False, BridgeKeysUnguarded)",
    )
    parser.add_argument(
        "--identity",
        default=None,
        metavar="NAMESPACE/NAME",
        help="the operator's own ServiceAccount, whose audience-bound tokens (TokenRequest) "
        "its probes present to managed servers and which every server's access "
        "configuration permits; default: the ServiceAccount of its in-cluster token "
        "(needed outside a cluster: without it, probes of servers that authenticate fail)",
    )
    parser.add_argument(
        "--namespace-scoped",
        action="store_true",
        help="run with Roles in the watched namespaces only (no ClusterRole): neither list nor "
        "watch CRDs and namespaces; needs --namespace, and the CRDs installed before start",
    )


def identity_setting(value: str | None) -> str | None:
    """``--identity``, checked (``namespace/name``)."""
    if value is None:
        return None
    try:
        ServiceAccountRef.parse(value)
    except ValueError as error:
        raise SystemExit(f"--identity: {error}") from None
    return value


def election_settings(args: argparse.Namespace) -> LeaderElectionSettings:
    if args.leader_election_renew_deadline >= args.leader_election_lease_duration:
        raise SystemExit(
            "--leader-election-renew-deadline must be shorter than "
            "--leader-election-lease-duration (a leader must stop before others may start)"
        )
    return LeaderElectionSettings(
        enabled=not args.no_leader_election,
        lease_name=args.leader_election_lease,
        lease_namespace=args.leader_election_namespace,
        lease_duration_seconds=args.leader_election_lease_duration,
        renew_deadline_seconds=args.leader_election_renew_deadline,
        retry_period_seconds=args.leader_election_retry_period,
    )


def candidate_identity() -> str:
    """This process in the election: its Pod (or host) name and a random suffix, so two
    processes on one host never mistake each other's Lease for their own."""
    import socket
    import uuid

    host = os.environ.get("POD_NAME") or socket.gethostname()
    return f"{host}_{uuid.uuid4().hex[:8]}"
