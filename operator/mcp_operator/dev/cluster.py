"""The local control plane: real etcd, kube-apiserver and kube-controller-manager on loopback.

This module owns starting and stopping the three processes that
``hack/build-control-plane.sh`` builds from Go modules. It has :mod:`.pki` write a CA,
serving certificates and a service-account signing key, makes a static admin token (token
authentication), starts etcd, then kube-apiserver (TLS, RBAC authorization), then
kube-controller-manager (garbage collection, Deployment -> ReplicaSet -> Pod,
service-account tokens), writes a kubeconfig and waits for ``/readyz``. Without a node no
kubelet runs: Pods stay Pending; everything else is the real API server.

``ControlPlane(node=True)`` also runs one real node (:mod:`mcp_operator.dev.node`:
containerd, the kubelet, kube-proxy, a registry on the cluster bridge) and kube-scheduler;
the API server then authorizes with ``Node,RBAC``, admits with
``NodeRestriction``, dials the kubelet by its bridge address with a client
certificate, and listens on that address (so Pods reach it) instead of loopback;
the controller manager runs its node-lifecycle controller.

Every process is started by :func:`mcp_operator.dev.processes.spawn_logged` (its own process
group, a parent-death signal), so nothing outlives the Python process that started it, even
when that process is killed; :meth:`ControlPlane.stop` ends the groups in reverse order.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mcp_operator.dev import pki
from mcp_operator.dev.node import Node
from mcp_operator.dev.node_config import NODE_IP, SERVICE_CIDR
from mcp_operator.dev.processes import (
    ControlPlaneError,
    find_binary,
    free_port,
    spawn_logged,
    stop_process_group,
    tail,
)

logger = logging.getLogger(__name__)

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")
READY_TIMEOUT_SECONDS = 90.0
STOP_GRACE_SECONDS = 5.0
"""How long each process may take to end on SIGTERM before it is killed."""
WATCH_CLOSE_SECONDS = 2
"""On SIGTERM the API server closes its open watches within this many seconds (its own
informers' on loopback, an operator's, a kubelet's). By default it leaves them to its HTTP
server's shutdown, which waits up to a minute for a watch that nobody ends."""
KUBELET_CLIENT_USER = "kube-apiserver-kubelet-client"
"""The API server's identity towards the kubelet (its client certificate's CN)."""
DEV_IDENTITY = "mcp-operator-dev/mcp-operator"
"""The ServiceAccount the local cluster makes for an operator run from this machine
(``mcp-operator run --identity mcp-operator-dev/mcp-operator``)."""


class ControlPlane:
    """A running (or startable) local control plane; use as a context manager.

    ``directory`` holds certificates, etcd data, logs and the kubeconfig; a
    temporary directory is used (and removed at stop) when none is given.
    ``node=True`` also starts the one real node of this machine (:attr:`node`) and
    its registry (:attr:`registry`, ``10.244.0.1:PORT``); it needs root and ``make node``.
    """

    def __init__(
        self, directory: Path | None = None, keep_directory: bool = False, node: bool = False
    ) -> None:
        self.directory = directory
        self.keep_directory = keep_directory
        self.server = ""
        self.token = ""
        self.version: dict[str, Any] = {}
        self.node: Node | None = None
        """The node, when started with ``node=True`` (from :meth:`start` on)."""
        self.started_seconds = 0.0
        """How long :meth:`start` took, node included (from the moment it had the node lock)."""
        self.killed: list[str] = []
        """The processes :meth:`stop` had to SIGKILL (none, when each stops as it should)."""
        self._with_node = node
        self._processes: list[tuple[str, subprocess.Popen[bytes]]] = []
        self._owns_directory = False
        if self.directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="mcp-operator-cluster-"))
            self._owns_directory = not self.keep_directory
        self.directory.mkdir(parents=True, exist_ok=True)
        # Keys, the admin token and kubeconfigs live here: nobody else may even look in.
        self.directory.chmod(0o700)
        self.kubeconfig = self.directory / "kubeconfig"

    @property
    def registry(self) -> str:
        """The node's plain-HTTP registry (``10.244.0.1:PORT``); empty without a node."""
        return self.node.registry if self.node else ""

    @property
    def _dir(self) -> Path:
        assert self.directory is not None
        return self.directory

    # -- lifecycle -----------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start etcd, kube-apiserver and kube-controller-manager (and with ``node=True``
        the node and kube-scheduler); return when ready."""
        started = time.monotonic()
        binaries = {name: find_binary(name) for name in BINARIES}
        if self._with_node:
            binaries["kube-scheduler"] = find_binary("kube-scheduler", "make node")
            # First: the lock, the cleanup of an earlier node, and the bridge the API
            # server listens on.
            self.node = Node()
            self.node.prepare()
        listen = NODE_IP if self.node else "127.0.0.1"
        certs = pki.write_cluster_certificates(self._dir)
        self.token = secrets.token_hex(24)
        tokens = self._dir / "tokens.csv"
        tokens.write_text(f'{self.token},admin,admin-uid,"system:masters"\n')
        tokens.chmod(0o600)

        etcd_client, etcd_peer, api_port = free_port(), free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_client}"
        self._spawn(
            "etcd",
            [
                str(binaries["etcd"]),
                "--name=default",
                f"--data-dir={self._dir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-cluster=default=http://127.0.0.1:{etcd_peer}",
                "--unsafe-no-fsync=true",  # test data only: skip fsync to keep the suite fast
                "--log-level=warn",
            ],
        )
        self._wait_http(f"{etcd_url}/health", "etcd")

        self.server = f"https://{listen}:{api_port}"
        node_flags = []
        if self.node:
            kubelet_client = (
                self._dir / "apiserver-kubelet-client.crt",
                self._dir / "apiserver-kubelet-client.key",
            )
            pki.issue(
                certs.ca_cert,
                certs.ca_key,
                *kubelet_client,
                common_name=KUBELET_CLIENT_USER,
                organizations=(),
                client=True,
            )
            node_flags = [
                # As real clusters run: kubelets are authorized by the Node authorizer and
                # may touch only their own Node and the Pods bound to it.
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction",
                f"--kubelet-client-certificate={kubelet_client[0]}",
                f"--kubelet-client-key={kubelet_client[1]}",
                f"--kubelet-certificate-authority={certs.ca_cert}",
                # The node's bridge address, never its name (a lookup could leave the machine).
                "--kubelet-preferred-address-types=InternalIP",
            ]
        self._spawn(
            "kube-apiserver",
            [
                str(binaries["kube-apiserver"]),
                f"--etcd-servers={etcd_url}",
                f"--bind-address={listen}",
                f"--advertise-address={listen}",
                f"--secure-port={api_port}",
                f"--tls-cert-file={certs.serving_cert}",
                f"--tls-private-key-file={certs.serving_key}",
                f"--client-ca-file={certs.ca_cert}",
                f"--token-auth-file={tokens}",
                *(node_flags or ["--authorization-mode=RBAC"]),
                "--anonymous-auth=false",
                f"--service-account-issuer={self.server}",
                f"--service-account-key-file={certs.sa_pub}",
                f"--service-account-signing-key-file={certs.sa_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--cert-dir={self._dir / 'apiserver-certs'}",
                "--enable-priority-and-fairness=false",  # one client; APF adds nothing here
                f"--shutdown-watch-termination-grace-period={WATCH_CLOSE_SECONDS}s",
                # As kubeadm and managed clusters run it: privileged containers are then refused
                # by admission (Pod Security, our guard rails), not by the API server's own
                # validation, which would hide whether those refuse them.
                "--allow-privileged=true",
                "--v=1",
            ],
        )
        self._write_kubeconfig(certs.ca_cert)
        self._wait_http(f"{self.server}/readyz", "kube-apiserver", ca=certs.ca_cert)

        self._spawn(
            "kube-controller-manager",
            [
                str(binaries["kube-controller-manager"]),
                *self._component_flags(),
                f"--service-account-private-key-file={certs.sa_key}",
                f"--root-ca-file={certs.ca_cert}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                # nodelifecycle with a node: it clears the not-ready taint once it is Ready.
                "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service,-route"
                + ("" if self.node else ",-nodelifecycle"),
                "--v=1",
            ],
        )
        if self.node:
            self._spawn(
                "kube-scheduler",
                [
                    str(binaries["kube-scheduler"]),
                    *self._component_flags(),
                    "--v=1",
                ],
            )
        self.version = json.loads(self._get(f"{self.server}/version", ca=certs.ca_cert))
        self._wait_for_controller_manager(certs.ca_cert)
        self._create_operator_identity(certs.ca_cert)
        if self.node:
            self._grant_kubelet_api(certs.ca_cert)
            self.node.start(
                server=self.server, ca_cert=certs.ca_cert, ca_key=certs.ca_key, token=self.token
            )
        # From the node lock on: waiting for another node to stop is not start-up time.
        self.started_seconds = time.monotonic() - (self.node.locked_at if self.node else started)
        logger.info(
            "Started control plane %s at %s in %.2fs%s",
            self.version.get("gitVersion"),
            self.server,
            self.started_seconds,
            f" with node {self.node.name}" if self.node else "",
        )

    def stop(self) -> None:
        """Stop the node's processes (if any), then every process this object started, newest
        first, then take back the node's host (its bridge last: the API server listens on its
        address, and its own clean-up on SIGTERM, removing its lease and endpoint through that
        address, waits for an address that is gone); remove a temporary dir.
        :attr:`killed` names the processes that ignored SIGTERM."""
        try:
            if self.node is not None:
                self.node.stop_processes()
            for name, process in reversed(self._processes):
                if not stop_process_group(process, grace=STOP_GRACE_SECONDS, name=name):
                    self.killed.append(name)
            self._processes.clear()
        finally:
            if self.node is not None:
                self.node.take_back_host()
        if self._owns_directory and self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    # -- helpers ----------------------------------------------------------------------

    @property
    def pids(self) -> list[int]:
        return [process.pid for _, process in self._processes]

    def env(self) -> dict[str, str]:
        """The environment for a child that should talk to this control plane."""
        environment = dict(os.environ)
        environment["KUBECONFIG"] = str(self.kubeconfig)
        return environment

    def _component_flags(self) -> list[str]:
        """What the controller manager and the scheduler share: the admin kubeconfig for the
        API and for checking their own callers, no election, a secure port on loopback."""
        return [
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
        ]

    def _spawn(self, name: str, argv: list[str]) -> None:
        self._processes.append((name, spawn_logged(argv, self._dir / f"{name}.log")))

    def _check_alive(self) -> None:
        for name, process in self._processes:
            if process.poll() is not None:
                log = tail(self._dir / f"{name}.log")
                raise ControlPlaneError(f"{name} exited with code {process.returncode}:\n{log}")

    def _ssl_context(self, ca: Path | None) -> ssl.SSLContext | None:
        return ssl.create_default_context(cafile=str(ca)) if ca else None

    def _create_operator_identity(self, ca: Path) -> None:
        """The ServiceAccount an operator run from this machine is (``mcp-operator run
        --identity`` :data:`DEV_IDENTITY`): its probes present that account's tokens to
        managed servers, which refuse callers without one."""
        namespace, name = DEV_IDENTITY.split("/")
        objects = [
            (
                "/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            ),
            (
                f"/api/v1/namespaces/{namespace}/serviceaccounts",
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
            ),
        ]
        for path, body in objects:
            self._post(path, body, ca, what=f"the operator's identity {DEV_IDENTITY}")

    def _post(self, path: str, body: Mapping[str, Any], ca: Path, *, what: str) -> None:
        """Create ``body`` at ``path`` (one that exists already is kept)."""
        request = urllib.request.Request(
            f"{self.server}{path}",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10, context=self._ssl_context(ca)):
                pass
        except urllib.error.HTTPError as error:
            if error.code != 409:  # already there (a directory reused)
                raise ControlPlaneError(f"Could not create {what}: {error}") from error

    def _grant_kubelet_api(self, ca: Path) -> None:
        """Let the API server's kubelet client (logs, exec, port-forward) use the kubelet API
        and nothing else: the built-in ``system:kubelet-api-admin``, not ``system:masters``."""
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "mcp-operator-dev:kube-apiserver-kubelet-client"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:kubelet-api-admin",
            },
            "subjects": [
                {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "User",
                    "name": KUBELET_CLIENT_USER,
                }
            ],
        }
        self._post(
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            binding,
            ca,
            what="the kubelet client's role binding",
        )

    def _get(self, url: str, ca: Path | None = None) -> str:
        request = urllib.request.Request(url)
        if self.token and url.startswith("https://"):
            request.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(request, timeout=5, context=self._ssl_context(ca)) as answer:
            return str(answer.read().decode())

    def _wait_http(self, url: str, name: str, ca: Path | None = None) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        last_error = ""
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                self._get(url, ca)
                return
            except (urllib.error.URLError, OSError) as error:
                last_error = str(error)
            time.sleep(0.2)
        raise ControlPlaneError(
            f"{name} not ready at {url} after {READY_TIMEOUT_SECONDS:.0f}s: {last_error}"
        )

    def _wait_for_controller_manager(self, ca: Path) -> None:
        """The controller manager is working once it has made the default ServiceAccount."""
        url = f"{self.server}/api/v1/namespaces/default/serviceaccounts/default"
        self._wait_http(url, "kube-controller-manager", ca=ca)

    def _write_kubeconfig(self, ca_cert: Path) -> None:
        import base64

        import yaml

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "mcp-operator-dev",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": base64.b64encode(
                            ca_cert.read_bytes()
                        ).decode(),
                    },
                }
            ],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [
                {
                    "name": "mcp-operator-dev",
                    "context": {"cluster": "mcp-operator-dev", "user": "admin"},
                }
            ],
            "current-context": "mcp-operator-dev",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config))
        self.kubeconfig.chmod(0o600)


@contextlib.contextmanager
def running(directory: Path | None = None) -> Iterator[ControlPlane]:
    """A started control plane for the duration of a ``with`` block."""
    with ControlPlane(directory=directory) as plane:
        yield plane
