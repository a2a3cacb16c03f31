"""What the local cluster's node changes on the host, recorded, and taken back.

A kubelet, containerd and its shims, the CNI plugins and kube-proxy touch things
outside any folder we give them: ``kubepods`` cgroups under every cgroup v1
controller, mounts, veths on the cluster bridge, nftables tables (kube-proxy's
``ip``/``ip6 kube-proxy`` and the node's own guard), kernel settings
(``vm.overcommit_memory``, ``kernel.panic``, ``net.ipv4.ip_forward``, ...) and host
paths they hard-code (``/var/lib/kubelet``, ``/var/log/containers``,
``/var/lib/cni``, ``/run/containerd/s``).

This module owns that list. :class:`NodeState` is written to :data:`STATE_PATH`
before the node changes anything (the kernel settings as they were, then every
process as it starts), so that :func:`clean_host` — run by every node start with
the machine-wide lock held, and by every stop — can take back what a node left,
even one whose Python process was killed. Starting and stopping the node's
processes is :mod:`mcp_operator.dev.node`'s job.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mcp_operator.dev.addon import NodeError

logger = logging.getLogger(__name__)

STATE_PATH = Path("/run/mcp-operator-node.json")
"""The running (or last crashed) node's record; only the holder of the node lock writes it."""

BRIDGE = "mcpnode0"
"""The cluster bridge: the node's address and every Pod's veth are on it."""

GUARD_TABLE = ("inet", "mcp-operator-node-guard")
"""The nftables table of the traffic guard (:func:`guard_ruleset`)."""

NFT_TABLES = (("ip", "kube-proxy"), ("ip6", "kube-proxy"), GUARD_TABLE)
"""Every nftables table the node makes: kube-proxy's (nftables mode) and the guard."""

KUBELET_SYSCTLS = (
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
)
"""What the kubelet sets once as it starts (protectKernelDefaults: false); restored once Ready."""

SYSCTLS = (
    *KUBELET_SYSCTLS,
    # The bridge CNI plugin (isGateway) turns forwarding on.
    "net.ipv4.ip_forward",
    # Only present when br_netfilter is loaded (the NetworkPolicy enforcer may load it).
    "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables",
)
"""Kernel settings the node's parts change; recorded before the node starts, restored after."""

HOST_PATHS = (
    Path("/var/lib/kubelet"),  # device-plugins/kubelet.sock, whatever --root-dir says
    Path("/var/log/containers"),  # the kubelet's symlinks to container logs
    Path("/var/log/pods"),
    Path("/var/lib/cni"),  # libcni's cached results
    Path("/run/containerd/s"),  # shim sockets, whatever containerd's state dir is
    Path("/run/containerd/runc/k8s.io"),
)
"""Host paths the kubelet, libcni and containerd hard-code: removed after every node."""

CGROUP_ROOT = Path("/sys/fs/cgroup")
KUBEPODS = "kubepods"
SHIM = "containerd-shim-runc-v2"


@dataclass
class RecordedProcess:
    name: str
    pid: int
    started: int
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22):
    with the pid it names one process, never a later one that reused the pid."""


@dataclass
class NodeState:
    """What :func:`clean_host` needs to take a node back, even after a crash."""

    owner: int
    """The pid of the Python process that started the node."""
    directory: str
    """The node's own folder (containerd root and state, kubelet root, logs, ...)."""
    sysctls: dict[str, str] = field(default_factory=dict)
    """Kernel settings as they were before the node started."""
    processes: list[RecordedProcess] = field(default_factory=list)

    def save(self, path: Path = STATE_PATH) -> None:
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(json.dumps(asdict(self), indent=1))
        temporary.replace(path)

    @classmethod
    def load(cls, path: Path = STATE_PATH) -> NodeState | None:
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            logger.warning("Ignored an unreadable node record %s: %s", path, error)
            return None
        return cls(
            owner=int(raw.get("owner", 0)),
            directory=str(raw.get("directory", "")),
            sysctls={str(k): str(v) for k, v in raw.get("sysctls", {}).items()},
            processes=[RecordedProcess(**p) for p in raw.get("processes", [])],
        )

    def record(self, name: str, pid: int) -> None:
        self.processes.append(RecordedProcess(name=name, pid=pid, started=start_time(pid)))
        self.save()


# -------------------------------------------------------------------- reading the host


def start_time(pid: int) -> int:
    """Field 22 of ``/proc/PID/stat``, or -1 when the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return -1
    # The command name (field 2) may hold spaces and parentheses: split after the last ")".
    return int(stat.rsplit(")", 1)[1].split()[19])


def read_sysctls(names: tuple[str, ...] = SYSCTLS) -> dict[str, str]:
    """The current value of each setting that exists here."""
    values = {}
    for name in names:
        path = Path("/proc/sys") / name.replace(".", "/")
        with contextlib.suppress(OSError):
            values[name] = path.read_text().strip()
    return values


def write_sysctls(values: dict[str, str]) -> None:
    for name, value in values.items():
        path = Path("/proc/sys") / name.replace(".", "/")
        try:
            if path.read_text().strip() != value:
                path.write_text(value)
        except OSError as error:
            logger.warning("Could not restore %s=%s: %s", name, value, error)


def kubepods_cgroups() -> list[Path]:
    """Every ``kubepods`` cgroup the kubelet made (cgroupfs driver), one per controller."""
    if not CGROUP_ROOT.is_dir():
        return []
    return sorted(p for p in CGROUP_ROOT.glob(f"*/{KUBEPODS}") if p.is_dir())


def mounts_under(prefixes: list[Path]) -> list[str]:
    """Mount points at or below any of ``prefixes``, deepest first."""
    found = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        point = line.split()[1].replace("\\040", " ")
        if any(point == str(p) or point.startswith(f"{p}/") for p in prefixes):
            found.append(point)
    return sorted(set(found), key=lambda p: (p.count("/"), p), reverse=True)


def links_on_bridge(bridge: str = BRIDGE) -> list[str]:
    """The interfaces enslaved to the cluster bridge (the Pods' veths)."""
    directory = Path("/sys/class/net") / bridge / "brif"
    return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []


def nft_tables() -> list[tuple[str, str]]:
    """The node's nftables tables that exist now (``nft`` missing: none can)."""
    if shutil.which("nft") is None:
        return []
    listed = subprocess.run(
        ["nft", "list", "tables"], capture_output=True, text=True, check=False, timeout=10
    ).stdout.split("\n")
    present = {tuple(line.split()[1:3]) for line in listed if line.startswith("table ")}
    return [table for table in NFT_TABLES if table in present]


def leftovers(directory: Path | None = None) -> list[str]:
    """What a node would have left on the host now; empty once :func:`clean_host` ran."""
    found = [f"nft table {family} {name}" for family, name in nft_tables()]
    found += [f"cgroup {path}" for path in kubepods_cgroups()]
    found += [f"link {name}" for name in links_on_bridge()]
    if Path("/sys/class/net", BRIDGE).exists():
        found.append(f"bridge {BRIDGE}")
    prefixes = [*HOST_PATHS, *([directory] if directory else [])]
    found += [f"mount {point}" for point in mounts_under(prefixes)]
    found += [f"path {path}" for path in HOST_PATHS if path.exists()]
    found += [f"process {pid} ({name})" for pid, name in _node_processes(directory)]
    return found


def _node_processes(directory: Path | None) -> list[tuple[int, str]]:
    """Shims started for a node: our build of the shim (its path is in the cache), or any
    shim whose command line names the node's folder (its containerd socket)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        binary = argv[0].decode(errors="replace")
        if not binary.endswith(SHIM):
            continue
        text = b" ".join(argv).decode(errors="replace")
        if "mcp-operator" in binary or (directory is not None and str(directory) in text):
            found.append((int(entry.name), SHIM))
    return found


# -------------------------------------------------------------------- taking it back


def _kill_recorded(state: NodeState) -> None:
    for process in reversed(state.processes):
        if start_time(process.pid) != process.started:
            continue  # gone, or the pid now names another process
        logger.info("Killed %s (pid %d) left by an earlier node", process.name, process.pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(process.pid, signal.SIGKILL)


def _kill_pods() -> None:
    """Every process in a ``kubepods`` cgroup (Pod containers, sandboxes), thawed first."""
    for freezer in (CGROUP_ROOT / "freezer" / KUBEPODS).glob("**/freezer.state"):
        with contextlib.suppress(OSError):
            freezer.write_text("THAWED")
    pids: set[int] = set()
    for root in kubepods_cgroups():
        for procs in root.glob("**/cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(line) for line in procs.read_text().split())
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _kill_shims(directory: Path | None) -> None:
    for pid, _ in _node_processes(directory):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _unmount(prefixes: list[Path]) -> None:
    for point in mounts_under(prefixes):
        result = subprocess.run(["umount", point], capture_output=True, check=False, timeout=30)
        if result.returncode != 0:
            subprocess.run(["umount", "-l", point], capture_output=True, check=False, timeout=30)


def _remove_cgroups() -> None:
    """Remove every ``kubepods`` tree, leaves first; a cgroup with a dying task gets retries."""
    for _ in range(20):
        remaining = False
        for root in kubepods_cgroups():
            for directory in sorted(
                (p for p in root.glob("**/") if p.is_dir()),
                key=lambda p: len(p.parts),
                reverse=True,
            ):
                try:
                    directory.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    remaining = True
        if not remaining:
            return
        time.sleep(0.1)
    logger.warning("Could not remove every kubepods cgroup: %s", kubepods_cgroups())


def _remove_links() -> None:
    for link in links_on_bridge():
        subprocess.run(["ip", "link", "del", link], capture_output=True, check=False, timeout=10)
    if Path("/sys/class/net", BRIDGE).exists():
        # Removes the Service CIDR route through it too.
        subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True, check=False, timeout=10)


def _remove_nft_tables() -> None:
    for family, name in nft_tables():
        subprocess.run(
            ["nft", "delete", "table", family, name], capture_output=True, check=False, timeout=10
        )


def clean_host(state: NodeState | None, directory: Path | None = None) -> None:
    """Take back everything a node changed on the host; with the node lock held.

    ``state`` is the node's record (or ``None`` when there is none: the hard-coded parts are
    still cleaned, kernel settings cannot be restored without it). The node's folders (the
    recorded one and ``directory``) are left to the caller, who may keep logs; what is
    mounted below them is unmounted.
    """
    folders = {Path(state.directory)} if state and state.directory else set()
    folders |= {directory} if directory else set()
    if state is not None:
        _kill_recorded(state)
    _kill_pods()
    # Our build of the shim, and any shim bound to a socket in one of the node's folders.
    _kill_shims(None)
    for folder in folders:
        _kill_shims(folder)
    _unmount([*HOST_PATHS, *folders])
    _remove_links()
    _remove_nft_tables()
    _remove_cgroups()
    if state is not None:
        write_sysctls(state.sysctls)
    for path in HOST_PATHS:
        shutil.rmtree(path, ignore_errors=True)
    for empty in (Path("/run/containerd/runc"), Path("/run/containerd")):
        with contextlib.suppress(OSError):
            empty.rmdir()
    STATE_PATH.unlink(missing_ok=True)


def run(*argv: str, input: str | None = None) -> None:
    """Run a host command (60 s at most); a :class:`NodeError` with its stderr if it fails."""
    result = subprocess.run(
        argv, input=input, capture_output=True, text=True, check=False, timeout=60
    )
    if result.returncode != 0:
        raise NodeError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr.strip()}")


def only_nft(directory: Path) -> Path:
    """A ``PATH`` folder holding ``nft`` alone, for kube-proxy.

    Whatever its mode, kube-proxy first "cleans up" the other modes: it loads ``ip_vs`` with
    ``modprobe``, flushes every IPVS virtual server of the machine (not only its own) and
    deletes the machine's ``KUBE-*`` iptables chains. Without ``modprobe``, ``ipvsadm`` or
    ``iptables`` on its ``PATH`` it skips that and leaves the machine's tables alone; nftables
    mode needs only ``nft``."""
    directory.mkdir(parents=True, exist_ok=True)
    nft = shutil.which("nft")
    if nft is None:
        raise NodeError("nft not found on PATH: run `make node-packages`")
    link = directory / "nft"
    if not link.exists():
        link.symlink_to(nft)
    return directory


def remove_tree(path: Path) -> None:
    """Remove a node folder, unless something is still mounted below it (then say so)."""
    if not path.exists():
        return
    still = mounts_under([path])
    if still:
        logger.warning("Left %s: still mounted below it: %s", path, ", ".join(still[:5]))
        return
    shutil.rmtree(path, ignore_errors=True)
