"""The configuration files of the local cluster's node, rendered from its layout.

Pure: every function takes paths and addresses and returns the text or dict of
one file (containerd's ``config.toml`` and registry ``hosts.toml``, the CNI
network list, the KubeletConfiguration, the KubeProxyConfiguration, a
kubeconfig, the nftables guard). No I/O, no clock; :mod:`mcp_operator.dev.node`
writes them and starts the processes that read them. Each setting that differs
from a default says why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

POD_CIDR = "10.244.0.0/24"
"""The one node's Pod range (host-local IPAM on the cluster bridge)."""
CLUSTER_CIDR = "10.244.0.0/16"
"""The cluster's Pod range; this node owns its first /24."""
NODE_IP = "10.244.0.1"
"""The cluster bridge's address: the node's InternalIP, the Pods' gateway, and where the API
server listens when a node runs (so that Pods reach it)."""
SERVICE_CIDR = "10.96.0.0/16"
"""The Service range: the API server allocates from it, the node routes it."""
KUBELET_PORT = 10250


@dataclass(frozen=True)
class Layout:
    """Where one node keeps everything: one folder, plus the binaries it runs."""

    directory: Path
    bin_dir: Path
    """containerd, its shim, the kubelet, ... (``$MCP_OPERATOR_CACHE/bin``)."""
    cni_bin_dir: Path
    """The CNI reference plugins (``$MCP_OPERATOR_CACHE/cni/bin``)."""
    runc: Path

    @property
    def containerd_dir(self) -> Path:
        return self.directory / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.containerd_dir / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        return self.containerd_dir / "config.toml"

    @property
    def registry_hosts_dir(self) -> Path:
        return self.containerd_dir / "certs.d"

    @property
    def cni_conf_dir(self) -> Path:
        return self.directory / "cni" / "net.d"

    @property
    def cni_ipam_dir(self) -> Path:
        return self.directory / "cni" / "ipam"

    @property
    def kubelet_dir(self) -> Path:
        return self.directory / "kubelet"

    @property
    def kube_proxy_dir(self) -> Path:
        return self.directory / "kube-proxy"

    @property
    def pki_dir(self) -> Path:
        return self.directory / "pki"

    @property
    def log_dir(self) -> Path:
        return self.directory / "logs"


def containerd_config(layout: Layout, sandbox_image: str) -> str:
    """containerd 2.x (config version 3), every path private to this node."""
    c = layout.containerd_dir

    def q(value: object) -> str:
        return json.dumps(str(value))

    return f"""\
version = 3
root = {q(c / "root")}
state = {q(c / "state")}

[grpc]
  address = {q(layout.containerd_socket)}

[ttrpc]
  address = {q(str(layout.containerd_socket) + ".ttrpc")}

[plugins.'io.containerd.internal.v1.opt']
  path = {q(c / "opt")}

[plugins.'io.containerd.nri.v1.nri']
  disable = true

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = {q(sandbox_image)}
  [plugins.'io.containerd.cri.v1.images'.registry]
    # hosts.toml per registry: the node's own plain-HTTP registry on the bridge address.
    config_path = {q(layout.registry_hosts_dir)}

[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  # Root here may not lower OOM scores (no CAP_SYS_RESOURCE): without this runc fails with
  # "can't get final child's PID from pipe".
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = [{q(c / "cdi")}]
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      # Our own shim: found on PATH, Debian's 1.6 shim would not speak to containerd 2.
      runtime_path = {q(layout.bin_dir / "containerd-shim-runc-v2")}
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = {q(layout.runc)}
        Root = {q(c / "runc")}
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [{q(layout.cni_bin_dir)}]
    conf_dir = {q(layout.cni_conf_dir)}
    max_conf_num = 1

[plugins.'io.containerd.grpc.v1.cri']
  # kubectl exec/attach/port-forward streams: loopback only, any free port.
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""


def registry_hosts(registry: str) -> str:
    """containerd's ``hosts.toml`` for ``registry`` (``10.244.0.1:PORT``): plain HTTP."""
    return f"""\
server = "http://{registry}"

[host."http://{registry}"]
  capabilities = ["pull", "resolve"]
"""


def cni_network(bridge: str, service_cidr: str, ipam_dir: Path) -> dict[str, Any]:
    """The CNI network list: the reference bridge, host-local IPAM, portmap, loopback."""
    return {
        "cniVersion": "1.0.0",
        "name": "mcp-operator-node",
        "plugins": [
            {
                "type": "bridge",
                "bridge": bridge,
                "isGateway": True,
                # No NAT: nothing a Pod sends may leave the machine (the guard drops it).
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(ipam_dir),
                    "ranges": [[{"subnet": POD_CIDR, "gateway": NODE_IP}]],
                    # The Service range through the bridge; on purpose no default route.
                    "routes": [{"dst": service_cidr}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
            {"type": "loopback"},
        ],
    }


def kubelet_config(
    layout: Layout,
    *,
    ca_cert: Path,
    serving_cert: Path,
    serving_key: Path,
    healthz_port: int,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The KubeletConfiguration: cgroup v1 with cgroupfs, API on the bridge address only,
    webhook authentication and authorization (anonymous refused); ``extra`` from add-ons
    (cluster DNS, ...) is merged last."""
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # This machine has cgroup v1 only, and no systemd to delegate to.
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "address": NODE_IP,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "tlsCertFile": str(serving_cert),
        "tlsPrivateKeyFile": str(serving_key),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca_cert)},
        },
        "authorization": {"mode": "Webhook"},
        "podLogsDir": str(layout.kubelet_dir / "pod-logs"),
        "volumePluginDir": str(layout.kubelet_dir / "volume-plugins"),
        # No host DNS servers inside Pods: a name a Pod looks up never leaves the machine.
        "resolvConf": "",
        "clusterDomain": "cluster.local",
        # The CNI plugin and the guard own the rules; the kubelet adds none of its own.
        "makeIPTablesUtilChains": False,
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "registerNode": True,
        # A test machine: report status often, so that Ready and Pod phases show fast.
        "nodeStatusUpdateFrequency": "4s",
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
        # Disk thresholds a shared test machine can meet; images are small and few.
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "2%"},
        "imageGCHighThresholdPercent": 98,
        "imageGCLowThresholdPercent": 95,
        "shutdownGracePeriod": "0s",
    }
    config.update(extra or {})
    return config


def kube_proxy_config(
    kubeconfig: Path, node_name: str, healthz_port: int, metrics_port: int
) -> dict[str, Any]:
    """The KubeProxyConfiguration: nftables mode, NodePorts on the bridge address only."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "nftables",
        "hostnameOverride": node_name,
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "bindAddress": NODE_IP,
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
        "clusterCIDR": CLUSTER_CIDR,
        "nodePortAddresses": [f"{NODE_IP}/32"],
        # Leave the host's conntrack table sizes and timeouts alone.
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }


def kubeconfig(server: str, ca_cert: Path, client_cert: Path, client_key: Path) -> dict[str, Any]:
    """A kubeconfig that authenticates with a client certificate."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "local", "cluster": {"server": server, "certificate-authority": str(ca_cert)}}
        ],
        "users": [
            {
                "name": "node",
                "user": {"client-certificate": str(client_cert), "client-key": str(client_key)},
            }
        ],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "node"}}],
        "current-context": "local",
    }


def guard_ruleset(table: tuple[str, str], bridge: str) -> str:
    """The nftables table that keeps Pod traffic on the machine: nothing is forwarded
    between the cluster bridge and any other interface, either way."""
    family, name = table
    return f"""\
table {family} {name} {{
  chain forward {{
    type filter hook forward priority filter - 10; policy accept;
    iifname "{bridge}" oifname != "{bridge}" counter drop
    oifname "{bridge}" iifname != "{bridge}" counter drop
  }}
}}
"""
