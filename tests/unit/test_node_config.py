"""The local cluster node's configuration files, the node lock and the node's record.

The rendering is pure (``mcp_operator.dev.node_config``): each test reads back what a
file says the way its reader would (TOML for containerd, the dicts the kubelet and
kube-proxy get as YAML) and checks the settings the node depends on. The lock and the
record are checked on files of the test's own (a real ``flock``, no root needed).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from mcp_operator.dev import node_config, node_host, node_needs
from mcp_operator.dev.addon import NodeError
from mcp_operator.dev.node_config import NODE_IP, POD_CIDR, Layout
from mcp_operator.dev.node_lock import NodeLock

SERVICE_CIDR = "10.96.0.0/16"


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    return Layout(
        directory=tmp_path / "node",
        bin_dir=tmp_path / "bin",
        cni_bin_dir=tmp_path / "cni",
        runc=Path("/usr/bin/runc"),
    )


def test_containerd_runs_our_shim_with_restricted_oom_scores_and_keeps_to_its_folder(
    layout: Layout,
) -> None:
    config = tomllib.loads(node_config.containerd_config(layout, "10.244.0.1:5000/pause:1"))
    assert config["version"] == 3
    for path in (config["root"], config["state"], config["grpc"]["address"]):
        assert path.startswith(f"{layout.directory}/")
    runtime = config["plugins"]["io.containerd.cri.v1.runtime"]
    assert runtime["restrict_oom_score_adj"] is True
    runc = runtime["containerd"]["runtimes"]["runc"]
    assert runc["runtime_path"] == str(layout.bin_dir / "containerd-shim-runc-v2")
    assert runc["options"] == {
        "SystemdCgroup": False,
        "BinaryName": "/usr/bin/runc",
        "Root": str(layout.containerd_dir / "runc"),
    }
    assert runtime["cni"]["bin_dirs"] == [str(layout.cni_bin_dir)]
    assert runtime["cni"]["conf_dir"] == str(layout.cni_conf_dir)
    images = config["plugins"]["io.containerd.cri.v1.images"]
    assert images["pinned_images"]["sandbox"] == "10.244.0.1:5000/pause:1"
    assert images["registry"]["config_path"] == str(layout.registry_hosts_dir)
    assert config["plugins"]["io.containerd.grpc.v1.cri"]["stream_server_address"] == "127.0.0.1"


def test_the_registry_is_trusted_over_plain_http_for_pulls_only() -> None:
    hosts = tomllib.loads(node_config.registry_hosts("10.244.0.1:5000"))
    assert hosts["server"] == "http://10.244.0.1:5000"
    assert hosts["host"]["http://10.244.0.1:5000"]["capabilities"] == ["pull", "resolve"]


def test_pods_get_the_service_range_through_the_bridge_and_no_default_route(
    tmp_path: Path,
) -> None:
    network = node_config.cni_network("mcpnode0", SERVICE_CIDR, tmp_path / "ipam")
    bridge, portmap, loopback = network["plugins"]
    assert (bridge["type"], portmap["type"], loopback["type"]) == ("bridge", "portmap", "loopback")
    assert bridge["bridge"] == "mcpnode0"
    assert bridge["ipMasq"] is False
    ipam = bridge["ipam"]
    assert ipam["ranges"] == [[{"subnet": POD_CIDR, "gateway": NODE_IP}]]
    assert ipam["routes"] == [{"dst": SERVICE_CIDR}]
    assert {"dst": "0.0.0.0/0"} not in ipam["routes"]
    assert ipam["dataDir"] == str(tmp_path / "ipam")


def test_the_kubelet_api_refuses_anonymous_clients_and_listens_on_the_bridge_only(
    layout: Layout, tmp_path: Path
) -> None:
    config = node_config.kubelet_config(
        layout,
        ca_cert=tmp_path / "ca.crt",
        serving_cert=tmp_path / "kubelet.crt",
        serving_key=tmp_path / "kubelet.key",
        healthz_port=10248,
    )
    assert config["authentication"] == {
        "anonymous": {"enabled": False},
        "webhook": {"enabled": True},
        "x509": {"clientCAFile": str(tmp_path / "ca.crt")},
    }
    assert config["authorization"] == {"mode": "Webhook"}
    assert (config["address"], config["readOnlyPort"]) == (NODE_IP, 0)
    assert config["healthzBindAddress"] == "127.0.0.1"
    assert config["tlsCertFile"] == str(tmp_path / "kubelet.crt")
    # cgroup v1 with cgroupfs as this machine has it; no rules of the kubelet's own.
    assert (config["cgroupDriver"], config["failCgroupV1"]) == ("cgroupfs", False)
    assert config["failSwapOn"] is False
    assert config["makeIPTablesUtilChains"] is False
    assert config["containerRuntimeEndpoint"] == f"unix://{layout.containerd_socket}"
    assert config["resolvConf"] == ""


def test_add_ons_settings_reach_the_kubelet_last(layout: Layout, tmp_path: Path) -> None:
    config = node_config.kubelet_config(
        layout,
        ca_cert=tmp_path / "ca.crt",
        serving_cert=tmp_path / "kubelet.crt",
        serving_key=tmp_path / "kubelet.key",
        healthz_port=10248,
        extra={"clusterDNS": ["10.96.0.10"], "clusterDomain": "example.local"},
    )
    assert config["clusterDNS"] == ["10.96.0.10"]
    assert config["clusterDomain"] == "example.local"


def test_kube_proxy_runs_nftables_with_node_ports_on_the_bridge_only(tmp_path: Path) -> None:
    config = node_config.kube_proxy_config(tmp_path / "kubeconfig", "n1", 10256, 10249)
    assert config["mode"] == "nftables"
    assert config["hostnameOverride"] == "n1"
    assert config["nodePortAddresses"] == [f"{NODE_IP}/32"]
    assert config["healthzBindAddress"] == "127.0.0.1:10256"
    assert config["metricsBindAddress"] == "127.0.0.1:10249"
    assert config["clientConnection"]["kubeconfig"] == str(tmp_path / "kubeconfig")


def test_the_guard_drops_forwarding_between_the_bridge_and_every_other_interface() -> None:
    ruleset = node_config.guard_ruleset(("inet", "guard"), "mcpnode0")
    assert ruleset.startswith("table inet guard {")
    assert "type filter hook forward" in ruleset
    assert 'iifname "mcpnode0" oifname != "mcpnode0" counter drop' in ruleset
    assert 'oifname "mcpnode0" iifname != "mcpnode0" counter drop' in ruleset
    # Traffic within the bridge (Pod to Pod, Service hairpin) is not matched.
    assert "policy accept" in ruleset


def test_a_kubeconfig_names_the_client_certificate(tmp_path: Path) -> None:
    config = node_config.kubeconfig(
        "https://10.244.0.1:6443", tmp_path / "ca", tmp_path / "c", tmp_path / "k"
    )
    assert config["clusters"][0]["cluster"] == {
        "server": "https://10.244.0.1:6443",
        "certificate-authority": str(tmp_path / "ca"),
    }
    assert config["users"][0]["user"] == {
        "client-certificate": str(tmp_path / "c"),
        "client-key": str(tmp_path / "k"),
    }


def test_a_second_lock_waits_then_names_the_holder(tmp_path: Path) -> None:
    path = tmp_path / "node.lock"
    first, second = NodeLock(path), NodeLock(path)
    first.acquire(timeout=0)
    assert path.read_text().strip() == str(os.getpid())
    with pytest.raises(NodeError, match=rf"held by pid {os.getpid()} "):
        second.acquire(timeout=0.6)
    assert not second.held
    # The other side: once the holder lets go, the lock is free for the next node.
    first.release()
    second.acquire(timeout=0)
    assert second.held
    second.release()


def test_the_node_record_survives_a_round_trip_and_names_processes_by_start_time(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.json"
    state = node_host.NodeState(owner=1, directory="/n", sysctls={"kernel.panic": "1"})
    state.processes.append(
        node_host.RecordedProcess("self", os.getpid(), node_host.start_time(os.getpid()))
    )
    state.save(path)
    loaded = node_host.NodeState.load(path)
    assert loaded == state
    assert loaded.processes[0].started > 0
    assert node_host.start_time(2**22 + 1) == -1  # no such pid
    assert node_host.NodeState.load(tmp_path / "absent.json") is None


def test_a_node_that_cannot_start_says_what_to_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(node_needs.os, "geteuid", lambda: 1000)
    assert node_needs.missing() == (
        "the local cluster's node needs root (containers, mounts, cgroups, nftables)"
    )
    monkeypatch.setattr(node_needs.os, "geteuid", lambda: 0)
    monkeypatch.setattr(node_needs, "BIN_DIR", tmp_path / "bin")
    monkeypatch.setattr(node_needs, "CNI_BIN_DIR", tmp_path / "cni")
    why = node_needs.missing()
    assert why is not None
    assert why.startswith("kubelet, kube-proxy, kube-scheduler, containerd, ")
    assert "cni/bin/bridge" in why
    assert why.endswith("; run `make node`")
