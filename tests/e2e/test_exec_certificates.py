"""Client certificates from a kubeconfig exec plugin, against a real kube-apiserver.

The plugin (``tests/support/exec_cert_plugin.py``) issues a new pair on every run,
signed by the control plane's CA (the API server's ``--client-ca-file``), for the
user ``exec-user-<run>``: a SelfSubjectReview then shows which certificate the
client presented on the wire, so a client that kept the old one after a renewal
would be caught.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_operator.kube import CONFIGMAPS, KubeClient, KubeError
from mcp_operator.kube.credentials import EXPIRY_SKEW
from tests.support import peers
from tests.support.cluster import REPO, Cluster, operator_process
from tests.support.objects import condition, eventually

pytestmark = pytest.mark.e2e

PLUGIN = REPO / "tests" / "support" / "exec_cert_plugin.py"
GROUP = "mcp-exec-users"
USER = "ci-robot"
LIFETIME = int(EXPIRY_SKEW.total_seconds()) + 5
"""Seconds a pair is valid: the client renews it 30 s before that, so after 5 s."""


@pytest.fixture(scope="module")
def exec_users_may_view(cluster: Cluster) -> Iterator[None]:
    binding = "mcp-exec-users-view"
    cluster.kubectl(
        "create", "clusterrolebinding", binding, "--clusterrole=view", f"--group={GROUP}"
    )
    yield
    cluster.kubectl("delete", "clusterrolebinding", binding, check=False)


@pytest.fixture
def private_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The temporary directory the ``ssl`` module's files would go to, watched by the test."""
    directory = tmp_path / "tmp"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    return directory


def kubeconfig(cluster: Cluster, directory: Path, mode: str) -> Path:
    """The cluster's kubeconfig with its user replaced by the exec plugin."""
    plane_directory = cluster.plane.directory
    assert plane_directory is not None
    config: dict[str, Any] = yaml.safe_load(cluster.kubeconfig.read_text())
    variables = {
        "CA_CERT": str(plane_directory / "ca.crt"),
        "CA_KEY": str(plane_directory / "ca.key"),
        "RUNS_FILE": str(directory / "runs"),
        "LIFETIME": str(LIFETIME),
        "MODE": mode,
    }
    config["users"] = [
        {
            "name": USER,
            "user": {
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "command": sys.executable,
                    "args": [str(PLUGIN)],
                    "env": [{"name": k, "value": v} for k, v in variables.items()],
                    "interactiveMode": "Never",
                    "provideClusterInfo": True,
                }
            },
        }
    ]
    config["contexts"][0]["context"]["user"] = USER
    path = directory / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def runs(directory: Path) -> int:
    return int((directory / "runs").read_text())


async def whoami(kube: KubeClient) -> str:
    """The user the API server authenticated this request as."""
    review = await kube.request(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    return str(review["status"]["userInfo"]["username"])


async def test_the_client_presents_the_plugins_certificate_and_a_renewed_one_after_expiry(
    cluster: Cluster,
    exec_users_may_view: None,
    namespace: str,
    tmp_path: Path,
    private_tmp: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    cluster.kubectl("create", "configmap", "-n", namespace, "settings", "--from-literal=a=b")
    kube = KubeClient.connect(str(kubeconfig(cluster, tmp_path, "valid")))
    try:
        assert await whoami(kube) == "exec-user-1"
        listed = await kube.list(CONFIGMAPS, namespace)
        assert "settings" in {item["metadata"]["name"] for item in listed}
        assert runs(tmp_path) == 1, "a fresh certificate is reused, not issued per request"

        await asyncio.sleep(LIFETIME - EXPIRY_SKEW.total_seconds() + 0.5)
        assert await whoami(kube) == "exec-user-2", "the renewed certificate on the wire"
        listed = await kube.list(CONFIGMAPS, namespace)
        assert "settings" in {item["metadata"]["name"] for item in listed}
        assert runs(tmp_path) == 2
        assert kube._transport is not None and kube._transport.pools_opened == 2
    finally:
        await kube.close()
    server = (tmp_path / "runs.server").read_text()
    assert server == cluster.plane.server, "provideClusterInfo tells the plugin the server"
    assert "PRIVATE KEY" not in caplog.text
    assert "Obtained a client certificate for kubeconfig user ci-robot" in caplog.text
    assert not any(private_tmp.iterdir()), "the files the ssl module read are removed"  # noqa: ASYNC240


@pytest.mark.parametrize("mode", ["expired", "foreign"])
async def test_a_pair_the_api_server_refuses_is_an_error_naming_the_user_without_the_key(
    cluster: Cluster,
    exec_users_may_view: None,
    namespace: str,
    tmp_path: Path,
    private_tmp: Path,
    caplog: pytest.LogCaptureFixture,
    mode: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    kube = KubeClient.connect(str(kubeconfig(cluster, tmp_path, mode)))
    try:
        with pytest.raises(KubeError) as caught:
            await kube.list(CONFIGMAPS, namespace)
    finally:
        await kube.close()
    assert caught.value.status == 401
    message = str(caught.value)
    assert f"kubeconfig user {USER}" in message and "client certificate" in message, message
    assert runs(tmp_path) == 2, "the plugin is run again once after the 401, then no more"
    assert "PRIVATE KEY" not in message + repr(caught.value) + caplog.text
    assert not any(private_tmp.iterdir())  # noqa: ASYNC240


def test_the_operators_watches_are_the_plugins_user_too(
    cluster: Cluster, crds: None, namespace: str, tmp_path: Path
) -> None:
    """kopf's watches log in with the credential the operator's own client has (a client
    certificate from the plugin here): an operator whose kubeconfig knows no other user logs
    in, watches its namespace without a refusal, and the MCPServer there becomes Ready. (In a
    full run the session's shared operator may be the one that reports Ready first, so the
    proof of this operator's login is its own log, waited for before the server is made.)"""
    binding = f"mcp-exec-users-operate-{namespace}"
    cluster.kubectl(
        "create", "clusterrolebinding", binding, "--clusterrole=cluster-admin", f"--group={GROUP}"
    )
    environment = {**cluster.env(), "KUBECONFIG": str(kubeconfig(cluster, tmp_path, "valid"))}
    log_path = tmp_path / "operator.log"
    try:
        with (
            peers.mcp_server_time() as url,
            operator_process(
                "--verbose",
                "--liveness=none",
                "--metrics=none",
                "--no-leader-election",
                "--loopback-destinations=allowed",
                f"--namespace={namespace}",
                env=environment,
                log_path=log_path,
            ) as running,
        ):
            stream = "Starting the watch-stream for mcpservers.v1alpha1.mcp-operator.dev"
            watching = f"{stream} in '{namespace}'"
            eventually(
                "the operator logged in as the plugin's user and watches its namespace",
                running.log,
                60,
                until=lambda text: "Activity 'authenticate' succeeded" in text and watching in text,
                interval=0.5,
            )
            server = {
                "apiVersion": "mcp-operator.dev/v1alpha1",
                "kind": "MCPServer",
                "metadata": {"name": "time"},
                "spec": {"mode": "external", "url": url},
            }
            cluster.apply(namespace, server)
            eventually(
                "mcpserver/time Ready through an operator that is the plugin's user",
                lambda: cluster.get_json("-n", namespace, "mcpserver/time"),
                60,
                until=lambda obj: condition(obj, "Ready").get("status") == "True",
                interval=0.5,
            )
    finally:
        cluster.kubectl("delete", "clusterrolebinding", binding, check=False)
    text = log_path.read_text(errors="replace")
    assert "Activity 'authenticate' succeeded" in text, text[-3000:]
    assert "Obtained a client certificate for kubeconfig user ci-robot" in text
    assert "PRIVATE KEY" not in text
    assert "Unauthorized" not in text and " 401" not in text, text[-3000:]
    # The operator's client and kopf's login may share one certificate or each run the plugin.
    assert runs(tmp_path) >= 1, "the plugin gave this operator its only credential"
