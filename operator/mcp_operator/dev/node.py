"""The local cluster's one real node: containerd 2.x, the kubelet, kube-proxy, a registry.

:class:`Node` is what ``ControlPlane(node=True)`` (:mod:`mcp_operator.dev.cluster`)
starts next to the API server, in two steps:

1. :meth:`Node.prepare`, before the API server: take the machine-wide lock
   (:class:`~mcp_operator.dev.node_lock.NodeLock`, held for the node's whole life:
   the kubelet, containerd's shims, kube-proxy and libcni use hard-coded host paths, so
   one node per machine), take back what an earlier node left
   (:func:`mcp_operator.dev.node_host.clean_host`), record the kernel settings, and make
   the cluster bridge with the node's address (the API server listens there too, so that
   Pods reach it), the Service range routed to it, and the traffic guard;
2. :meth:`Node.start`, once the API server answers: certificates from the cluster CA;
   a plain-HTTP registry on the bridge address (``crane registry serve``,
   :attr:`Node.registry`) with the sandbox image in it (:mod:`mcp_operator.dev.node_registry`);
   containerd with a private root, state and socket; the kubelet (webhook authentication
   and authorization, cgroupfs on cgroup v1); kube-proxy in nftables mode once the node
   is Ready; then the add-ons (:class:`~mcp_operator.dev.addon.AddOn`: cluster DNS and the
   NetworkPolicy enforcer live in :mod:`mcp_operator.dev.node_addons`).

Every process runs in its own process group with a parent-death signal and is recorded
(pid and start time) in :data:`mcp_operator.dev.node_host.STATE_PATH` as it starts;
:meth:`Node.stop` stops the add-ons, then the processes newest first, then takes back
everything on the host and restores the kernel settings. What the files say is
:mod:`mcp_operator.dev.node_config`'s.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mcp_operator.dev import node_addons, node_config, node_host, node_registry, pki
from mcp_operator.dev.addon import AddOn, NodeError
from mcp_operator.dev.node_config import CLUSTER_CIDR, NODE_IP, POD_CIDR, SERVICE_CIDR, Layout
from mcp_operator.dev.node_lock import LOCK_TIMEOUT_SECONDS, NodeLock
from mcp_operator.dev.node_needs import CNI_BIN_DIR, missing
from mcp_operator.dev.processes import (
    BIN_DIR,
    free_port,
    http_ok,
    spawn_logged,
    stop_process_group,
    tail,
)

logger = logging.getLogger(__name__)

NODE_NAME = "mcp-operator-node"
NODE_DIR = Path("/var/lib/mcp-operator-node")
"""The node's own folder: one node per machine, and a short path (containerd's sockets live
there, and a unix socket path must stay under 104 bytes). Emptied at every start; after a
stop only ``logs/`` stays, for the curious."""
READY_TIMEOUT_SECONDS = 60.0


def default_add_ons() -> list[AddOn]:
    """The node's add-ons (:func:`mcp_operator.dev.node_addons.add_ons`): cluster DNS and the
    NetworkPolicy enforcer."""
    return node_addons.add_ons()


# ------------------------------------------------------------------------ the node


@dataclass
class Node:
    """One real node for the local control plane; :meth:`prepare`, :meth:`start`, :meth:`stop`.

    ``directory`` holds everything of the node's own (containerd root and state, kubelet
    root, certificates, configuration, logs in ``logs/``); after :meth:`stop` only the logs.
    """

    directory: Path = NODE_DIR
    name: str = NODE_NAME
    add_ons: list[AddOn] | None = None
    """``None``: :func:`default_add_ons`."""
    lock_timeout: float = LOCK_TIMEOUT_SECONDS
    ip: str = field(init=False, default=NODE_IP)
    """The node's InternalIP: the cluster bridge's address."""
    pod_cidr: str = field(init=False, default=POD_CIDR)
    cluster_cidr: str = field(init=False, default=CLUSTER_CIDR)
    service_cidr: str = field(init=False, default=SERVICE_CIDR)
    registry: str = field(init=False, default="")
    """``10.244.0.1:PORT``: the plain-HTTP registry containerd pulls from (and Pods reach)."""
    server: str = field(init=False, default="")
    ca_cert: Path = field(init=False)
    admin_kubeconfig: Path = field(init=False)
    started_seconds: float = field(init=False, default=0.0)
    """How long :meth:`start` took (certificates to the last add-on)."""
    locked_at: float = field(init=False, default=0.0)
    """When :meth:`prepare` got the node lock (``time.monotonic``): start times count from it."""
    lock_waited_seconds: float = field(init=False, default=0.0)
    taken_back: list[str] = field(init=False, default_factory=list)
    """What an earlier node had left on the host, found (and removed) by :meth:`prepare`."""
    left_behind: list[str] = field(init=False, default_factory=list)
    """What :meth:`stop` could not take back (read before it released the lock): empty."""
    layout: Layout = field(init=False)
    _lock: NodeLock = field(init=False, default_factory=NodeLock)
    _state: node_host.NodeState | None = field(init=False, default=None)
    _processes: list[tuple[str, subprocess.Popen[bytes]]] = field(init=False, default_factory=list)
    _started_add_ons: list[AddOn] = field(init=False, default_factory=list)
    _token: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.layout = Layout(
            directory=self.directory,
            bin_dir=BIN_DIR,
            cni_bin_dir=CNI_BIN_DIR,
            runc=Path(shutil.which("runc") or "/usr/bin/runc"),
        )
        if self.add_ons is None:
            self.add_ons = default_add_ons()

    # -- lifecycle ---------------------------------------------------------------------

    def prepare(self) -> None:
        """Lock, clean what an earlier node left, record kernel settings, make the bridge."""
        why = missing()
        if why is not None:
            raise NodeError(f"Cannot start the node: {why}")
        waiting = time.monotonic()
        self._lock.acquire(self.lock_timeout)
        self.locked_at = time.monotonic()
        self.lock_waited_seconds = self.locked_at - waiting
        previous = node_host.NodeState.load()
        self.taken_back = node_host.leftovers(Path(previous.directory) if previous else None)
        if self.taken_back:
            logger.info(
                "Took back what an earlier node (pid %s) left: %s",
                previous.owner if previous else "unknown",
                "; ".join(self.taken_back[:10]),
            )
        node_host.clean_host(previous, self.directory)
        if previous is not None and previous.directory:
            node_host.remove_tree(Path(previous.directory))
        for add_on in self.add_ons or []:
            add_on.clean_leftovers(self)
        node_host.remove_tree(self.directory)
        # Keys, tokens and kubeconfigs live below: nobody else may even look in. (Containers do
        # not walk this path: their root and volumes are mounted into their own namespace.)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.directory.chmod(0o700)
        for path in (self.layout.log_dir, self.layout.pki_dir, self.layout.cni_conf_dir):
            path.mkdir(parents=True, exist_ok=True)
        self._state = node_host.NodeState(
            owner=os.getpid(), directory=str(self.directory), sysctls=node_host.read_sysctls()
        )
        self._state.save()
        bridge = node_host.BRIDGE
        node_host.run("ip", "link", "add", bridge, "type", "bridge")
        node_host.run("ip", "addr", "add", f"{NODE_IP}/{POD_CIDR.split('/')[1]}", "dev", bridge)
        node_host.run("ip", "link", "set", bridge, "up")
        node_host.run("ip", "route", "add", SERVICE_CIDR, "dev", bridge)
        node_host.run(
            "nft", "-f", "-", input=node_config.guard_ruleset(node_host.GUARD_TABLE, bridge)
        )

    def start(self, *, server: str, ca_cert: Path, ca_key: Path, token: str) -> None:
        """Start the registry, containerd, the kubelet, kube-proxy and the add-ons; return
        once the node is Ready and schedulable. ``token`` is the admin's bearer token."""
        started = time.monotonic()
        self.server, self.ca_cert, self._token = server, ca_cert, token
        layout = self.layout
        pki_dir = layout.pki_dir
        self.admin_kubeconfig = self.directory / "admin.kubeconfig"
        self._write_admin_kubeconfig()
        pki.issue(
            ca_cert,
            ca_key,
            pki_dir / "kubelet-client.crt",
            pki_dir / "kubelet-client.key",
            common_name=f"system:node:{self.name}",
            organizations=("system:nodes",),
            client=True,
        )
        pki.issue(
            ca_cert,
            ca_key,
            pki_dir / "kubelet.crt",
            pki_dir / "kubelet.key",
            common_name=self.name,
            server=True,
            dns_names=(self.name,),
            ip_addresses=(NODE_IP,),
        )
        pki.issue(
            ca_cert,
            ca_key,
            pki_dir / "kube-proxy.crt",
            pki_dir / "kube-proxy.key",
            common_name="system:kube-proxy",
            client=True,
        )

        self._start_registry()
        sandbox = node_registry.push_sandbox_image(self.directory, self.registry)

        hosts = layout.registry_hosts_dir / self.registry / "hosts.toml"
        hosts.parent.mkdir(parents=True, exist_ok=True)
        hosts.write_text(node_config.registry_hosts(self.registry))
        network = node_config.cni_network(node_host.BRIDGE, SERVICE_CIDR, layout.cni_ipam_dir)
        (layout.cni_conf_dir / "10-mcp-operator-node.conflist").write_text(json.dumps(network))
        layout.containerd_config.write_text(node_config.containerd_config(layout, sandbox))
        self.spawn(
            "containerd", [str(BIN_DIR / "containerd"), f"--config={layout.containerd_config}"]
        )
        self._wait(lambda: layout.containerd_socket.is_socket(), "containerd socket")

        extra: dict[str, Any] = {}
        for add_on in self.add_ons or []:
            extra.update(add_on.kubelet_settings())
        kubelet_dir = layout.kubelet_dir
        kubelet_dir.mkdir(parents=True, exist_ok=True)
        config = node_config.kubelet_config(
            layout,
            ca_cert=ca_cert,
            serving_cert=pki_dir / "kubelet.crt",
            serving_key=pki_dir / "kubelet.key",
            healthz_port=free_port(),
            extra=extra,
        )
        (kubelet_dir / "config.yaml").write_text(yaml.safe_dump(config))
        self._write_kubeconfig(kubelet_dir / "kubeconfig", "kubelet-client")
        self.spawn(
            "kubelet",
            [
                str(BIN_DIR / "kubelet"),
                f"--config={kubelet_dir / 'config.yaml'}",
                f"--kubeconfig={kubelet_dir / 'kubeconfig'}",
                f"--root-dir={kubelet_dir / 'root'}",
                f"--cert-dir={pki_dir}",
                f"--hostname-override={self.name}",
                f"--node-ip={NODE_IP}",
                "--v=1",
            ],
        )
        kubelet_started = time.monotonic()
        self._wait(self._ready, f"node {self.name} Ready")
        # The kubelet sets its kernel settings once, as it starts (panic on oops, reboot after
        # 10 s, overcommit always), and never checks them again: give the machine its own back
        # now rather than at stop, so that an oops on a shared machine does not reboot it.
        if self._state is not None:
            node_host.write_sysctls(
                {k: v for k, v in self._state.sysctls.items() if k in node_host.KUBELET_SYSCTLS}
            )
        logger.info(
            "Node %s Ready %.2fs after the kubelet started",
            self.name,
            time.monotonic() - kubelet_started,
        )

        self._publish_registry()

        proxy_dir = layout.kube_proxy_dir
        proxy_dir.mkdir(parents=True, exist_ok=True)
        self._write_kubeconfig(proxy_dir / "kubeconfig", "kube-proxy")
        proxy_healthz = free_port()
        proxy_config = node_config.kube_proxy_config(
            proxy_dir / "kubeconfig", self.name, proxy_healthz, free_port()
        )
        (proxy_dir / "config.yaml").write_text(yaml.safe_dump(proxy_config))
        self.spawn(
            "kube-proxy",
            [str(BIN_DIR / "kube-proxy"), f"--config={proxy_dir / 'config.yaml'}", "--v=1"],
            env={**os.environ, "PATH": str(node_host.only_nft(proxy_dir / "bin"))},
        )
        self._wait(
            lambda: http_ok(f"http://127.0.0.1:{proxy_healthz}/healthz"), "kube-proxy healthz"
        )

        for add_on in self.add_ons or []:
            self._started_add_ons.append(add_on)
            add_on.start(self)
        self.started_seconds = time.monotonic() - started
        logger.info("Started node %s in %.2fs", self.name, self.started_seconds)

    def stop(self) -> None:
        """Stop add-ons and processes, take back everything on the host, release the lock."""
        self.stop_processes()
        self.take_back_host()

    def stop_processes(self) -> None:
        """Stop the add-ons, then the node's processes newest first (Pods go with containerd);
        the host keeps the bridge and the rules until :meth:`take_back_host`."""
        for add_on in reversed(self._started_add_ons):
            try:
                add_on.stop(self)
            except Exception:
                logger.exception("Add-on %s failed to stop", add_on.name)
        self._started_add_ons.clear()
        for name, process in reversed(self._processes):
            stop_process_group(process, grace=3.0, name=name)
        self._processes.clear()

    def take_back_host(self) -> None:
        """Take back everything on the host (the bridge, routes, rules, mounts, cgroups) and
        the kernel settings, then release the lock. The API server listens on the bridge's
        address: a control plane stops its processes before this (see
        :meth:`mcp_operator.dev.cluster.ControlPlane.stop`)."""
        if self._lock.held:
            node_host.clean_host(self._state, self.directory)
            # Checked while the lock is held: after it, the host is the next node's.
            self.left_behind = node_host.leftovers(self.directory)
            if self._state is not None:
                now = node_host.read_sysctls(tuple(self._state.sysctls))
                self.left_behind += [
                    f"sysctl {name}={now.get(name)} (was {value})"
                    for name, value in self._state.sysctls.items()
                    if now.get(name) != value
                ]
            if self.left_behind:
                logger.warning("The node left behind: %s", "; ".join(self.left_behind))
            self._state = None
            for entry in self.directory.iterdir() if self.directory.is_dir() else []:
                if entry.is_dir() and entry != self.layout.log_dir:
                    node_host.remove_tree(entry)
                elif not entry.is_dir():
                    entry.unlink()
            self._lock.release()

    # -- for add-ons and tests -------------------------------------------------------------

    def spawn(
        self, name: str, argv: list[str], env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start a process of the node: own process group, killed if we die, log in
        ``logs/NAME.log``, recorded for crash cleanup, stopped with the node."""
        process = spawn_logged(argv, self.layout.log_dir / f"{name}.log", env)
        self._processes.append((name, process))
        if self._state is not None:
            self._state.record(name, process.pid)
        return process

    @property
    def pids(self) -> list[int]:
        return [process.pid for _, process in self._processes]

    def log(self, name: str) -> Path:
        return self.layout.log_dir / f"{name}.log"

    # -- helpers -------------------------------------------------------------------------

    def _check_alive(self) -> None:
        for name, process in self._processes:
            if process.poll() is not None:
                raise NodeError(
                    f"{name} exited with code {process.returncode}:\n{tail(self.log(name))}"
                )

    def _wait(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            self._check_alive()
            if done():
                return
            time.sleep(0.1)
        raise NodeError(f"Timed out after {READY_TIMEOUT_SECONDS:.0f}s waiting for {what}")

    def _api(self, path: str, method: str = "GET", body: Any = None) -> Any:
        request = urllib.request.Request(
            f"{self.server}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Authorization": f"Bearer {self._token}",
                "Content-Type": "application/merge-patch+json"
                if method == "PATCH"
                else "application/json",
            },
        )
        context = ssl.create_default_context(cafile=str(self.ca_cert))
        with urllib.request.urlopen(request, timeout=5, context=context) as answer:
            return json.loads(answer.read())

    def _ready(self) -> bool:
        """Ready, and schedulable: the node-lifecycle controller removed the not-ready taint."""
        try:
            node = self._api(f"/api/v1/nodes/{self.name}")
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return False
            raise
        except (urllib.error.URLError, OSError):
            return False
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in node.get("status", {}).get("conditions", [])
        )
        tainted = any(
            t.get("key", "").startswith("node.kubernetes.io/")
            for t in node.get("spec", {}).get("taints", [])
        )
        if ready and not node.get("spec", {}).get("podCIDR"):
            # As nodeipam would (it is off: one node, one range): the Pod range on the Node.
            self._api(
                f"/api/v1/nodes/{self.name}",
                method="PATCH",
                body={"spec": {"podCIDR": POD_CIDR, "podCIDRs": [POD_CIDR]}},
            )
        return ready and not tainted

    def _publish_registry(self) -> None:
        """The registry as KEP-1755 says a local cluster publishes it (:mod:`.node_registry`)."""
        self._api(
            "/api/v1/namespaces/kube-public/configmaps",
            method="POST",
            body=node_registry.hosting_config_map(self.registry),
        )

    def _start_registry(self) -> None:
        # On the bridge address: containerd (on the host) and Pods (the in-cluster operator
        # reading image configurations) reach it by the same name.
        self.registry = f"{NODE_IP}:{free_port()}"
        self.spawn(
            "registry", [str(BIN_DIR / "crane"), "registry", "serve", f"--address={self.registry}"]
        )
        self._wait(lambda: http_ok(f"http://{self.registry}/v2/"), "the registry")

    def _write_kubeconfig(self, path: Path, identity: str) -> None:
        config = node_config.kubeconfig(
            self.server,
            self.ca_cert,
            self.layout.pki_dir / f"{identity}.crt",
            self.layout.pki_dir / f"{identity}.key",
        )
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)

    def _write_admin_kubeconfig(self) -> None:
        config = node_config.kubeconfig(self.server, self.ca_cert, Path(), Path())
        config["users"] = [{"name": "node", "user": {"token": self._token}}]
        self.admin_kubeconfig.write_text(yaml.safe_dump(config))
        self.admin_kubeconfig.chmod(0o600)
