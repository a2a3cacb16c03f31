"""2026-07-28 listen streams: the filter the adapter can honor and what each stream carries."""

from __future__ import annotations

from typing import Any

from mcp_operator.adapter.router import Router
from mcp_operator.serve.listeners import Listener, honored
from mcp_operator.serve.sessions import SessionTable

CHILD = {"tools": {"listChanged": True}, "resources": {"subscribe": True}, "prompts": {}}


class Stream:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def push(self, message: dict[str, Any]) -> bool:
        self.messages.append(message)
        return True

    def close(self) -> None:
        pass


def test_only_what_the_child_advertises_is_honored() -> None:
    requested = {
        "toolsListChanged": True,
        "promptsListChanged": True,
        "resourceSubscriptions": ["test://a"],
    }
    assert honored(requested, CHILD) == {
        "toolsListChanged": True,
        "resourceSubscriptions": ["test://a"],
    }
    assert honored({"promptsListChanged": True}, CHILD) == {}


def test_each_stream_gets_only_what_it_asked_for_tagged_with_its_id() -> None:
    router = Router(SessionTable(max_sessions=1, idle_seconds=1), max_inflight=1)
    tools, resource = Stream(), Stream()
    router.listeners = [
        Listener.for_filter(7, tools, {"toolsListChanged": True}),
        Listener.for_filter("s", resource, {"resourceSubscriptions": ["test://a"]}),
    ]
    router.from_child({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    router.from_child({"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"})
    for uri in ("test://a", "test://b"):
        update = {"uri": uri}
        router.from_child(
            {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": update}
        )
    assert tools.messages == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/tools/list_changed",
            "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 7}},
        }
    ]
    assert [m["params"]["uri"] for m in resource.messages] == ["test://a"]
    assert resource.messages[0]["params"]["_meta"] == {
        "io.modelcontextprotocol/subscriptionId": "s"
    }


def test_the_acknowledgement_names_what_was_agreed() -> None:
    listener = Listener.for_filter(3, Stream(), {"toolsListChanged": True})
    assert listener.acknowledgement({"toolsListChanged": True}) == {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {
            "notifications": {"toolsListChanged": True},
            "_meta": {"io.modelcontextprotocol/subscriptionId": 3},
        },
    }
