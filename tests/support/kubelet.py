"""A stand-in for the kubelet, for one Pod at a time, in a network namespace the test owns.

The test control plane has no kubelet: Pods stay Pending. To send real traffic
to a managed MCPServer, a test takes the Pod the operator's Deployment produced
(read back from the API server), and this module does what a kubelet would:

- :func:`netns_host` makes a network namespace with a veth pair (the host side
  gets ``10.251.N.1``, the namespace ``10.251.N.2``) — an address only this test
  owns, so no traffic goes anywhere but loopback and this namespace;
- :func:`plan` turns the Pod spec into argv and environment per container,
  exactly as written there: ``$(VAR)`` references expanded, ``secretKeyRef``
  and ``fieldRef: status.podIP`` resolved, the image's entrypoint for
  containers without a ``command`` taken from a table the test provides;
  a container whose image the test has extracted (``rootfs``) runs chrooted into
  that filesystem, as the user its ``securityContext`` names, with the Pod's
  ``emptyDir`` mounts bound into it — so nothing of the host (no shell) is there;
- :meth:`NetnsHost.run_pod` runs the plan inside the namespace, in a private
  mount namespace where every ``emptyDir`` mount is a fresh tmpfs shared by
  the Pod's containers, and every ``configMap`` or ``secret`` volume mount a
  tmpfs holding the object's keys as files: init containers one after the
  other, native sidecars (init containers with ``restartPolicy: Always``)
  started and waited for until their startup probe answers, then the rest; the
  sidecars are stopped once the other containers have exited;
- :func:`report_running` writes the Pod's status (``podIP``, ``Ready``) as the
  kubelet would, so the endpoint controllers and the Deployment controller see
  a running Pod.

Linux and root only (``ip netns``, ``unshare``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp_operator.dev.cluster import stop_process_group

_counter = itertools.count(os.getpid() % 200)
_RUNNER = Path(__file__).with_name("pod_runner.py")


def available() -> str | None:
    """Why test hosts cannot be made here, or ``None`` when they can."""
    if sys.platform != "linux":
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "network namespaces need root: run the tests as root (`sudo -E make test-e2e`)"
    for tool, package in (("ip", "iproute2"), ("unshare", "util-linux")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed; run `apt-get install {package}`"
    return None


def _ip(*args: str, check: bool = True) -> None:
    subprocess.run(["ip", *args], check=check, capture_output=True)


@dataclass
class NetnsHost:
    """A network namespace with one veth pair; ``address`` is the namespace's side."""

    name: str
    address: str
    host_address: str
    _pods: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def run_pod(
        self,
        containers: list[dict[str, Any]],
        mounts: list[str],
        log: Path,
        files: Mapping[str, Mapping[str, str]] | None = None,
        hosts: Mapping[str, str] | None = None,
    ) -> None:
        """Start a Pod's containers (a :func:`plan`) inside this host; stopped at exit.
        ``files`` maps a mount path to the files it holds (:func:`volume_files`); ``hosts``
        maps names to addresses for the Pod's ``/etc/hosts``, as cluster DNS would answer
        (Service names, say)."""
        plan = {"containers": containers, "mounts": mounts, "files": files or {}}
        plan["hosts"] = dict(hosts or {})
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            json.dump(plan, handle)
        with log.open("ab") as output:
            process = subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    self.name,
                    "unshare",
                    "--mount",
                    "--propagation",
                    "private",
                    sys.executable,
                    str(_RUNNER),
                    handle.name,
                ],
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._pods.append(process)

    def stop_pods(self) -> None:
        for process in self._pods:
            stop_process_group(process, grace=15, name="test pod")
        self._pods.clear()


_NAMESPACE = re.compile(r"mcp-e2e-(\d+)-(\d+)$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_namespaces() -> None:
    """Delete the namespaces of test processes that are gone (killed before their cleanup
    ran, say); a veth pair goes with the namespace holding one of its ends."""
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for line in listing.splitlines():
        match = _NAMESPACE.match(line.split(" ", 1)[0])
        if match and not _alive(int(match.group(1))):
            _ip("netns", "del", match.group(0), check=False)


def _claim() -> tuple[str, int]:
    """A network namespace whose index no other is using: its veth pair ``mcpeN`` is
    created here, so an index taken by anyone else (a leftover, a parallel run) is
    skipped rather than fought over."""
    _remove_stale_namespaces()
    for _ in range(250):
        index = next(_counter) % 250
        name = f"mcp-e2e-{os.getpid()}-{index}"
        veth = f"mcpe{index}"
        if subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode:
            continue
        made = subprocess.run(
            ["ip", "link", "add", veth, "type", "veth", "peer", "name", f"{veth}p"],
            capture_output=True,
        )
        if made.returncode == 0:
            return name, index
        _ip("netns", "del", name, check=False)
    raise RuntimeError("no free test network index in 10.251.0.0/16 (mcpe0..mcpe249)")


@contextlib.contextmanager
def netns_host() -> Iterator[NetnsHost]:
    """A fresh network namespace with a veth pair, removed afterwards."""
    name, index = _claim()
    veth = f"mcpe{index}"
    host = NetnsHost(name, f"10.251.{index}.2", f"10.251.{index}.1")
    try:
        _ip("link", "set", f"{veth}p", "netns", name)
        _ip("addr", "add", f"{host.host_address}/30", "dev", veth)
        _ip("link", "set", veth, "up")
        _ip("netns", "exec", name, "ip", "addr", "add", f"{host.address}/30", "dev", f"{veth}p")
        _ip("netns", "exec", name, "ip", "link", "set", f"{veth}p", "up")
        _ip("netns", "exec", name, "ip", "link", "set", "lo", "up")
        yield host
    finally:
        host.stop_pods()
        _ip("link", "del", veth, check=False)
        _ip("netns", "del", name, check=False)


_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' expansion in command, args and env values: ``$(VAR)`` becomes the value
    (left as written when unknown), ``$$`` becomes ``$``, in one pass from the left."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _VAR.sub(one, text)


def plan(
    pod_spec: Mapping[str, Any],
    *,
    pod_ip: str,
    secret: Callable[[str, str], str],
    entrypoints: Mapping[str, list[str]],
    rootfs: Mapping[str, str] | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Containers (init first, marked) with argv and env, and the emptyDir mount paths.

    ``rootfs`` maps an image (as the Pod names it) to the directory it was extracted into;
    such a container gets ``root`` and the ``uid``/``gid`` it runs as."""
    empty_dirs = {v["name"] for v in pod_spec.get("volumes", []) if "emptyDir" in v}
    mounts: set[str] = set()
    containers = []
    for init, container in [
        *((True, c) for c in pod_spec.get("initContainers", [])),
        *((False, c) for c in pod_spec["containers"]),
    ]:
        env: dict[str, str] = {}
        for var in container.get("env", []):
            if "value" in var:
                env[var["name"]] = _expand(var["value"], env)
            elif "secretKeyRef" in var.get("valueFrom", {}):
                ref = var["valueFrom"]["secretKeyRef"]
                env[var["name"]] = secret(ref["name"], ref["key"])
            elif var.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "status.podIP":
                env[var["name"]] = pod_ip
            else:
                raise NotImplementedError(f"env source of {var['name']} is not supported here")
        command = container.get("command") or entrypoints[container["image"]]
        argv = [_expand(part, env) for part in [*command, *container.get("args", [])]]
        for mount in container.get("volumeMounts", []):
            if mount["name"] in empty_dirs and mount["mountPath"] != "/tmp":
                mounts.add(mount["mountPath"])
        sidecar = init and container.get("restartPolicy") == "Always"
        planned = {
            "name": container["name"],
            "init": init and not sidecar,
            "sidecar": sidecar,
            "ready_url": _startup_url(container, pod_ip) if sidecar else None,
            "argv": argv,
            "env": env,
        }
        root = (rootfs or {}).get(container["image"])
        if root is not None:
            pod_security = pod_spec.get("securityContext") or {}
            security = {**pod_security, **(container.get("securityContext") or {})}
            planned |= {"root": root, "uid": security.get("runAsUser")}
            planned["gid"] = security.get("runAsGroup")
        containers.append(planned)
    return containers, sorted(mounts)


def _startup_url(container: Mapping[str, Any], pod_ip: str) -> str | None:
    """Where the kubelet would send a sidecar's HTTP startup probe."""
    get = (container.get("startupProbe") or {}).get("httpGet")
    if get is None:
        return None
    port = get["port"]
    if isinstance(port, str):
        port = next(p["containerPort"] for p in container["ports"] if p["name"] == port)
    return f"http://{pod_ip}:{port}{get.get('path', '/')}"


def volume_files(
    pod_spec: Mapping[str, Any],
    *,
    config_map: Callable[[str], Mapping[str, str]],
    secret_data: Callable[[str], Mapping[str, str]],
) -> dict[str, dict[str, str]]:
    """Mount path → file name → content, for every ``configMap`` and ``secret`` volume that a
    container mounts (every key of the object, as the kubelet projects it)."""
    sources: dict[str, Mapping[str, str]] = {}
    for volume in pod_spec.get("volumes", []):
        if "configMap" in volume:
            sources[volume["name"]] = config_map(volume["configMap"]["name"])
        elif "secret" in volume:
            sources[volume["name"]] = secret_data(volume["secret"]["secretName"])
    files: dict[str, dict[str, str]] = {}
    for container in [*pod_spec.get("initContainers", []), *pod_spec["containers"]]:
        for mount in container.get("volumeMounts", []):
            if mount["name"] in sources:
                files[mount["mountPath"]] = dict(sources[mount["name"]])
    return files


def report_running(kubectl: Callable[..., Any], namespace: str, pod: str, host: NetnsHost) -> None:
    """Do what the scheduler and a kubelet would: bind the Pod to a Node named after the
    test host, then write the Pod's status as running and ready on the host's address.

    The Node object matters: the EndpointSlice controller skips Pods whose Node it
    cannot find, and the API server's service proxy finds no endpoints then.
    """
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": host.name}}
    kubectl(
        "apply", "--server-side", "--field-manager=e2e-kubelet", "-f", "-", input=json.dumps(node)
    )
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod},
        "target": {"apiVersion": "v1", "kind": "Node", "name": host.name},
    }
    kubectl("-n", namespace, "create", "-f", "-", input=json.dumps(binding))
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conditions = [
        {"type": kind, "status": "True", "lastTransitionTime": now}
        for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
    ]
    status = {
        "status": {
            "phase": "Running",
            "podIP": host.address,
            "podIPs": [{"ip": host.address}],
            "hostIP": host.host_address,
            "startTime": now,
            "conditions": conditions,
        }
    }
    kubectl(
        "-n",
        namespace,
        "patch",
        "pod",
        pod,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(status),
    )


def forget_node(kubectl: Callable[..., Any], host: NetnsHost) -> None:
    """Remove the Node object :func:`report_running` made."""
    kubectl("delete", "node", host.name, "--wait=false", check=False)
