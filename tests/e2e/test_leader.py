"""High availability on a real API server: two operators, one Lease, the leader SIGKILLed.

The module starts a control plane of its own (as ``test_install`` does): the session's
operator watches every namespace and would reconcile (and post Events about) the
objects here too, which would hide a duplicate. Both operators run ``mcp-operator run``
exactly as a Pod does, with the default election timings (15 s lease, 10 s renew
deadline, 2 s retry), each with its own metrics and liveness endpoints.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mcp_operator.dev.cluster import ControlPlane
from mcp_operator.dev.processes import free_port
from tests.support import peers
from tests.support.cluster import CRDS, Cluster, OperatorProcess, operator_process
from tests.support.objects import condition, eventually

pytestmark = pytest.mark.e2e

LEASE_NAMESPACE = "operator-ha"
LEASE_DURATION = 15
RETRY_PERIOD = 2
RELEASE_BOUND = 3.0
"""Seconds from SIGTERM to the Lease released: kopf stops its watchers at once, the
clean-up stops an idle fleet's workers and closes its client, then one PUT. Before the
release waited for kopf's 5 s grace period for stray tasks, so the bound sits below it."""
SERVERS = 6


@dataclass
class Candidate(OperatorProcess):
    name: str
    metrics_port: int
    health_port: int

    def metric(self, name: str) -> float | None:
        """The first sample of metric ``name`` (``None``: absent, or not serving yet)."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                text = answer.read()
        except urllib.error.URLError:
            return None
        for line in text.decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
        return None

    def healthy(self) -> bool:
        url = f"http://127.0.0.1:{self.health_port}/healthz"
        with urllib.request.urlopen(url, timeout=5) as answer:
            return bool(answer.status == 200)


@pytest.fixture(scope="module")
def plane() -> Iterator[Cluster]:
    with ControlPlane() as control_plane:
        cluster = Cluster(control_plane)
        cluster.kubectl("apply", "--server-side", "-f", str(CRDS))
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRDS))
        cluster.kubectl("create", "namespace", LEASE_NAMESPACE)
        yield cluster


@contextlib.contextmanager
def candidate(cluster: Cluster, name: str, directory: Path, *extra: str) -> Iterator[Candidate]:
    metrics_port, health_port = free_port(), free_port()
    log_path = directory / f"{name}.log"
    # HOSTNAME names the Events' reportingInstance: who announced a transition.
    env = {**cluster.env(), "POD_NAME": name, "HOSTNAME": name}
    env.pop("POD_NAMESPACE", None)
    with operator_process(
        f"--liveness=http://127.0.0.1:{health_port}/healthz",
        f"--metrics=http://127.0.0.1:{metrics_port}/metrics",
        f"--leader-election-namespace={LEASE_NAMESPACE}",
        # The test servers listen on loopback (refused unless the operator is told).
        "--loopback-destinations=allowed",
        *extra,
        env=env,
        log_path=log_path,
        name=name,
    ) as running:
        yield Candidate(running.process, running.log_path, name, metrics_port, health_port)


def lease(cluster: Cluster) -> dict[str, Any]:
    """The Lease's spec (``{}`` until it exists)."""
    found = cluster.kubectl(
        "get", "-o", "json", "lease", "-n", LEASE_NAMESPACE, "mcp-operator", check=False
    )
    if found.returncode != 0:
        return {}
    spec: dict[str, Any] = json.loads(found.stdout)["spec"]
    return spec


def all_ready(cluster: Cluster, namespace: str) -> list[dict[str, Any]] | None:
    items: list[dict[str, Any]] = cluster.get_json("mcpservers", "-n", namespace)["items"]
    ready = [i for i in items if condition(i, "Ready").get("status") == "True"]
    return items if len(ready) == len(items) == SERVERS else None


def transitions(cluster: Cluster, namespace: str) -> Counter[tuple[str, str]]:
    """How many times each (object, reason) was announced: Events, and repeats within one."""
    counted: Counter[tuple[str, str]] = Counter()
    for event in cluster.get_json("events", "-n", namespace)["items"]:
        key = (event["involvedObject"]["name"], event["reason"])
        counted[key] += int(event.get("count") or 1)
    return counted


def test_the_follower_takes_over_within_15_s_of_the_lease_expiring_without_duplicate_events(
    plane: Cluster, tmp_path: Path
) -> None:
    cluster = plane
    namespace = "fleet"
    cluster.kubectl("create", "namespace", namespace)
    with (
        peers.mcp_server_time() as url,
        candidate(cluster, "operator-a", tmp_path) as a,
    ):
        eventually("operator-a to lead", lambda: lease(cluster).get("holderIdentity"), 30)
        with candidate(cluster, "operator-b", tmp_path) as b:
            eventually(
                "operator-b to serve metrics",
                lambda: b.metric("mcp_operator_leader"),
                30,
                until=lambda value: value is not None,
            )
            assert lease(cluster)["holderIdentity"].startswith("operator-a_")
            assert a.metric("mcp_operator_leader") == 1.0
            assert b.metric("mcp_operator_leader") == 0.0, "only one leader"
            assert b.healthy(), "a follower is healthy"

            for index in range(SERVERS):
                cluster.apply(
                    namespace,
                    {
                        "apiVersion": "mcp-operator.dev/v1alpha1",
                        "kind": "MCPServer",
                        "metadata": {"name": f"time-{index}"},
                        "spec": {"mode": "external", "url": url},
                    },
                )
            eventually("the fleet to be Ready", lambda: all_ready(cluster, namespace), 60)
            before = transitions(cluster, namespace)
            assert before and set(before.values()) == {1}, before
            assert a.metric("mcp_operator_reconciles_total") is not None
            assert b.metric("mcp_operator_reconciles_total") is None, "the follower reconciles"

            # The leader dies without a word: no release, the Lease must expire.
            renewed = lease(cluster)["renewTime"]
            os.killpg(a.process.pid, signal.SIGKILL)
            killed = time.monotonic()
            a.process.wait()
            holder = eventually(
                "operator-b to take the Lease over",
                lambda: (
                    (lease(cluster).get("holderIdentity") or "").startswith("operator-b_")
                    and lease(cluster)
                ),
                LEASE_DURATION + 30,
                interval=0.2,
            )
            took = time.monotonic() - killed
            print(f"\nTake-over {took:.1f} s after SIGKILL (last renewal {renewed})")
            assert took <= LEASE_DURATION + 15, f"took {took:.1f} s"
            assert holder["leaseTransitions"] == 1
            assert b.metric("mcp_operator_leader") == 1.0

            # The new leader reconciles the whole fleet and serves a change.
            cluster.apply(
                namespace,
                {
                    "apiVersion": "mcp-operator.dev/v1alpha1",
                    "kind": "MCPServer",
                    "metadata": {"name": f"time-{SERVERS - 1}"},
                    "spec": {"mode": "external", "url": url, "toolsAllow": ["get_*"]},
                },
            )

            def reconciled_by_b() -> list[dict[str, Any]] | None:
                servers = all_ready(cluster, namespace)
                changed = [s for s in servers or () if s["metadata"]["name"].endswith("5")]
                fresh = changed and changed[0]["status"].get("observedGeneration") == 2
                return servers if fresh else None

            eventually("the fleet Ready under operator-b", reconciled_by_b, 60)
            eventually(
                "operator-b to reconcile every server",
                lambda: (b.metric("mcp_operator_reconciles_total") or 0) >= SERVERS,
                30,
            )
            after = transitions(cluster, namespace)
            repeated = {key: n for key, n in after.items() if n > 1}
            assert not repeated, f"Events posted twice for one transition: {repeated}"

            # A clean stop hands the Lease over at once: the follower need not wait for it to
            # expire, nor for the stopping leader's process to end.
            with candidate(cluster, "operator-c", tmp_path) as c:
                eventually(
                    "operator-c to follow",
                    lambda: c.metric("mcp_operator_leader"),
                    30,
                    until=lambda value: value == 0.0,
                )
                b.process.send_signal(signal.SIGTERM)
                signalled = time.monotonic()
                eventually(
                    "operator-b to release the Lease",
                    lambda: not lease(cluster)["holderIdentity"].startswith("operator-b_"),
                    30,
                    interval=0.1,
                )
                released = time.monotonic() - signalled
                eventually(
                    "operator-c to take the released Lease",
                    lambda: lease(cluster)["holderIdentity"].startswith("operator-c_"),
                    30,
                    interval=0.1,
                )
                taken = time.monotonic() - signalled
                assert b.process.wait(timeout=30) == 0
                exited = time.monotonic() - signalled
                print(
                    f"\nSIGTERM: released {released:.1f} s, taken over {taken:.1f} s, "
                    f"leader exited {exited:.1f} s"
                )
                assert released <= RELEASE_BOUND, f"released {released:.1f} s after SIGTERM"
                assert taken <= RELEASE_BOUND + RETRY_PERIOD + 1, f"taken {taken:.1f} s"


def test_shards_by_label_each_reconcile_their_own_and_hand_over_a_relabelled_server(
    plane: Cluster, tmp_path: Path
) -> None:
    cluster = plane
    namespace = "sharded"
    cluster.kubectl("create", "namespace", namespace)

    def server(name: str, shard: str, **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": "mcp-operator.dev/v1alpha1",
            "kind": "MCPServer",
            "metadata": {"name": name, "labels": {"mcp-operator.dev/shard": shard}},
            "spec": {"mode": "external", "url": url, **spec},
        }

    def get(name: str) -> dict[str, Any]:
        found: dict[str, Any] = cluster.get_json(f"mcpserver/{name}", "-n", namespace)
        return found

    def reporters(name: str, reason: str) -> list[str]:
        events = cluster.get_json("events", "-n", namespace)["items"]
        return [
            e.get("reportingInstance", "")
            for e in events
            if e["involvedObject"]["name"] == name and e["reason"] == reason
        ]

    def shard(letter: str) -> tuple[str, ...]:
        return (
            f"--shard-selector=mcp-operator.dev/shard={letter}",
            f"--leader-election-lease=shard-{letter}",
        )

    with (
        peers.mcp_server_time() as url,
        candidate(cluster, "shard-a", tmp_path, *shard("a")),
    ):
        cluster.apply(namespace, server("one", "a"))
        cluster.apply(namespace, server("two", "b"))
        eventually(
            "shard a to serve its server",
            lambda: condition(get("one"), "Ready").get("status") == "True",
            60,
        )
        assert get("two")["status"] == {"observedGeneration": 0}, "not shard a's"
        with candidate(cluster, "shard-b", tmp_path, *shard("b")):
            eventually(
                "shard b to serve its server",
                lambda: condition(get("two"), "Ready").get("status") == "True",
                60,
            )
            # Relabelled into shard b with a new spec: shard b takes it up, a lets it go.
            cluster.apply(namespace, server("one", "b", toolsAllow=["get_*"]))
            eventually(
                "the relabelled server reconciled",
                lambda: get("one")["status"].get("observedGeneration") == 2,
                60,
            )
            assert reporters("one", "ToolsDiscovered") == ["shard-a"]
            assert reporters("one", "ToolsChanged") == ["shard-b"]
            assert reporters("two", "ToolsDiscovered") == ["shard-b"]
        for letter in "ab":
            held = cluster.get_json(f"lease/shard-{letter}", "-n", LEASE_NAMESPACE)
            assert held["spec"]["leaseTransitions"] == 0, "one Lease per shard"
