"""External MCPServers end to end: the real API server, the operator, real MCP servers.

The operator runs as a subprocess (``mcp-operator run``) exactly as a user
starts it from a laptop; MCP servers are third-party packages on loopback, and
the hostile server is ours.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest

from tests.support import peers
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.objects import condition, eventually

pytestmark = pytest.mark.e2e


def mcpserver(name: str, url: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "mcp-operator.dev/v1alpha1",
        "kind": "MCPServer",
        "metadata": {"name": name},
        "spec": {"mode": "external", "url": url, **spec},
    }


def wait_for(
    cluster: Cluster,
    namespace: str,
    name: str,
    predicate: Callable[[dict[str, Any]], bool],
    timeout: float = 30,
) -> dict[str, Any]:
    obj: dict[str, Any] = eventually(
        f"mcpserver/{name} getting there",
        lambda: cluster.get_json("-n", namespace, f"mcpserver/{name}"),
        timeout,
        until=predicate,
        interval=0.2,
    )
    return obj


def ready(obj: dict[str, Any]) -> bool:
    return condition(obj, "Ready").get("status") == "True"


def not_ready(reason: str) -> Callable[[dict[str, Any]], bool]:
    return lambda obj: (
        condition(obj, "Ready").get("status") == "False"
        and condition(obj, "Ready").get("reason") == reason
    )


async def _list_tool_names(url: str) -> tuple[list[str], str]:
    from mcp import Client

    async with Client(url, mode="auto", cache=None) as client:
        names: list[str] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            names += [tool.name for tool in page.tools]
            if page.next_cursor is None:
                return names, client.protocol_version
            cursor = page.next_cursor


def tool_names_seen_by_sdk(url: str) -> tuple[list[str], str]:
    """The tools and era a plain SDK client sees: the expectation, independent of our probe."""
    return anyio.run(_list_tool_names, url)


@pytest.fixture(scope="module")
def everything() -> Iterator[str]:
    with peers.server_everything() as url:
        yield url


def test_server_everything_tools_land_in_status_after_filters_and_prefix(
    cluster: Cluster, operator: OperatorProcess, namespace: str, everything: str
) -> None:
    names, era = tool_names_seen_by_sdk(everything)
    allow, deny = ["get*", "echo", "*sum*"], ["*Env*"]
    expected = {
        f"ev_{n}"
        for n in names
        if any(fnmatch.fnmatchcase(n, p) for p in allow)
        and not any(fnmatch.fnmatchcase(n, p) for p in deny)
    }
    assert expected, f"the filters must select something of {names}"
    cluster.apply(
        namespace, mcpserver("ev", everything, toolsPrefix="ev", toolsAllow=allow, toolsDeny=deny)
    )
    obj = wait_for(cluster, namespace, "ev", ready)
    status = obj["status"]
    assert {t["name"] for t in status["tools"]} == expected
    assert {t["originalName"] for t in status["tools"]} == {e[3:] for e in expected}
    assert status["toolCount"] == len(expected)
    assert status["discoveredToolCount"] == len(names)
    assert status["url"] == everything
    assert status["serverInfo"]["protocolVersion"] == era
    assert status["observedGeneration"] == obj["metadata"]["generation"]
    assert not era.startswith("2026"), "server-everything is a legacy-era server"

    # A filter change shows in status within seconds.
    began = time.monotonic()
    cluster.apply(namespace, mcpserver("ev", everything, toolsPrefix="ev", toolsAllow=["echo"]))
    obj = wait_for(
        cluster, namespace, "ev", lambda o: {t["name"] for t in o["status"]["tools"]} == {"ev_echo"}
    )
    assert time.monotonic() - began < 10
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
    events = cluster.kubectl("-n", namespace, "get", "events", "-o", "json").stdout
    assert "ToolsDiscovered" in events and "ToolsChanged" in events


def test_mcp_server_time_is_probed_in_the_2026_era(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    with peers.mcp_server_time() as url:
        names, era = tool_names_seen_by_sdk(url)
        assert era == "2026-07-28"
        cluster.apply(namespace, mcpserver("time", url))
        obj = wait_for(cluster, namespace, "time", ready)
    status = obj["status"]
    assert status["serverInfo"]["protocolVersion"] == "2026-07-28"
    assert {t["originalName"] for t in status["tools"]} == set(names)
    assert {t["name"] for t in status["tools"]} == {f"time_{n}" for n in names}


def test_a_stopped_server_fails_keeps_its_tools_and_recovers(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    port = peers.free_port()
    argv = [peers._node(), str(peers.SERVER_EVERYTHING), "streamableHttp"]
    url = f"http://127.0.0.1:{port}/mcp"
    with peers.run_server(argv, port, env={"PORT": str(port)}):
        cluster.apply(namespace, mcpserver("flaky", url, probe={"intervalSeconds": 10}))
        before = wait_for(cluster, namespace, "flaky", ready)["status"]
    failed = wait_for(cluster, namespace, "flaky", not_ready("ProbeFailed"), timeout=30)
    assert failed["status"]["tools"] == before["tools"], "the last known tools are kept"
    message = condition(failed, "Ready")["message"]
    assert "failing since" in message and f"keeping {len(before['tools'])} tools" in message
    assert condition(failed, "Probed")["reason"] == "Unreachable"
    with peers.run_server(argv, port, env={"PORT": str(port)}):
        wait_for(cluster, namespace, "flaky", ready, timeout=40)


def test_a_header_from_a_missing_secret_names_the_secret_and_key(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    with peers.hostile_server(
        "ok", "--require-header", "Authorization: Bearer s3cr3t-value"
    ) as url:
        header = {
            "name": "Authorization",
            "valueFrom": {"secretKeyRef": {"name": "api-token", "key": "header"}},
        }
        cluster.apply(namespace, mcpserver("guarded", url, headers=[header]))
        obj = wait_for(cluster, namespace, "guarded", not_ready("SecretNotFound"))
        message = condition(obj, "Ready")["message"]
        assert "api-token" in message and "'header'" in message

        cluster.kubectl(
            "-n",
            namespace,
            "create",
            "secret",
            "generic",
            "api-token",
            "--from-literal=header=Bearer s3cr3t-value",
        )
        # Not yet opted in for MCP servers: the operator does not use it.
        wait_for(cluster, namespace, "guarded", not_ready("SecretNotOptedIn"), timeout=30)
        # Labelled: the label-selected Secret watch sees it appear and wakes the server.
        cluster.kubectl(
            "-n", namespace, "label", "secret", "api-token", "mcp-operator.dev/for-mcp-servers=true"
        )
        obj = wait_for(cluster, namespace, "guarded", ready, timeout=30)
        assert obj["status"]["toolCount"] == 3
    dump = cluster.kubectl("-n", namespace, "get", "mcpserver,events", "-o", "yaml").stdout
    assert "s3cr3t-value" not in dump
    assert "s3cr3t-value" not in operator.log()


def test_a_private_or_metadata_destination_is_refused_and_never_contacted(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.apply(namespace, mcpserver("metadata", "http://169.254.169.254/latest/meta-data/"))
    cluster.apply(namespace, mcpserver("internal", "http://10.96.0.10:8080/mcp"))
    for name, why in (("metadata", "cloud metadata address"), ("internal", "private address")):
        obj = wait_for(cluster, namespace, name, not_ready("DestinationRefused"))
        assert why in condition(obj, "Ready")["message"]
    # The Namespace's opt-in (the operator runs with --private-destinations=labelled) opens
    # private addresses, never the metadata endpoint.
    cluster.kubectl(
        "label", "namespace", namespace, "mcp-operator.dev/private-destinations=allowed"
    )
    cluster.apply(
        namespace, mcpserver("internal", "http://10.96.0.10:8080/mcp", probe={"timeoutSeconds": 2})
    )
    obj = wait_for(
        cluster,
        namespace,
        "internal",
        lambda o: condition(o, "Probed").get("reason") not in (None, "DestinationRefused"),
    )
    obj = wait_for(cluster, namespace, "metadata", not_ready("DestinationRefused"))


HOSTILE = [
    ("hang", "Timeout"),
    ("garbage", "ProtocolError"),
    ("cursor-loop", "PaginationLoop"),
    ("status", "HTTPError"),
]


def test_hostile_servers_get_clear_reasons_and_never_stall_the_operator(
    cluster: Cluster, operator: OperatorProcess, namespace: str, everything: str
) -> None:
    with contextlib_exit_stack() as stack:
        urls = {mode: stack.enter_context(peers.hostile_server(mode)) for mode, _ in HOSTILE}
        huge_list = stack.enter_context(peers.hostile_server("many-tools", "--tools", "10000"))
        many = stack.enter_context(peers.hostile_server("many-tools", "--tools", "1000"))
        invalid = stack.enter_context(peers.hostile_server("invalid-names"))
        for mode, _ in HOSTILE:
            cluster.apply(namespace, mcpserver(mode, urls[mode], probe={"timeoutSeconds": 3}))
        cluster.apply(namespace, mcpserver("huge-list", huge_list, probe={"timeoutSeconds": 60}))
        cluster.apply(namespace, mcpserver("many", many, probe={"timeoutSeconds": 60}))
        cluster.apply(namespace, mcpserver("invalid", invalid))
        # Meanwhile a good server still becomes Ready promptly.
        began = time.monotonic()
        cluster.apply(namespace, mcpserver("good", everything))
        wait_for(cluster, namespace, "good", ready, timeout=15)
        assert time.monotonic() - began < 15

        for mode, reason in HOSTILE:
            obj = wait_for(cluster, namespace, mode, not_ready("ProbeFailed"), timeout=20)
            assert condition(obj, "Probed")["reason"] == reason, condition(obj, "Probed")

        # 10,000 tools: discovery stops at its bound and says so.
        obj = wait_for(cluster, namespace, "huge-list", not_ready("ProbeFailed"), timeout=60)
        assert condition(obj, "Probed")["reason"] == "TooManyTools"
        assert "more than 5000 tools" in condition(obj, "Probed")["message"]
        # 1,000 tools: all counted, status.tools bounded, and the cut is reported.
        obj = wait_for(cluster, namespace, "many", ready, timeout=60)
        assert obj["status"]["discoveredToolCount"] == 1000
        assert obj["status"]["toolCount"] == 1000
        assert len(obj["status"]["tools"]) == 256
        assert "256" in condition(obj, "Probed")["message"]

        obj = wait_for(cluster, namespace, "invalid", ready, timeout=20)
        probed = condition(obj, "Probed")
        assert probed["reason"] == "ToolsDiscoveredWithWarnings"
        assert "invalid" in probed["message"].lower() and "collision" in probed["message"].lower()
        names = [t["name"] for t in obj["status"]["tools"]]
        assert len(names) == len(set(names)) and all(len(n) <= 64 for n in names)


def contextlib_exit_stack() -> Any:
    import contextlib

    return contextlib.ExitStack()


def test_a_server_announcing_a_new_tool_list_is_re_probed_at_once(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    import httpx

    with peers.hostile_server("changing") as url:
        # An hour between regular probes: only the announcement can explain a prompt update.
        cluster.apply(namespace, mcpserver("changing", url, probe={"intervalSeconds": 3600}))
        obj = wait_for(cluster, namespace, "changing", ready)
        assert [t["originalName"] for t in obj["status"]["tools"]] == ["tool_v0"]
        # the listener connects right after the probe's status is written
        eventually(
            "the operator's listener opening its GET stream",
            lambda: httpx.post(url.replace("/mcp", "/streams")).json()["open"],
            10,
            interval=0.1,
        )
        assert httpx.post(url.replace("/mcp", "/change")).status_code == 200
        began = time.monotonic()
        wait_for(
            cluster,
            namespace,
            "changing",
            lambda o: [t["originalName"] for t in o["status"]["tools"]] == ["tool_v1"],
            timeout=10,
        )
        assert time.monotonic() - began < 10
