"""The adapter's 2026-07-28 endpoint over real HTTP: listen streams, Mcp-Param headers, logs.

The adapter runs our conformance server as its stdio child; the requests are
plain HTTP, as a 2026-07-28 client sends them.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.protocol.test_adapter import ACCEPT, Adapter, adapter
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(120)

SERVER = Path(__file__).resolve().parents[1] / "support" / "conformance_server.py"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture
def conformance(tmp_path: Path) -> Iterator[Adapter]:
    with adapter([sys.executable, str(SERVER)], tmp_path) as running:
        yield running


def post(url: str, method: str, params: dict[str, Any], **headers: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 5, "method": method, "params": {**params, "_meta": META}}
    sent = {**ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": method, **headers}
    if "name" in params and "mcp-name" not in headers:
        sent["mcp-name"] = params["name"]
    return httpx.post(url, json=body, headers=sent, timeout=30)


def test_a_listen_stream_is_acknowledged_then_carries_only_what_it_asked_for(
    conformance: Adapter,
) -> None:
    frames: list[dict[str, Any]] = []
    body = {
        "jsonrpc": "2.0",
        "id": "listen-1",
        "method": "subscriptions/listen",
        "params": {"_meta": META, "notifications": {"toolsListChanged": True}},
    }
    headers = {**ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": "subscriptions/listen"}

    def listen() -> None:
        with httpx.stream("POST", conformance.url, json=body, headers=headers, timeout=30) as r:
            for raw in r.iter_lines():
                if raw.startswith("data: "):
                    frames.append(json.loads(raw[6:]))
                    if len(frames) == 2:
                        return

    reader = threading.Thread(target=listen, daemon=True)
    reader.start()
    eventually("the acknowledgement", lambda: len(frames) >= 1, 10)
    post(conformance.url, "tools/call", {"name": "test_trigger_prompt_change", "arguments": {}})
    post(conformance.url, "tools/call", {"name": "test_trigger_tool_change", "arguments": {}})
    reader.join(10)
    tag = {"io.modelcontextprotocol/subscriptionId": "listen-1"}
    assert frames == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": {"toolsListChanged": True}, "_meta": tag},
        },
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": tag}},
    ]


def test_param_headers_must_agree_with_the_arguments(conformance: Adapter) -> None:
    call = {"name": "test_custom_headers", "arguments": {"region": "eu-west"}}
    agreed = post(conformance.url, "tools/call", call, **{"mcp-param-region": "eu-west"})
    assert agreed.status_code == 200, agreed.text
    assert agreed.json()["result"]["content"][0]["text"] == "Region: eu-west"
    encoded = post(
        conformance.url, "tools/call", call, **{"mcp-param-region": "=?base64?ZXUtd2VzdA==?="}
    )
    assert encoded.status_code == 200, encoded.text
    for headers in ({}, {"mcp-param-region": "us-east"}, {"mcp-param-region": "=?base64?ZXU!?="}):
        refused = post(conformance.url, "tools/call", call, **headers)
        assert refused.status_code == 400, (headers, refused.text)
        assert refused.json()["error"]["code"] == -32020


def test_logs_reach_a_2026_caller_only_when_its_request_set_a_level(conformance: Adapter) -> None:
    call = {"name": "test_logging_tool", "arguments": {}}
    quiet = post(conformance.url, "tools/call", call, accept="application/json, text/event-stream")
    assert "notifications/message" not in quiet.text
    meta = {**META, "io.modelcontextprotocol/logLevel": "info"}
    body = {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {**call, "_meta": meta}}
    headers = {
        **ACCEPT,
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "test_logging_tool",
    }
    loud = httpx.post(conformance.url, json=body, headers=headers, timeout=30)
    assert loud.headers["content-type"].startswith("text/event-stream")
    assert loud.text.count("notifications/message") == 3


def test_calls_waiting_for_input_are_bounded_in_count_and_time(tmp_path: Path) -> None:
    flags = ("--max-inflight", "4", "--request-timeout-seconds", "3")
    caps = {**META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    call = {"name": "test_input_required_result_elicitation", "arguments": {}}
    answer = {"user_name": {"action": "accept", "content": {"name": "Ada"}}}

    def ask(url: str, **extra: Any) -> httpx.Response:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {**call, **extra, "_meta": caps},
        }
        headers = {
            **ACCEPT,
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/call",
            "mcp-name": call["name"],
        }
        return httpx.post(url, json=body, headers=headers, timeout=30)

    with adapter([sys.executable, str(SERVER)], tmp_path, *flags) as running:
        states = [ask(running.url).json()["result"]["requestState"] for _ in range(3)]
        assert running.health().json()["inflight"] == 2  # at most half of --max-inflight wait
        evicted = ask(running.url, inputResponses=answer, requestState=states[0])
        assert evicted.status_code == 400
        done = ask(running.url, inputResponses=answer, requestState=states[1])
        assert done.json()["result"]["content"][0]["text"] == "Hello, Ada!"
        eventually(
            "the last waiting call to expire",
            lambda: running.health().json()["inflight"] == 0,
            15,
        )
        expired = ask(running.url, inputResponses=answer, requestState=states[2])
        assert expired.status_code == 400
