"""Pinned tool definitions end to end: the real API server, the operator as a process, and a
server on the official SDK that changes a tool's description after it was probed.

Under ``toolsPinning: pin`` the next probe re-pins the changed definition and says so in the
``ToolsChanged`` condition and Event; under ``strict`` the old pin stays until a person sets
the approval annotation to the digest the condition names. (What bridges do with the pins is
tests/protocol/test_bridge_policies.py.)
"""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import pytest

from tests.support import peers
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.objects import condition, eventually, mcpserver

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def rug_server(name: str, url: str, pinning: str) -> dict[str, Any]:
    return mcpserver(
        name, mode="external", url=url, toolsPinning=pinning, probe={"intervalSeconds": 10}
    )


def pins(obj: dict[str, Any]) -> dict[str, str | None]:
    return {t["originalName"]: t.get("definitionSha256") for t in obj["status"]["tools"]}


def get(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = cluster.get_json("-n", namespace, f"mcpserver/{name}")
    return found


def wait(cluster: Cluster, namespace: str, name: str, until: Any, what: str) -> dict[str, Any]:
    obj: dict[str, Any] = eventually(
        f"mcpserver/{name}: {what}", lambda: get(cluster, namespace, name), 60,
        until=until, interval=0.5,
    )  # fmt: skip
    return obj


def ready_rug(
    cluster: Cluster, namespace: str, name: str, url: str, pinning: str
) -> dict[str, Any]:
    """Create the rug-pull server's MCPServer; it once Ready."""
    cluster.apply(namespace, rug_server(name, url, pinning))
    return wait(
        cluster, namespace, name, lambda o: condition(o, "Ready").get("status") == "True", "Ready"
    )


def change(url: str) -> None:
    """Make the server rewrite lookup's description (a rug pull)."""

    async def call() -> None:
        from mcp import Client

        async with Client(url) as client:
            await client.call_tool("change", {})

    anyio.run(call)


def events(cluster: Cluster, namespace: str, reason: str) -> list[str]:
    listed = json.loads(cluster.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)
    return [e["message"] for e in listed["items"] if e.get("reason") == reason]


def test_a_changed_description_is_repinned_with_a_condition_and_an_event(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    with peers.rug_pull_server() as url:
        first = ready_rug(cluster, namespace, "rug", url, "pin")
        before = pins(first)
        every = {"lookup", "wipe", "wiped", "search_docs", "ping", "change", "change_quietly"}
        assert set(before) == every
        assert all(before.values())
        assert condition(first, "ToolsChanged")["reason"] == "Pinned"
        change(url)
        after = wait(
            cluster, namespace, "rug", lambda o: pins(o)["lookup"] != before["lookup"], "re-pinned"
        )
        assert pins(after)["wipe"] == before["wipe"]
        changed = condition(after, "ToolsChanged")
        assert (changed["status"], changed["reason"]) == ("True", "ToolsChanged")
        assert "changed: rug_lookup" in changed["message"]
        messages = eventually(
            "the ToolsChanged Event", lambda: events(cluster, namespace, "ToolsChanged"), 20,
            until=lambda found: any("changed: rug_lookup" in m for m in found),
        )  # fmt: skip
        assert any("0 tools added, 0 removed, 1 changed" in m for m in messages)


def test_strict_pinning_keeps_the_old_pin_until_the_annotation_approves(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    with peers.rug_pull_server() as url:
        first = ready_rug(cluster, namespace, "strict", url, "strict")
        before = pins(first)
        change(url)
        pending = wait(
            cluster, namespace, "strict",
            lambda o: condition(o, "ToolsChanged").get("reason") == "ApprovalRequired",
            "approval required",
        )  # fmt: skip
        assert pins(pending) == before  # bridges keep refusing the changed tool
        message = condition(pending, "ToolsChanged")["message"]
        assert "changed: strict_lookup" in message
        wanted = re.search(r"mcp-operator.dev/approved-tools=([0-9a-f]{64})", message)
        assert wanted is not None
        assert any(
            "strict_lookup" in m for m in events(cluster, namespace, "ToolsApprovalRequired")
        )
        cluster.kubectl(
            "annotate", "-n", namespace, "mcpserver/strict",
            f"mcp-operator.dev/approved-tools={wanted.group(1)}", "--overwrite",
        )  # fmt: skip
        approved = wait(
            cluster, namespace, "strict",
            lambda o: condition(o, "ToolsChanged").get("reason") == "Approved",
            "approved",
        )  # fmt: skip
        assert pins(approved)["lookup"] != before["lookup"]
        assert pins(approved)["wipe"] == before["wipe"]
