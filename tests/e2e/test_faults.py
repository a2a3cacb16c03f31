"""Faults survived: kube-apiserver killed, etcd restarted, each in the middle of a fleet reconcile.

A control plane of its own (its processes are killed here), one operator (no election:
an outage longer than the renew deadline makes a leader step down and exit, which
``test_leader`` covers), and a fleet of external servers on one real MCP server. Each
fault strikes right after a spec change of the whole fleet; afterwards every server must
have converged to the new generation, Ready with the right tools, and every transition
must have been announced by exactly one Event.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_operator.dev.cluster import ControlPlane
from tests.support import peers
from tests.support.cluster import CRDS, Cluster, OperatorProcess, operator_process
from tests.support.faults import restart
from tests.support.objects import condition, eventually

pytestmark = pytest.mark.e2e

NAMESPACE = "fleet"
SERVERS = 20
OPERATOR_TOKEN = secrets.token_hex(24)


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    with ControlPlane() as control_plane:
        yield control_plane


@pytest.fixture(scope="module")
def fleet(
    plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, str, OperatorProcess]]:
    cluster = Cluster(plane)
    cluster.kubectl("apply", "--server-side", "-f", str(CRDS))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRDS))
    cluster.kubectl("create", "namespace", NAMESPACE)
    directory = tmp_path_factory.mktemp("faults")
    log_path = directory / "operator.log"
    # The operator's own token, so that the API server can refuse it while kubectl's works.
    grant_operator_token(plane, granted=True)
    restart(plane, "kube-apiserver", sig=signal.SIGTERM)
    env = {**cluster.env(), "KUBECONFIG": str(operator_kubeconfig(plane, directory))}
    with (
        peers.mcp_server_time() as url,
        operator_process(
            "--liveness=none",
            "--metrics=none",
            "--no-leader-election",
            # The test server listens on loopback (refused unless the operator is told).
            "--loopback-destinations=allowed",
            # Everything, kopf's watch streams included, with time and level: a failure here
            # is rare and its explanation (below) quotes what the operator said.
            "--verbose",
            "--log-format=full",
            env=env,
            log_path=log_path,
        ) as operator,
    ):
        apply_fleet(cluster, url, [])
        eventually("the fleet Ready", lambda: converged(cluster, 1, 2), 90)
        yield cluster, url, operator


def grant_operator_token(plane: ControlPlane, *, granted: bool) -> None:
    """Name (or stop naming) :data:`OPERATOR_TOKEN` in the API server's token file; the
    API server reads it when it starts."""
    assert plane.directory is not None
    tokens = plane.directory / "tokens.csv"
    lines = [line for line in tokens.read_text().splitlines() if OPERATOR_TOKEN not in line]
    if granted:
        lines.append(f'{OPERATOR_TOKEN},fault-operator,fault-operator-uid,"system:masters"')
    tokens.write_text("\n".join(lines) + "\n")


def operator_kubeconfig(plane: ControlPlane, directory: Path) -> Path:
    """The plane's kubeconfig with its user's token replaced by :data:`OPERATOR_TOKEN`."""
    config = yaml.safe_load(plane.kubeconfig.read_text())
    config["users"][0]["user"]["token"] = OPERATOR_TOKEN
    path = directory / "operator-kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def apply_fleet(cluster: Cluster, url: str, allow: list[str]) -> None:
    items = [
        {
            "apiVersion": "mcp-operator.dev/v1alpha1",
            "kind": "MCPServer",
            "metadata": {"name": f"time-{index:02d}", "namespace": NAMESPACE},
            "spec": {"mode": "external", "url": url, **({"toolsAllow": allow} if allow else {})},
        }
        for index in range(SERVERS)
    ]
    cluster.kubectl(
        "apply",
        "--server-side",
        "--field-manager=e2e",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
    )


def converged(cluster: Cluster, generation: int, tools: int) -> list[dict[str, Any]] | None:
    result = cluster.kubectl("get", "mcpservers", "-n", NAMESPACE, "-o", "json", check=False)
    if result.returncode != 0:
        return None  # the API server is still coming back
    items: list[dict[str, Any]] = json.loads(result.stdout)["items"]
    done = [
        s
        for s in items
        if s["status"].get("observedGeneration") == generation
        and condition(s, "Ready").get("status") == "True"
        and s["status"].get("toolCount") == tools
    ]
    return items if len(done) == len(items) == SERVERS else None


def where_the_fleet_stands(cluster: Cluster, plane: ControlPlane, operator: OperatorProcess) -> str:
    """What a failed wait prints: each server's generation, observed generation, Ready and
    tool count; whether the operator still runs (then every thread's stack: it prints them
    on SIGUSR1) or its exit code; the operator's warnings and errors, and its last lines
    with repeats collapsed; the last lines of the API server's log."""
    if (code := operator.process.poll()) is not None:
        state = f"the operator exited with {code}"
    else:
        operator.process.send_signal(signal.SIGUSR1)
        with contextlib.suppress(AssertionError):  # the log follows, stacks or not
            eventually("the stacks", lambda: "most recent call first" in operator.log(), 5)
        state = "the operator runs; its stacks are at the end of its log"
    log = operator.log().splitlines()
    said = [line for line in log if "[WARNING" in line or "[ERROR" in line][:60]
    result = cluster.kubectl("get", "mcpservers", "-n", NAMESPACE, "-o", "json", check=False)
    lines = [f"kubectl get mcpservers: exit {result.returncode}"]
    if result.returncode == 0:
        for s in json.loads(result.stdout)["items"]:
            ready = condition(s, "Ready")
            lines.append(
                f"  {s['metadata']['name']}: generation {s['metadata']['generation']}, observed "
                f"{s['status'].get('observedGeneration')}, Ready={ready.get('status')} "
                f"({ready.get('reason')}), {s['status'].get('toolCount')} tools"
            )
    assert plane.directory is not None
    apiserver = (plane.directory / "kube-apiserver.log").read_text(errors="replace").splitlines()
    return "\n".join(
        [
            *lines,
            state,
            "--- the operator's warnings and errors (the first 60) ---",
            *said,
            "--- the operator's log (last 150 lines, repeats collapsed) ---",
            *collapsed(log)[-150:],
            "--- kube-apiserver log (last 30 lines) ---",
            *apiserver[-30:],
        ]
    )


def collapsed(lines: list[str]) -> list[str]:
    """``lines`` with a run of lines that differ only in their timestamp shown once, counted."""
    out: list[str] = []
    previous, repeats = None, 0
    for line in [*lines, None]:
        key = line.split("] ", 1)[-1] if line is not None else None
        if key == previous:
            repeats += 1
            continue
        if repeats:
            out.append(f"    (the line above {repeats} more times)")
        if line is not None:
            out.append(line)
        previous, repeats = key, 0
    return out


def announced(cluster: Cluster) -> Counter[tuple[str, str]]:
    counted: Counter[tuple[str, str]] = Counter()
    for event in cluster.get_json("events", "-n", NAMESPACE)["items"]:
        counted[(event["involvedObject"]["name"], event["reason"])] += int(event.get("count") or 1)
    return counted


@pytest.mark.parametrize(
    ("process", "sig", "allow", "tools"),
    [
        ("kube-apiserver", signal.SIGKILL, ["get_*"], 1),
        ("etcd", signal.SIGTERM, [], 2),
    ],
    ids=["kube-apiserver-killed", "etcd-restarted"],
)
def test_the_fleet_converges_after_a_control_plane_restart_mid_reconcile(
    fleet: tuple[Cluster, str, OperatorProcess],
    plane: ControlPlane,
    process: str,
    sig: int,
    allow: list[str],
    tools: int,
) -> None:
    cluster, url, operator = fleet
    generation = cluster.get_json("mcpserver/time-00", "-n", NAMESPACE)["metadata"]["generation"]
    before = announced(cluster)
    apply_fleet(cluster, url, allow)
    time.sleep(0.3)  # the operator has the change and is reconciling
    outage = restart(plane, process, sig=sig, down=1.0)
    print(f"\n{process}: serving again {outage:.1f} s after the fault")
    started = time.monotonic()
    eventually(
        f"the fleet to converge after {process} came back",
        lambda: converged(cluster, generation + 1, tools),
        float(os.environ.get("FAULT_CONVERGE_SECONDS", "120")),
        interval=1.0,
        explain=lambda: where_the_fleet_stands(cluster, plane, operator),
    )
    print(f"{process}: the fleet converged {time.monotonic() - started:.1f} s later")
    # One Event per transition: each server's tools changed once, announced once. An Event
    # follows its status write and is retried while the API server cannot store it (etcd
    # just back), so it may land after the status: wait for all, then check none is twice.
    expected = {(f"time-{index:02d}", "ToolsChanged"): 1 for index in range(SERVERS)}
    new = eventually(
        "an Event for every server's change",
        lambda: announced(cluster) - before,
        float(os.environ.get("FAULT_CONVERGE_SECONDS", "120")),
        until=lambda counted: expected.keys() <= counted.keys(),
        interval=1.0,
    )
    print(f"{process}: every change announced {time.monotonic() - started:.1f} s after it")
    time.sleep(1.0)  # a second Event for the same change would come as soon as the first
    new = announced(cluster) - before
    odd = sorted({name for (name, reason), n in new.items() if (reason, n) != ("ToolsChanged", 1)})
    said = [line for line in operator.log().splitlines() if any(name in line for name in odd)]
    assert dict(new) == expected, (
        f"Events of this change: {dict(new)}\nThe operator's lines about {odd}:\n"
        + "\n".join(said[-80:])
    )


def test_the_fleet_converges_after_the_api_server_refused_the_operators_credential(
    fleet: tuple[Cluster, str, OperatorProcess], plane: ControlPlane
) -> None:
    """An API server that refuses the operator's credential for a while (a token webhook or
    OIDC issuer that is down, a token file rewritten): kopf's requests get 401, it asks the
    operator for the credential again and gets the same one, and the operator carries on
    once the API server accepts it again -- it neither stops nor hangs."""
    cluster, url, operator = fleet
    server = cluster.get_json("mcpserver/time-00", "-n", NAMESPACE)
    generation = server["metadata"]["generation"]
    allow, tools = ([], 2) if server["spec"].get("toolsAllow") else (["get_*"], 1)
    logins = operator.log().count("Re-authentication has been initiated")
    grant_operator_token(plane, granted=False)
    restart(plane, "kube-apiserver", sig=signal.SIGKILL)
    try:
        eventually(
            "the operator's credential refused and asked for again",
            lambda: operator.log().count("Re-authentication has been initiated") > logins + 1,
            60,
            explain=lambda: where_the_fleet_stands(cluster, plane, operator),
        )
        apply_fleet(cluster, url, allow)  # while the operator cannot see it
        time.sleep(2.0)
    finally:
        grant_operator_token(plane, granted=True)
        restart(plane, "kube-apiserver", sig=signal.SIGKILL)
    started = time.monotonic()
    eventually(
        "the fleet to converge once the operator's credential was accepted again",
        lambda: converged(cluster, generation + 1, tools),
        float(os.environ.get("FAULT_CONVERGE_SECONDS", "120")),
        interval=1.0,
        explain=lambda: where_the_fleet_stands(cluster, plane, operator),
    )
    print(f"token accepted again: the fleet converged {time.monotonic() - started:.1f} s later")
    assert operator.process.poll() is None, "the operator exited"
