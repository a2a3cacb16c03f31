"""What e2e tests read of the Pods a real kubelet runs on the local node.

The kubelet and containerd of the node (``mcp_operator.dev.node``) run the Pods the
operator renders; a test only reads what they did:

- from the API server: :func:`wait_for_pod` (a phase, or any state a test names),
  :func:`container_status` (init, sidecar and app containers alike), :func:`started_at`
  (the kubelet's start time of a container), :func:`logs` (``kubectl logs``, which the
  API server fetches from the kubelet), :func:`describe` (status and Events, for a
  failing test's message);
- from the node itself, which is this machine: :func:`container_processes` (the
  processes of one container, found by its container ID in their cgroups) and
  :func:`process_identity` (the user, group, capabilities, seccomp mode, environment and
  root mount of a process) — what the kubelet's and the runtime's enforcement of a
  ``securityContext`` looks like from the outside.

Nothing here starts or stops a container: that is the kubelet's job alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.support.cluster import Cluster
from tests.support.waiting import eventually

Pod = dict[str, Any]


def get_pod(cluster: Cluster, namespace: str, name: str) -> Pod | None:
    """The Pod, or ``None`` while it does not exist."""
    found = cluster.kubectl("-n", namespace, "get", "-o", "json", f"pod/{name}", check=False)
    if found.returncode != 0:
        return None
    pod: Pod = json.loads(found.stdout)
    return pod


def only_pod(cluster: Cluster, namespace: str, selector: str, timeout: float = 60) -> Pod:
    """The one Pod matching ``selector`` (a Deployment's, say), once it exists."""

    def one() -> Pod:
        items: list[Pod] = cluster.get_json("-n", namespace, "pods", "-l", selector)["items"]
        live = [p for p in items if "deletionTimestamp" not in p["metadata"]]
        return live[0] if len(live) == 1 else {}

    return eventually(f"one Pod with {selector}", one, timeout)


def phase(pod: Mapping[str, Any] | None) -> str:
    return str((pod or {}).get("status", {}).get("phase", ""))


def is_ready(pod: Mapping[str, Any] | None) -> bool:
    """The Pod's ``Ready`` condition is true (every container passed its readiness probe)."""
    conditions = (pod or {}).get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def wait_for_pod(
    cluster: Cluster,
    namespace: str,
    name: str,
    until: Callable[[Pod], object],
    what: str,
    timeout: float = 120,
) -> Pod:
    """The Pod once ``until`` holds for it; a failure shows its status and Events."""
    return eventually(
        f"pod/{name}: {what}",
        lambda: get_pod(cluster, namespace, name) or {},
        timeout,
        until=lambda pod: bool(pod) and until(pod),
        interval=0.2,
        explain=lambda: describe(cluster, namespace, name),
    )


def wait_for_phase(
    cluster: Cluster, namespace: str, name: str, *phases: str, timeout: float = 120
) -> Pod:
    """The Pod once its phase is one of ``phases`` (``Running``, ``Succeeded``, ...)."""
    return wait_for_pod(
        cluster,
        namespace,
        name,
        lambda pod: phase(pod) in phases,
        f"phase {' or '.join(phases)}",
        timeout,
    )


def container_status(pod: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Container ``name``'s status (app, init or sidecar); ``{}`` until the kubelet writes one."""
    status = pod.get("status", {})
    for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        for entry in status.get(key) or []:
            if entry["name"] == name:
                return dict(entry)
    return {}


def _timestamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def started_at(pod: Mapping[str, Any], name: str) -> datetime | None:
    """When the kubelet started container ``name`` (its current or last run), to the second."""
    state = container_status(pod, name).get("state", {})
    for key in ("running", "terminated"):
        if "startedAt" in state.get(key, {}):
            return _timestamp(state[key]["startedAt"])
    return None


def condition_time(pod: Mapping[str, Any], kind: str) -> datetime | None:
    """When the Pod's condition ``kind`` last changed, to the second."""
    for entry in pod.get("status", {}).get("conditions", []):
        if entry["type"] == kind and entry.get("lastTransitionTime"):
            return _timestamp(entry["lastTransitionTime"])
    return None


def logs(
    cluster: Cluster, namespace: str, pod: str, container: str, *, previous: bool = False
) -> str:
    """``kubectl logs``: the container's output as the kubelet kept it."""
    args = ["-n", namespace, "logs", f"pod/{pod}", "-c", container]
    if previous:
        args.append("--previous")
    return cluster.kubectl(*args).stdout


def marked(log: str, mark: str) -> dict[str, Any]:
    """The JSON a program printed after ``mark`` (its first such line)."""
    line = next(x for x in log.splitlines() if x.startswith(mark + " "))
    found: dict[str, Any] = json.loads(line.removeprefix(mark + " "))
    return found


@dataclass(frozen=True)
class FinishedRun:
    """An AgentRun's Pod once it ended, and what its agent and bridge containers wrote."""

    pod: Pod
    agent_log: str
    bridge_log: str

    def show(self) -> str:
        """The tail of both logs, for a test's output should it fail."""
        return f"--- agent ---\n{self.agent_log[-3000:]}\n--- bridge ---\n{self.bridge_log[-3000:]}"


def finished_run(cluster: Cluster, namespace: str, run: str, timeout: float = 120) -> FinishedRun:
    """Wait until the run's Pod (named as the run) Succeeded or Failed; read its logs."""
    pod = wait_for_phase(cluster, namespace, run, "Succeeded", "Failed", timeout=timeout)
    return FinishedRun(
        pod, logs(cluster, namespace, run, "agent"), logs(cluster, namespace, run, "mcp-bridge")
    )


def describe(cluster: Cluster, namespace: str, name: str) -> str:
    """The Pod's status, its Events and its containers' last lines, for a failing test."""
    pod = get_pod(cluster, namespace, name)
    events = cluster.kubectl(
        "-n",
        namespace,
        "get",
        "events",
        f"--field-selector=involvedObject.name={name}",
        "-o",
        "custom-columns=TIME:.lastTimestamp,REASON:.reason,MESSAGE:.message",
        check=False,
    ).stdout
    output = cluster.kubectl(
        "-n",
        namespace,
        "logs",
        f"pod/{name}",
        "--all-containers",
        "--prefix",
        "--tail=40",
        check=False,
    )
    status = json.dumps((pod or {}).get("status"), indent=1)[-4000:]
    logs = (output.stdout + output.stderr)[-6000:]
    return f"status: {status}\nevents:\n{events[-3000:]}\nlogs:\n{logs}"


# -- the node's side -------------------------------------------------------------------


def container_id(pod: Mapping[str, Any], name: str) -> str:
    """The runtime's ID of container ``name`` (``containerd://ID`` without the scheme)."""
    full = str(container_status(pod, name).get("containerID", ""))
    assert "://" in full, f"container {name} has no container ID yet"
    return full.split("://", 1)[1]


def container_processes(identifier: str) -> list[int]:
    """The processes of the container with this runtime ID, on this machine (the node).

    The kubelet puts every container into cgroups named after its ID (cgroupfs driver),
    so the ID shows in ``/proc/PID/cgroup`` of each of its processes.
    """
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cgroups = (entry / "cgroup").read_text()
        except OSError:
            continue  # gone meanwhile
        if identifier in cgroups:
            pids.append(int(entry.name))
    return sorted(pids)


@dataclass(frozen=True)
class Identity:
    """What the kernel says of a process: its ``/proc/PID/status`` fields, its environment,
    and the options its root filesystem is mounted with."""

    status: dict[str, str]
    environ: dict[str, str]
    root_options: frozenset[str]

    @property
    def uid(self) -> int:
        return int(self.status["Uid"].split()[0])

    @property
    def gid(self) -> int:
        return int(self.status["Gid"].split()[0])

    @property
    def capabilities(self) -> int:
        """The effective capability set (0: every capability dropped)."""
        return int(self.status["CapEff"], 16)


def process_identity(pid: int) -> Identity:
    """What process ``pid`` runs as, read from ``/proc`` (needs root, as the node does)."""
    status = {
        key: value.strip()
        for key, value in (
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        )
    }
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    environ = dict(item.decode(errors="replace").split("=", 1) for item in raw if b"=" in item)
    options: frozenset[str] = frozenset()
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == "/":  # the mount point, as the process sees it
            options = frozenset(fields[5].split(","))  # the last mount on / wins
    return Identity(status, environ, options)


def main_process(pod: Mapping[str, Any], name: str) -> int:
    """The first process of container ``name`` (its PID 1 inside the container): the one of
    its processes whose parent is outside the container (the runtime's shim)."""
    identifier = container_id(pod, name)
    found = eventually(
        f"the processes of container {name}", lambda: container_processes(identifier), 10
    )
    roots = [pid for pid in found if _parent(pid) not in found]
    assert len(roots) == 1, f"container {name}: processes {found}, first ones {roots}"
    return roots[0]


def _parent(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    return 0
