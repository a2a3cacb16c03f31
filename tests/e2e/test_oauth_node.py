"""Token exchange on the real node: each run reaches an OAuth server as its own ServiceAccount.

Our authorization server trusts the cluster's ServiceAccount issuer (its JWKS, read from the
API server) for the audience its token URL names, and the official SDK's protected MCP server
checks the tokens it issues; both listen on this machine on the node's bridge address. The
MCPServer's ``spec.auth.tokenExchange`` makes the operator's probe exchange the operator's own
token (TokenRequest) and the run's bridge exchange the run's projected token, which the
kubelet mounts into the bridge container only. The agent calls ``whoami`` through the bridge:
the server saw the run's ServiceAccount as the subject and the platform's client as the actor;
the bridge's audit line names both, and neither the client secret nor any token is in the
bridge's log, the operator's, or anything the operator wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.test_secret_hygiene import forms, secret
from tests.support import pods
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.oauth_peers import oauth_peers
from tests.support.objects import agentrun, eventually, get, mcpserver, python_agent, ready

pytestmark = pytest.mark.e2e

CLIENT_SECRET = "n0de-client-s3cret+9"

AGENT = """
import asyncio, json, os
from mcp import Client

async def main():
    async with Client(os.environ["MCP_BRIDGE_URL"], mode="auto", cache=None) as client:
        result = await client.call_tool("secure_whoami", {})
    out = {"whoami": result.model_dump(by_alias=True, exclude_none=True),
           "sees_exchange_token": os.path.exists("/var/run/mcp-bridge/exchange")}
    print("AGENT-RESULT " + json.dumps(out), flush=True)

asyncio.run(main())
"""


def test_a_run_calls_an_oauth_server_as_its_own_service_account_through_the_bridge(
    node_cluster: Cluster,
    node_images: dict[str, str],
    node_operator: OperatorProcess,
    node_namespace: str,
    tmp_path: Path,
) -> None:
    cluster, namespace = node_cluster, node_namespace
    jwks = tmp_path / "jwks.json"
    jwks.write_text(cluster.kubectl("get", "--raw", "/openid/v1/jwks").stdout)
    host = cluster.plane.node.ip
    with oauth_peers(clients={"platform": CLIENT_SECRET}, host=host, subject_jwks=jwks) as peers:
        cluster.kubectl(
            "label", "namespace", namespace, "mcp-operator.dev/private-destinations=allowed"
        )
        cluster.apply(namespace, secret("platform-client", {"secret": CLIENT_SECRET}))
        auth = {
            "tokenExchange": {
                "tokenURL": peers.token_url,  # the subject token's audience by default
                "clientID": "platform",
                "clientSecretRef": {"name": "platform-client", "key": "secret"},
                "scopes": ["mcp:tools"],
            }
        }
        cluster.apply(namespace, mcpserver("secure", mode="external", url=peers.mcp_url, auth=auth))
        server = ready(cluster, namespace, "mcpserver", "secure")
        assert server["status"]["toolCount"] == 2
        probed = peers.stats()["token_exchange"]
        assert probed >= 1  # the probe exchanged the operator's own token
        agent = python_agent(node_images["mcp-operator"], AGENT)
        cluster.apply(namespace, agentrun("agent", ["secure"], agent))
        eventually("the agent Pod", lambda: get(cluster, namespace, "pod", "agent"))
        finished = pods.finished_run(cluster, namespace, "agent")
        print(finished.show())
        assert pods.phase(finished.pod) == "Succeeded"
        issued = peers.issued()
        exchanges = peers.stats()["token_exchange"] - probed
    result = pods.marked(finished.agent_log, "AGENT-RESULT")
    assert result["sees_exchange_token"] is False  # mounted into the bridge container only
    who = json.loads(result["whoami"]["content"][0]["text"])
    subject = f"system:serviceaccount:{namespace}:default"
    assert who == {
        "subject": subject,
        "actor": "platform",
        "client": "platform",
        "scopes": ["mcp:tools"],
    }
    assert exchanges == 1  # the bridge's listing and the call: one token
    audit = [json.loads(x) for x in finished.bridge_log.splitlines() if x.startswith("{")]
    call = next(a for a in audit if a.get("tool") == "secure_whoami")
    assert call["outcome"] == "ok"
    assert call["upstreamSubject"] == subject and call["upstreamActor"] == "platform"
    written = cluster.kubectl(
        "-n", namespace, "get", "mcpservers,agentruns,events,configmaps,pods", "-o", "json"
    ).stdout
    everything = written + finished.bridge_log + finished.agent_log + node_operator.log()
    for token in issued:
        assert token not in everything and token.split(".")[2] not in everything
    assert [form for form in forms(CLIENT_SECRET) if form in everything.lower()] == []
