"""The adapter's offline verification on the tokens of a real kube-apiserver.

The control plane (``cluster``) mints the tokens (``kubectl create token``, the TokenRequest
API the kubelet uses for projected tokens) and publishes its issuer and keys
(``/.well-known/openid-configuration``, ``/openid/v1/jwks``), which the access configuration
carries as the operator writes it. The real adapter in front of a counting stdio server then
accepts the right audience, refuses another audience and another namespace, and refuses a
Pod-bound token once the Pod's uid is in ``revokedPods`` — which the API server's own
TokenReview already refuses when the Pod is gone: the window docs/security.md documents.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.protocol.test_adapter import ACCEPT, INIT, adapter
from tests.protocol.test_adapter_auth import COUNTING_SERVER, bearer, methods_seen
from tests.support.cluster import Cluster
from tests.support.issuer import write_access

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

AUDIENCE = "mcpserver.mcp-operator.dev/tokens/everything"


def token(cluster: Cluster, namespace: str, account: str, audience: str, *bound: str) -> str:
    args = ["create", "token", account, "-n", namespace, f"--audience={audience}",
            "--duration=10m", *bound]  # fmt: skip
    return cluster.kubectl(*args).stdout.strip()


def review(cluster: Cluster, value: str) -> dict[str, object]:
    document = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                "spec": {"token": value, "audiences": [AUDIENCE]}}  # fmt: skip
    answer = cluster.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(document))
    status: dict[str, object] = json.loads(answer.stdout)["status"]
    return status


def test_real_service_account_tokens_verify_offline_and_a_gone_pod_is_revoked(
    cluster: Cluster, tmp_path: Path
) -> None:
    for namespace in ("tokens", "tokens-other"):
        cluster.kubectl("create", "namespace", namespace)
        cluster.kubectl("create", "serviceaccount", "agent", "-n", namespace)
    container = {"name": "agent", "image": "example.invalid/agent:1"}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "run-1", "namespace": "tokens"},
           "spec": {"serviceAccountName": "agent", "containers": [container]}}  # fmt: skip
    cluster.kubectl("create", "-f", "-", input=json.dumps(pod))
    uid = cluster.get_json("pod", "run-1", "-n", "tokens")["metadata"]["uid"]
    issuer = json.loads(cluster.kubectl("get", "--raw", "/.well-known/openid-configuration").stdout)
    jwks = json.loads(cluster.kubectl("get", "--raw", "/openid/v1/jwks").stdout)
    document = {"audience": AUDIENCE, "issuer": issuer["issuer"], "jwks": jwks,
                "allow": {"namespaces": ["tokens"], "serviceAccounts": None,
                          "operators": []}, "revokedPods": [], "oidc": None}  # fmt: skip
    access = write_access(tmp_path / "access.json", document)
    script = tmp_path / "counting.py"
    script.write_text(COUNTING_SERVER)
    seen = tmp_path / "seen.txt"
    bound = token(cluster, "tokens", "agent", AUDIENCE, "--bound-object-kind=Pod",
                  "--bound-object-name=run-1", f"--bound-object-uid={uid}")  # fmt: skip
    tokens = {
        "bound": bound,
        "unbound": token(cluster, "tokens", "agent", AUDIENCE),
        "other_audience": token(cluster, "tokens", "agent", "mcpserver.mcp-operator.dev/x/y"),
        "other_namespace": token(cluster, "tokens-other", "agent", AUDIENCE),
    }
    command = (sys.executable, str(script), str(seen))
    flags = ("--auth=kubernetes", f"--access-config={access}")
    with adapter(command, tmp_path, *flags) as running, httpx.Client(timeout=10) as http:
        before = methods_seen(seen)
        status = {name: http.post(running.url, json=INIT, headers=bearer(value)).status_code
                  for name, value in tokens.items()}  # fmt: skip
        assert status == {"bound": 200, "unbound": 200, "other_audience": 401,
                          "other_namespace": 403}, running.logs()  # fmt: skip
        assert "Verified caller system:serviceaccount:tokens:agent (pod run-1)" in running.logs()
        assert methods_seen(seen) == before  # initialize is the adapter's own answer
        cluster.kubectl("delete", "pod", "run-1", "-n", "tokens", "--grace-period=0", "--force")
        # The API server refuses the token of a deleted Pod at once ...
        assert review(cluster, bound).get("authenticated") is not True
        # ... offline, it is accepted until the operator lists the Pod's uid as revoked.
        assert http.post(running.url, json=INIT, headers=bearer(bound)).status_code == 200
        write_access(access, {**document, "revokedPods": [uid]})
        deadline = time.monotonic() + 10
        while http.post(running.url, json=INIT, headers=bearer(bound)).status_code != 401:
            assert time.monotonic() < deadline, running.logs()
            time.sleep(0.2)
        assert (
            http.post(running.url, json=INIT, headers=bearer(tokens["unbound"])).status_code == 200
        )
        anonymous = http.post(running.url, json=INIT, headers=ACCEPT)
        assert anonymous.status_code == 401
    for value in tokens.values():
        assert value not in running.logs()
