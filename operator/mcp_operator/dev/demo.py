"""``make demo``: see the operator do its main job, an agent's tool calls governed and audited.

With no reachable cluster it starts the local cluster with its one real node
(:class:`~mcp_operator.dev.cluster.ControlPlane` with ``node=True``: kubelet, containerd, a
registry on loopback); with a kubeconfig that points at a cluster that answers it uses that.
Then, everything in namespace ``mcp-demo`` (:mod:`mcp_operator.dev.demo_objects`):

1. pushes the built images (``make images``: the operator, the compiled data plane,
   server-everything, the demo agent) into the cluster's registry and pins each by digest;
2. installs the chart (helm from ``make helm``): the operator runs *in* the cluster from its
   image, two replicas electing a leader, watching the demo's namespace only;
3. applies server-everything twice: as a managed stdio MCPServer (the operator runs it with the
   compiled stdio adapter, ``mcp-dataplane``) and as an external MCPServer in front of a
   Streamable HTTP Deployment the operator does not run; waits until both are ``Ready`` and
   prints their tools;
4. applies an AgentRun whose agent (``images/demo-agent``) lists its tools through the
   ``mcp-bridge`` sidecar (the compiled bridge, ``mcp-dataplane`` too), calls two allowed
   ones and tries one with an e-mail address under PII mode ``block``; prints the run's
   phases as they change (``PodPending → Running → Succeeded``), the agent container's
   output and the bridge container's audit lines for the three calls (``ok``, ``ok``,
   ``pii_blocked``).

Interactive runs then wait for Ctrl-C; ``--no-wait``, or no terminal on standard input, ends
after printing. The exit code is 0 when the run succeeded with those three audit outcomes.
On a cluster the demo did not start it removes what it installed when it ends; the local
cluster goes away whole.

A cluster that did not come from the demo must be able to pull the images: the demo pushes
them to the registry the cluster publishes (the KEP-1755 ConfigMap
``kube-public/local-registry-hosting``, which the local cluster writes) or to the one given
with ``--registry``; without either it says what to build and push. What it cannot bring
along is said up front, with the fix (:func:`~mcp_operator.dev.demo_cluster.missing_prerequisites`).
"""

from __future__ import annotations

import json
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from mcp_operator.controller.agentrun.render import AGENT_CONTAINER, BRIDGE_CONTAINER
from mcp_operator.dev import demo_objects as objects
from mcp_operator.dev import images
from mcp_operator.dev.demo_cluster import (
    CHART,
    CRDS,
    IMAGES,
    Target,
    cluster,
    helm_path,
    missing_prerequisites,
    reachable_kubeconfig,
    run_kubectl,
    say,
)
from mcp_operator.dev.processes import CACHE_DIR, ControlPlaneError, kubectl_path

SERVERS_TIMEOUT = 180.0
RUN_TIMEOUT = 180.0
NAMESPACE = objects.NAMESPACE


def _apply(kubeconfig: Path, *documents: Mapping[str, Any]) -> None:
    text = yaml.safe_dump_all([dict(d) for d in documents], sort_keys=False)
    run_kubectl(
        kubeconfig, "apply", "--server-side", "--field-manager=mcp-demo", "-f", "-", input=text
    )


def _push(target: Target) -> dict[str, str]:
    """Push the demo's images; name -> ``registry/name:tag@sha256:…``."""
    registry = target.registry
    say(f"Pushing the images to {registry}: {', '.join(IMAGES)}")
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
    found = run_kubectl(kubeconfig, "get", f"namespace/{NAMESPACE}", "-o", "json", check=False)
    if not found:
        return
    key, value = objects.DEMO_LABEL
    if json.loads(found)["metadata"].get("labels", {}).get(key) != value:
        raise RuntimeError(
            f"namespace {NAMESPACE} exists and is not the demo's (no label {key}={value}): "
            "the demo will not touch it"
        )
    say(f"Removing what an earlier demo left in namespace {NAMESPACE}")
    _uninstall(kubeconfig, helm)


def _uninstall(kubeconfig: Path, helm: str) -> None:
    release = [objects.RELEASE, f"--namespace={NAMESPACE}"]
    argv = [helm, f"--kubeconfig={kubeconfig}", "uninstall", *release, "--wait", "--timeout=60s"]
    subprocess.run(argv, capture_output=True, check=False)
    run_kubectl(kubeconfig, "delete", "namespace", NAMESPACE, "--timeout=90s", check=False)


def _install_operator(
    kubeconfig: Path, helm: str, operator_image: str, dataplane_image: str, workdir: Path
) -> None:
    values = workdir / "values.yaml"
    values.write_text(yaml.safe_dump(objects.chart_values(operator_image, dataplane_image)))
    say(f"Installing the chart: the operator in namespace {NAMESPACE}, from {operator_image}")
    began = time.monotonic()
    release = [objects.RELEASE, str(CHART), f"--namespace={NAMESPACE}", f"--values={values}"]
    argv = [helm, f"--kubeconfig={kubeconfig}", "upgrade", "--install", *release]
    result = subprocess.run(
        [*argv, "--wait", "--timeout=180s"], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"helm install failed: {result.stderr.strip()}")
    say(f"The operator is running ({time.monotonic() - began:.1f}s)")
    print(run_kubectl(kubeconfig, "-n", NAMESPACE, "get", "deployments,pods", "-o", "wide"))


def _diagnosis(kubeconfig: Path) -> str:
    """What to look at when something did not become Ready: the Pods, the servers' and the
    run's conditions, and the end of the operator's log."""
    namespaced = ["-n", NAMESPACE]
    pods = run_kubectl(kubeconfig, *namespaced, "get", "pods", "-o", "wide", check=False)
    wide = ["get", "mcpservers,agentruns", "-o", "wide"]
    objects_now = run_kubectl(kubeconfig, *namespaced, *wide, check=False)
    selector = f"--selector=app.kubernetes.io/instance={objects.RELEASE}"
    log = ["logs", selector, "--tail=20", "--prefix"]
    operator_log = run_kubectl(kubeconfig, *namespaced, *log, check=False)
    return f"{pods}\n{objects_now}\nThe operator's log (last lines):\n{operator_log}"


def _wait_servers(kubeconfig: Path) -> None:
    began = time.monotonic()
    for name in (objects.MANAGED, objects.EXTERNAL):
        ready = ["--for=condition=Ready", f"--timeout={SERVERS_TIMEOUT:.0f}s"]
        try:
            run_kubectl(kubeconfig, "-n", NAMESPACE, "wait", *ready, f"mcpserver/{name}")
        except RuntimeError as error:
            raise RuntimeError(f"{error}\n{_diagnosis(kubeconfig)}") from None
    say(f"Both servers Ready after {time.monotonic() - began:.1f}s")
    print(run_kubectl(kubeconfig, "-n", NAMESPACE, "get", "mcpservers", "-o", "wide"))
    for name in (objects.MANAGED, objects.EXTERNAL):
        status = json.loads(
            run_kubectl(kubeconfig, "-n", NAMESPACE, "get", f"mcpserver/{name}", "-o", "json")
        )["status"]
        info = status.get("serverInfo", {})
        say(
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
    say(f"The run did not end within {RUN_TIMEOUT:.0f}s (last phase {last})")
    print(_diagnosis(kubeconfig))
    return last


def _container_log(kubeconfig: Path, container: str) -> str:
    pod = f"pod/{objects.RUN}"
    return run_kubectl(kubeconfig, "-n", NAMESPACE, "logs", pod, "-c", container, check=False)


def _run_agent(kubeconfig: Path, agent_image: str) -> bool:
    run = objects.agentrun(agent_image)
    say(f"Applying the AgentRun {objects.RUN}: the demo agent, PII mode block for arguments")
    print(yaml.safe_dump(run, sort_keys=False))
    _apply(kubeconfig, run)
    applied = time.monotonic()
    say("Applied; the run's phases as the operator reports them:")
    final = _watch_phases(kubeconfig, applied)
    if final not in ("Succeeded", "Failed"):
        return False
    say(f"The agent's output (kubectl logs {objects.RUN} -c {AGENT_CONTAINER})")
    print(_container_log(kubeconfig, AGENT_CONTAINER).rstrip())
    say(f"The bridge's audit lines (kubectl logs {objects.RUN} -c {BRIDGE_CONTAINER})")
    bridge_log = _container_log(kubeconfig, BRIDGE_CONTAINER)
    records = objects.audit_records(bridge_log)
    for record in records:
        print(json.dumps(record, separators=(",", ":")))
    outcomes = [str(record.get("outcome")) for record in records]
    summary = ", ".join(f"{r.get('tool')} {r.get('outcome')}" for r in records)
    say(f"Audit: {summary or 'no calls'}")
    expected = final == "Succeeded" and outcomes == objects.EXPECTED_OUTCOMES
    if not expected:
        say(
            f"Not as expected: the run {final}, audit outcomes {outcomes} "
            f"(expected Succeeded with {objects.EXPECTED_OUTCOMES})"
        )
    return expected


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def main(*, force_local: bool = False, wait: bool = True, registry: str | None = None) -> int:
    existing = None if force_local else reachable_kubeconfig()
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
        with cluster(existing, workdir, registry) as target:
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
                say("Installing the CRDs")
                run_kubectl(kubeconfig, "apply", "--server-side", "-f", str(CRDS))
                run_kubectl(kubeconfig, "wait", "--for=condition=Established", "-f", str(CRDS))
                _apply(kubeconfig, objects.namespace())
                _install_operator(
                    kubeconfig,
                    helm,
                    references["mcp-operator"],
                    references["mcp-dataplane"],
                    workdir,
                )
                say(
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
                print(
                    run_kubectl(kubeconfig, "-n", NAMESPACE, "get", "agentruns,pods", "-o", "wide")
                )
                say(f"The demo took {time.monotonic() - began:.1f}s")
                print(f"\nexport KUBECONFIG={kubeconfig}   # to look around; files in {workdir}")
                if wait:
                    say("Running. Press Ctrl-C to stop everything the demo started.")
                    while True:
                        time.sleep(3600)
            finally:
                if not target.ours:
                    say(f"Removing the release {objects.RELEASE} and namespace {NAMESPACE}")
                    _uninstall(kubeconfig, helm)
    except (ControlPlaneError, RuntimeError) as error:
        print(f"mcp-operator dev demo: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        if not expected:
            say("Interrupted")
            return 130
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    say("Stopped")
    return 0 if expected else 1
