"""External servers behind OAuth, with the real API server and the operator's real probe.

Our authorization server and the official SDK's protected MCP server run on loopback
(tests/support/oauth_peers.py). The operator's probe obtains a client-credentials token and
keeps it between probes; a server that answers 401 without credentials is ``AuthRequired``
naming the authorization server its RFC 9728 metadata lists; a token without the scope is
``InsufficientScope``; a revoked client secret is ``AuthRequired`` within one probe interval;
a token URL on the metadata address is ``DestinationRefused``. Neither the client secret nor
any token shows in status, Events, ConfigMaps, the run's Pod or the operator's log.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_external import mcpserver, not_ready, ready, wait_for
from tests.e2e.test_secret_hygiene import forms, secret
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.oauth_peers import OAuthPeers, oauth_peers
from tests.support.objects import condition, eventually

pytestmark = pytest.mark.e2e

CLIENT_SECRET = "cl1ent-s3cret/Value+7"


@pytest.fixture(scope="module")
def authority() -> Iterator[OAuthPeers]:
    with oauth_peers(
        clients={"platform": CLIENT_SECRET, "doomed": CLIENT_SECRET}, lifetime=3600
    ) as running:
        yield running


def client_credentials(peers: OAuthPeers, client: str, **extra: Any) -> dict[str, Any]:
    return {
        "oauth2ClientCredentials": {
            "tokenURL": peers.token_url,
            "clientID": client,
            "clientSecretRef": {"name": "oauth-client", "key": "secret"},
            "scopes": ["mcp:tools"],
            **extra,
        }
    }


def test_the_probe_authenticates_caches_its_token_and_nothing_secret_is_written(
    cluster: Cluster, operator: OperatorProcess, namespace: str, authority: OAuthPeers
) -> None:
    cluster.apply(namespace, secret("oauth-client", {"secret": CLIENT_SECRET}))
    before = authority.stats()["client_credentials"]
    cluster.apply(
        namespace,
        mcpserver(
            "secure",
            authority.mcp_url,
            auth=client_credentials(authority, "platform"),
            probe={"intervalSeconds": 10},
        ),
    )
    first = wait_for(cluster, namespace, "secure", ready, timeout=60)
    assert first["status"]["toolCount"] == 2
    assert {t["originalName"] for t in first["status"]["tools"]} == {"whoami", "echo"}
    probed = first["status"]["lastProbeTime"]
    wait_for(
        cluster,
        namespace,
        "secure",
        lambda obj: ready(obj) and obj["status"]["lastProbeTime"] != probed,
        timeout=40,
    )
    assert authority.stats()["client_credentials"] - before == 1  # two probes, one token
    cluster.apply(
        namespace,
        {
            "apiVersion": "mcp-operator.dev/v1alpha1",
            "kind": "AgentRun",
            "metadata": {"name": "run"},
            "spec": {"mcpServers": [{"name": "secure"}], "agent": {"image": "agent:1"}},
        },
    )
    eventually(
        "the run's ConfigMap and Pod exist",
        lambda: cluster.get_json("-n", namespace, "agentrun/run"),
        60,
        until=lambda run: bool((run.get("status") or {}).get("podName")),
    )
    written = cluster.kubectl(
        "-n", namespace, "get", "mcpservers,agentruns,events,configmaps,pods", "-o", "json"
    ).stdout
    everything = written + operator.log()
    issued = authority.issued()
    assert issued
    for token in issued:
        assert token not in everything and token.split(".")[2] not in everything
    lowered = everything.lower()
    assert [form for form in forms(CLIENT_SECRET) if form in lowered] == []
    config = cluster.get_json("-n", namespace, "configmap/run-bridge")["data"]["config.yaml"]
    assert "clientSecretFile: /var/run/mcp-bridge/secrets/oauth-client/secret" in config


def test_a_server_that_wants_oauth_is_auth_required_naming_its_authorization_server(
    cluster: Cluster, operator: OperatorProcess, namespace: str, authority: OAuthPeers
) -> None:
    cluster.apply(namespace, mcpserver("bare", authority.mcp_url))
    obj = wait_for(cluster, namespace, "bare", not_ready("AuthRequired"), timeout=60)
    message = condition(obj, "Ready")["message"]
    assert "answered HTTP 401 asking for Bearer authentication" in message
    assert f"authorization servers {authority.issuer}" in message
    assert condition(obj, "Probed")["reason"] == "AuthRequired"


def test_a_token_without_the_scope_is_insufficient_scope(
    cluster: Cluster, operator: OperatorProcess, namespace: str, authority: OAuthPeers
) -> None:
    cluster.apply(namespace, secret("oauth-client", {"secret": CLIENT_SECRET}))
    auth = client_credentials(authority, "platform", scopes=["other"])
    cluster.apply(namespace, mcpserver("narrow", authority.mcp_url, auth=auth))
    obj = wait_for(cluster, namespace, "narrow", not_ready("InsufficientScope"), timeout=60)
    assert "Required scope: mcp:tools" in condition(obj, "Ready")["message"]


def test_a_revoked_client_secret_is_auth_required_within_one_probe_interval(
    cluster: Cluster, operator: OperatorProcess, namespace: str, authority: OAuthPeers
) -> None:
    cluster.apply(namespace, secret("oauth-client", {"secret": CLIENT_SECRET}))
    cluster.apply(
        namespace,
        mcpserver(
            "revoked",
            authority.mcp_url,
            auth=client_credentials(authority, "doomed"),
            probe={"intervalSeconds": 10, "timeoutSeconds": 5},
        ),
    )
    wait_for(cluster, namespace, "revoked", ready, timeout=60)
    authority.revoke("doomed")
    revoked_at = time.monotonic()
    obj = wait_for(cluster, namespace, "revoked", not_ready("AuthRequired"), timeout=30)
    assert time.monotonic() - revoked_at <= 10 + 5 + 2  # one interval and one probe's time
    message = condition(obj, "Ready")["message"]
    assert "refused client doomed with HTTP 401 (invalid_client)" in message
    assert CLIENT_SECRET not in message


def test_a_token_url_on_the_metadata_address_is_refused(
    cluster: Cluster, operator: OperatorProcess, namespace: str, authority: OAuthPeers
) -> None:
    cluster.apply(namespace, secret("oauth-client", {"secret": CLIENT_SECRET}))
    auth = client_credentials(authority, "platform")
    auth["oauth2ClientCredentials"]["tokenURL"] = "http://169.254.169.254/latest/token"
    cluster.apply(namespace, mcpserver("ssrf", authority.mcp_url, auth=auth))
    obj = wait_for(cluster, namespace, "ssrf", not_ready("DestinationRefused"), timeout=60)
    assert (
        "the token endpoint http://169.254.169.254/latest/token was not contacted"
        in (condition(obj, "Ready")["message"])
    )
