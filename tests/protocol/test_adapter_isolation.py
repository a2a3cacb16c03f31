"""Server→client requests through the adapter reach the caller whose call caused them, and only it.

The adapter runs our conformance server (``tests/support/conformance_server.py``)
as its stdio child. Its sampling and elicitation tools ask the client mid-call;
official SDK clients in both eras answer with what they were asked, tagged with
who they are, so a question or an answer that reaches the wrong client shows.

- legacy sessions get the request on their call's stream and answer it;
- 2026-07-28 callers get it as an ``input_required`` result and retry with the
  answer (the SDK client drives the rounds);
- a child that does not say which call a request is about (no token) while
  several calls are open gets it refused: it reaches nobody.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client

from tests.protocol.test_adapter import ACCEPT, Adapter, adapter

pytestmark = pytest.mark.timeout(180)

SERVER = Path(__file__).resolve().parents[1] / "support" / "conformance_server.py"
MODERN = {**ACCEPT, "mcp-protocol-version": "2026-07-28"}
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "sampling": {}},
}

# A legacy stdio server that asks the client for sampling in every tool call without
# saying which call the request is about (no progress token in _meta): what most
# servers do. It answers the call with whatever the client answered.
ANONYMOUS_ASKER = r"""
import json, sys
pending = {}
asked = 0
for raw in sys.stdin:
    msg = json.loads(raw)
    if msg.get("method") == "initialize":
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "asker", "version": "0"}}
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
    elif msg.get("method") == "tools/call":
        asked += 1
        pending[f"ask-{asked}"] = msg["id"]
        text = msg["params"]["arguments"]["prompt"]
        ask = {"jsonrpc": "2.0", "id": f"ask-{asked}", "method": "sampling/createMessage",
               "params": {"messages": [{"role": "user", "content": {"type": "text", "text": text}}],
                          "maxTokens": 10}}
        print(json.dumps(ask), flush=True)
    elif "id" in msg and msg["id"] in pending:
        call = pending.pop(msg["id"])
        if "result" in msg:
            out = {"content": [{"type": "text", "text": msg["result"]["content"]["text"]}]}
        else:
            out = {"content": [{"type": "text", "text": "refused"}], "isError": True}
        print(json.dumps({"jsonrpc": "2.0", "id": call, "result": out}), flush=True)
    elif msg.get("method") == "tools/list":
        tool = {"name": "ask", "inputSchema": {"type": "object"}}
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {"tools": [tool]}}),
              flush=True)
    elif "id" in msg and "method" in msg:
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {}}), flush=True)
"""


@pytest.fixture
def conformance(tmp_path: Path) -> Iterator[Adapter]:
    with adapter([sys.executable, str(SERVER)], tmp_path) as running:
        yield running


class Answerer:
    """Sampling and elicitation callbacks that record what reached this client."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.prompts: list[str] = []

    async def sample(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        content = params.messages[0].content
        text = content.text if isinstance(content, types.TextContent) else "?"
        self.prompts.append(text)
        reply = types.TextContent(text=f"{self.name} answers {text}")
        return types.CreateMessageResult(role="assistant", content=reply, model="test")

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.prompts.append(params.message)
        return types.ElicitResult(action="accept", content={"name": self.name})


def client(url: str, answerer: Answerer, mode: str) -> Client:
    return Client(
        url,
        mode=mode,  # type: ignore[arg-type]
        sampling_callback=answerer.sample,
        elicitation_callback=answerer.elicit,
    )


def text_of(result: Any) -> str:
    content = result.content[0]
    assert isinstance(content, types.TextContent), result
    return content.text


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_sampling_tool_and_an_elicitation_tool_complete_in_each_era(
    conformance: Adapter, mode: str
) -> None:
    me = Answerer("alice")
    async with client(conformance.url, me, mode) as session:
        sampled = await session.call_tool("test_sampling", {"prompt": "capital of France?"})
        elicited = await session.call_tool("test_input_required_result_multi_round", {})
    assert text_of(sampled) == "LLM response: alice answers capital of France?"
    assert text_of(elicited) == "{'name': 'alice'} then {'name': 'alice'}"
    assert me.prompts == [
        "capital of France?",
        "Step 1: What is your name?",
        "Step 2: What is your favorite color?",
    ]


async def test_concurrent_callers_in_both_eras_each_get_only_their_own_requests(
    conformance: Adapter,
) -> None:
    answerers = [Answerer(f"client-{n}") for n in range(8)]

    async def one(answerer: Answerer, mode: str) -> list[str]:
        async with client(conformance.url, answerer, mode) as session:

            async def call(index: int) -> str:
                prompt = f"{answerer.name} prompt {index}"
                return text_of(await session.call_tool("test_sampling", {"prompt": prompt}))

            return list(await asyncio.gather(*(call(index) for index in range(3))))

    modes = ["legacy", "2026-07-28"] * 4
    results = await asyncio.gather(*(one(a, m) for a, m in zip(answerers, modes, strict=True)))
    for answerer, texts in zip(answerers, results, strict=True):
        expected = [f"{answerer.name} prompt {index}" for index in range(3)]
        assert sorted(answerer.prompts) == expected  # nobody else's prompt reached this client
        assert sorted(texts) == [f"LLM response: {answerer.name} answers {p}" for p in expected]


def test_a_2026_round_names_its_questions_and_refuses_altered_state(conformance: Adapter) -> None:
    def call(**params: Any) -> httpx.Response:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "test_input_required_result_elicitation",
                "arguments": {},
                "_meta": ENVELOPE,
                **params,
            },
        }
        headers = {
            **MODERN,
            "mcp-method": "tools/call",
            "mcp-name": "test_input_required_result_elicitation",
        }
        return httpx.post(conformance.url, json=body, headers=headers, timeout=30)

    first = call().json()["result"]
    assert first["resultType"] == "input_required"
    assert list(first["inputRequests"]) == ["user_name"]
    assert first["inputRequests"]["user_name"]["method"] == "elicitation/create"
    assert "_meta" not in first["inputRequests"]["user_name"]["params"]  # adapter-only keys gone
    answer = {"user_name": {"action": "accept", "content": {"name": "Ada"}}}
    tampered = call(inputResponses=answer, requestState=first["requestState"] + "x")
    assert tampered.status_code == 400 and tampered.json()["error"]["code"] == -32602
    done = call(inputResponses=answer, requestState=first["requestState"]).json()["result"]
    assert done["content"][0]["text"] == "Hello, Ada!"
    again = call(inputResponses=answer, requestState=first["requestState"])
    assert again.status_code == 400  # a state is used once


def test_an_undeclared_capability_is_refused_with_32021_and_400(conformance: Adapter) -> None:
    meta = {**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": {}}
    body = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": "test_missing_capability", "arguments": {}, "_meta": meta},
    }
    headers = {**MODERN, "mcp-method": "tools/call", "mcp-name": "test_missing_capability"}
    response = httpx.post(conformance.url, json=body, headers=headers, timeout=30)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32021 and error["data"]["requiredCapabilities"] == {"sampling": {}}


@pytest.mark.parametrize("method", ["ping", "logging/setLevel", "resources/subscribe"])
def test_methods_the_2026_revision_removed_answer_404_32601(
    conformance: Adapter, method: str
) -> None:
    body = {"jsonrpc": "2.0", "id": 3, "method": method, "params": {"_meta": ENVELOPE}}
    headers = {**MODERN, "mcp-method": method}
    response = httpx.post(conformance.url, json=body, headers=headers, timeout=30)
    assert response.status_code == 404 and response.json()["error"]["code"] == -32601


async def test_four_legacy_sessions_sampling_at_once_never_see_each_others_prompts(
    tmp_path: Path,
) -> None:
    """The repro of the safety review: the child does not say which call asks."""
    answerers = [Answerer(f"tenant-{n}") for n in range(4)]
    asker = [sys.executable, "-c", ANONYMOUS_ASKER]
    with adapter(asker, tmp_path) as running:

        async def one(answerer: Answerer) -> list[str]:
            async with client(running.url, answerer, "legacy") as session:
                calls = [
                    session.call_tool("ask", {"prompt": f"{answerer.name} secret {index}"})
                    for index in range(3)
                ]
                return [text_of(result) for result in await asyncio.gather(*calls)]

        results = await asyncio.gather(*(one(answerer) for answerer in answerers))
    for answerer, texts in zip(answerers, results, strict=True):
        assert all(prompt.startswith(f"{answerer.name} ") for prompt in answerer.prompts)
        for text in texts:
            assert text == "refused" or text.startswith(f"{answerer.name} answers {answerer.name}")
    assert json.dumps(results).count("refused") > 0  # several calls open: not attributable
