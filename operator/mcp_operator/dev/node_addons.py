"""The local node's add-ons: cluster DNS (CoreDNS) and a NetworkPolicy enforcer (kube-router).

:func:`add_ons` is what :class:`mcp_operator.dev.node.Node` starts once the node is
Ready and kube-proxy runs (the :class:`~mcp_operator.dev.addon.AddOn` protocol):

- :class:`ClusterDns`: CoreDNS as a host process on the cluster bridge address, port 53,
  answering for ``cluster.local`` (and the reverse zones of the Pod and Service ranges)
  from the API server with a ServiceAccount of its own (list/watch Services,
  EndpointSlices, Namespaces), and REFUSED for every other name: no forwarder, so no DNS
  query leaves the machine. The ``kube-system/kube-dns`` Service (ClusterIP
  :data:`~mcp_operator.dev.node_addons_config.DNS_SERVICE_IP`) points at it, and the
  kubelet's ``clusterDNS`` at that Service, as in any cluster.
- :class:`NetworkPolicyEnforcer`: kube-router's firewall only
  (``--run-firewall --run-router=false --run-service-proxy=false``) with a ServiceAccount
  of its own (read-only), programming iptables (``filter`` table) and ipsets for the
  node's Pods. Its chains and ipsets are removed on stop and, after a crash, by the next
  node's start (:meth:`NetworkPolicyEnforcer.clean_leftovers`).

kube-router v2.1.0 is the one version of its v2 module the Go module proxy serves, and it
has reported security flaws: it is a part of this local test cluster only (every listener
on loopback or the cluster's bridge; its health and metrics servers are off), never
shipped, recommended or run anywhere else. Builds: ``make node-addons``
(``hack/build-node-addons.sh``). What the files and objects say is
:mod:`mcp_operator.dev.node_addons_config`'s.
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
from pathlib import Path
from typing import Any

import yaml

from mcp_operator.dev import node_addons_config as config
from mcp_operator.dev import pki
from mcp_operator.dev.addon import AddOn, NodeError, NodeHandle
from mcp_operator.dev.node_config import SERVICE_CIDR
from mcp_operator.dev.processes import BIN_DIR, free_port, stop_process_group, tail

logger = logging.getLogger(__name__)

ADDON_BINARIES = ("coredns", "kube-router")
"""What ``make node-addons`` (``hack/build-node-addons.sh``) builds into the cache's bin."""
FIREWALL_TOOLS = ("iptables", "iptables-save", "iptables-restore", "ipset")
"""What kube-router's firewall runs (``make node-packages``), and its cleanup too."""
START_TIMEOUT_SECONDS = 60.0
TOKEN_SECONDS = pki.VALID_DAYS * 24 * 3600
"""Lifetime of an add-on's ServiceAccount token: as long as the node's certificates."""


def add_ons() -> list[AddOn]:
    """The node's add-ons, in start order: cluster DNS, then the NetworkPolicy enforcer."""
    return [ClusterDns(), NetworkPolicyEnforcer()]


def missing() -> str | None:
    """Why the add-ons cannot run here, with the command that fixes it, or ``None``."""
    absent = [name for name in ADDON_BINARIES if not os.access(BIN_DIR / name, os.X_OK)]
    if absent:
        return f"{', '.join(absent)} not built in {BIN_DIR}; run `make node-addons`"
    tools = [name for name in FIREWALL_TOOLS if shutil.which(name) is None]
    if tools:
        return f"{', '.join(tools)} not installed; run `make node-packages`"
    return None


def _require() -> None:
    why = missing()
    if why is not None:
        raise NodeError(f"Cannot start the node's add-ons: {why}")


def _run(*argv: str, input: str | None = None, check: bool = True) -> str:
    result = subprocess.run(
        argv, input=input, capture_output=True, text=True, check=False, timeout=60
    )
    if check and result.returncode != 0:
        raise NodeError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


_PATHS = {
    "ServiceAccount": "/api/v1/namespaces/{namespace}/serviceaccounts/{name}",
    "Service": "/api/v1/namespaces/{namespace}/services/{name}",
    "EndpointSlice": "/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices/{name}",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}",
}
"""Where each kind of object the add-ons apply lives in the API."""


def _request(
    node: NodeHandle, path: str, body: dict[str, Any], method: str, content_type: str
) -> Any:
    """One call to the API server as the cluster's admin (the node's admin kubeconfig)."""
    admin = yaml.safe_load(node.admin_kubeconfig.read_text())
    token = admin["users"][0]["user"]["token"]
    request = urllib.request.Request(
        f"{node.server}{path}",
        method=method,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": content_type},
    )
    context = ssl.create_default_context(cafile=str(node.ca_cert))
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as error:
        detail = error.read().decode(errors="replace")[:500]
        raise NodeError(f"{method} {path} failed ({error.code}): {detail}") from None


def _apply(node: NodeHandle, objects: list[dict[str, Any]]) -> None:
    """Server-side apply (one field manager, conflicts forced: these objects are ours)."""
    for obj in objects:
        metadata = obj["metadata"]
        path = _PATHS[obj["kind"]].format(
            namespace=metadata.get("namespace", ""), name=metadata["name"]
        )
        query = f"?fieldManager={config.FIELD_MANAGER}&force=true"
        _request(node, path + query, obj, "PATCH", "application/apply-patch+yaml")


def _token(node: NodeHandle, name: str) -> str:
    """A token of the ServiceAccount ``kube-system/<name>`` (TokenRequest)."""
    path = f"/api/v1/namespaces/{config.DNS_NAMESPACE}/serviceaccounts/{name}/token"
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": TOKEN_SECONDS},
    }
    answer = _request(node, path, body, "POST", "application/json")
    return str(answer["status"]["token"])


def _identity(node: NodeHandle, name: str, rules: list[dict[str, Any]]) -> Path:
    """A ServiceAccount with ``rules`` for add-on ``name``, and a kubeconfig with its token."""
    _apply(node, config.identity_objects(name, rules))
    token = _token(node, name)
    directory = node.directory / name
    directory.mkdir(parents=True, exist_ok=True)
    token_file = directory / "token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    kubeconfig = directory / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(config.token_kubeconfig(node.server, node.ca_cert, token_file))
    )
    kubeconfig.chmod(0o600)
    return kubeconfig


def _wait(
    node: NodeHandle, process: subprocess.Popen[bytes], name: str, done: Any, what: str
) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise NodeError(
                f"{name} exited with code {process.returncode}:\n{tail(node.log(name))}"
            )
        if done():
            return
        time.sleep(0.1)
    raise NodeError(f"Timed out after {START_TIMEOUT_SECONDS:.0f}s waiting for {what}")


# ------------------------------------------------------------------------ cluster DNS


class ClusterDns:
    """CoreDNS on the node's bridge address, port 53, for the cluster domain only."""

    name = "coredns"

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None

    def kubelet_settings(self) -> dict[str, Any]:
        return {"clusterDNS": [config.DNS_SERVICE_IP], "clusterDomain": config.CLUSTER_DOMAIN}

    def clean_leftovers(self, node: NodeHandle) -> None:
        """Nothing on the host: CoreDNS is a recorded process (the node kills it) and its
        files are in the node's folder."""

    def start(self, node: NodeHandle) -> None:
        _require()
        started = time.monotonic()
        kubeconfig = _identity(node, self.name, config.COREDNS_RULES)
        ready_port = free_port()
        corefile = node.directory / self.name / "Corefile"
        corefile.write_text(
            config.corefile(
                bind=node.ip,
                kubeconfig=kubeconfig,
                ready_port=ready_port,
                reverse_cidrs=[node.cluster_cidr, node.service_cidr],
            )
        )
        _apply(node, config.dns_service_objects(node.ip))
        self._process = node.spawn(
            self.name, [str(BIN_DIR / "coredns"), "-conf", str(corefile), "-dns.port", "53"]
        )
        _wait(
            node,
            self._process,
            self.name,
            lambda: _http_ok(f"http://127.0.0.1:{ready_port}/ready"),
            "CoreDNS ready (synced with the API server)",
        )
        logger.info(
            "Started cluster DNS on %s:53 (Service %s) in %.2fs",
            node.ip,
            config.DNS_SERVICE_IP,
            time.monotonic() - started,
        )

    def stop(self, node: NodeHandle) -> None:
        if self._process is not None:
            stop_process_group(self._process, grace=3.0, name=self.name)
            self._process = None


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            status: int = answer.status
            return status == 200
    except (urllib.error.URLError, OSError):
        return False


# ------------------------------------------------------------------------ NetworkPolicies


def firewall_leftovers() -> list[str]:
    """kube-router's chains and ipsets on the host now; empty once :func:`remove_firewall` ran."""
    if shutil.which("iptables-save") is None or shutil.which("ipset") is None:
        return []
    table = _run("iptables-save", "-t", "filter", check=False)
    found = [f"iptables chain {chain}" for chain in config.firewall_chains(table)]
    found += [f"ipset {name}" for name in config.firewall_ipsets(_run("ipset", "list", "-n"))]
    return found


def remove_firewall() -> None:
    """Remove kube-router's firewall chains (and the jumps into them) and its ipsets."""
    if shutil.which("iptables-save") is None or shutil.which("ipset") is None:
        return  # nothing could have made them
    removal = config.firewall_removal(_run("iptables-save", "-t", "filter", check=False))
    if removal is not None:
        _run("iptables-restore", "--noflush", input=removal)
        _remove_empty_filter_table()
    for name in config.firewall_ipsets(_run("ipset", "list", "-n")):
        _run("ipset", "destroy", name, check=False)
    left = firewall_leftovers()
    if left:
        logger.warning("Could not remove all of kube-router's firewall: %s", ", ".join(left))


def _remove_empty_filter_table() -> None:
    """iptables' nf_tables backend leaves its ``ip filter`` table behind, empty, once
    kube-router's chains are gone: remove it too when nothing else is in it."""
    if "nf_tables" not in _run("iptables", "--version", check=False):
        return
    if config.filter_table_is_empty(_run("iptables-save", "-t", "filter", check=False)):
        _run("nft", "delete", "table", "ip", "filter", check=False)


class NetworkPolicyEnforcer:
    """kube-router's firewall for the node's Pods (local test cluster only: see the module)."""

    name = "kube-router"

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self.taken_back: list[str] = []
        """What an earlier node's firewall had left: found, then removed, by
        :meth:`clean_leftovers`."""
        self.left_behind: list[str] | None = None
        """What of the firewall was still on the host right after :meth:`stop` removed it
        (read while the node still holds the lock); ``None`` before a stop."""

    @property
    def pid(self) -> int | None:
        """kube-router's pid while this add-on runs it."""
        return self._process.pid if self._process is not None else None

    def kubelet_settings(self) -> dict[str, Any]:
        return {}

    def clean_leftovers(self, node: NodeHandle) -> None:
        self.taken_back = firewall_leftovers()
        if self.taken_back:
            logger.info("Removed what an earlier kube-router left: %s", ", ".join(self.taken_back))
        remove_firewall()

    def start(self, node: NodeHandle) -> None:
        _require()
        started = time.monotonic()
        kubeconfig = _identity(node, self.name, config.KUBE_ROUTER_RULES)
        _bridge_traffic_through_iptables()
        environment = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")}
        environment["NODE_NAME"] = node.name
        self._process = node.spawn(
            self.name,
            [
                str(BIN_DIR / "kube-router"),
                f"--kubeconfig={kubeconfig}",
                f"--hostname-override={node.name}",
                "--run-firewall",
                "--run-router=false",
                "--run-service-proxy=false",
                "--run-loadbalancer=false",
                "--enable-ipv4=true",
                "--enable-ipv6=false",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                # No listener at all: its health server would bind every address.
                "--health-port=0",
                "--metrics-port=0",
                "--v=1",
            ],
            env=environment,
        )
        _wait(
            node,
            self._process,
            self.name,
            _firewall_programmed,
            "kube-router's firewall chains in the filter table",
        )
        logger.info("Started the NetworkPolicy enforcer in %.2fs", time.monotonic() - started)

    def stop(self, node: NodeHandle) -> None:
        if self._process is not None:
            stop_process_group(self._process, grace=3.0, name=self.name)
            self._process = None
        try:
            remove_firewall()
            self.left_behind = firewall_leftovers()
        except Exception as error:  # a stop must not raise: say what is left instead
            self.left_behind = [f"(could not remove the firewall: {error})"]


BRIDGE_NF_CALL_IPTABLES = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")


def _bridge_traffic_through_iptables() -> None:
    """Pod-to-Pod traffic on the cluster bridge passes iptables (and so the firewall) only
    with ``br_netfilter`` and this setting on; the node records and restores it."""
    if not BRIDGE_NF_CALL_IPTABLES.exists() and shutil.which("modprobe"):
        _run("modprobe", "br_netfilter", check=False)
    if not BRIDGE_NF_CALL_IPTABLES.exists():
        raise NodeError(
            "Cannot enforce NetworkPolicies: the kernel has no br_netfilter "
            f"({BRIDGE_NF_CALL_IPTABLES} is missing), so bridged Pod traffic bypasses iptables"
        )
    BRIDGE_NF_CALL_IPTABLES.write_text("1")


def _firewall_programmed() -> bool:
    """kube-router has made its chains and jumps to them from the built-in ones."""
    table = _run("iptables-save", "-t", "filter", check=False)
    return all(
        f"-j KUBE-ROUTER-{chain}" in table and f"\n-A {chain} " in table
        for chain in ("INPUT", "FORWARD", "OUTPUT")
    )
