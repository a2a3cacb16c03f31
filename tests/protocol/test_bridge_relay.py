"""Server→client requests, progress and cancellation through the bridge, in both eras.

The bridge runs as a process in front of real upstreams: server-everything over its own
Streamable HTTP (legacy era, TypeScript SDK: ``trigger-sampling-request``,
``trigger-elicitation-request``, ``trigger-long-running-operation``), the same over stdio
behind our adapter (``adl``, a legacy session), and ``tests/support/asking_server.py`` on
the official Python SDK, once as it negotiates (2026-07-28: it asks through
``input_required``, ``ask``) and once told to speak legacy (requests on the call's stream,
``askl``). The agents are the official Python SDK client in both eras (it answers
``input_required`` rounds itself), and plain HTTP where a test must see the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client

from tests.protocol.test_adapter import EVERYTHING, adapter
from tests.support import needs, peers, wire
from tests.support.bridge_run import RunningBridge, run_bridge, server_entry
from tests.support.waiting import eventually_async

pytestmark = [pytest.mark.timeout(180), needs.mark(needs.node_missing())]

ASKING = Path(__file__).resolve().parents[1] / "support" / "asking_server.py"
MODES = ["legacy", "2026-07-28"]
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@dataclass
class Upstreams:
    asking: str
    record: Path

    def lines(self) -> list[str]:
        return self.record.read_text().splitlines() if self.record.exists() else []


@pytest.fixture(scope="module")
def upstreams(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upstreams]:
    record = tmp_path_factory.mktemp("asking") / "record.txt"
    port = peers.free_port()
    argv = [sys.executable, str(ASKING), str(port), str(record)]
    with peers.run_server(argv, port, name="asking server"):
        yield Upstreams(f"http://127.0.0.1:{port}/mcp", record)


@pytest.fixture(scope="module")
def managed_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """server-everything over stdio behind our adapter (the adapter tests' own start)."""
    with adapter(EVERYTHING, tmp_path_factory.mktemp("adapter")) as running:
        yield running.url


@pytest.fixture(scope="module")
def bridge(everything_url: str, upstreams: Upstreams, managed_url: str) -> Iterator[RunningBridge]:
    legacy = {"protocolVersion": wire.LEGACY_VERSION}
    servers = [
        server_entry("everything", everything_url, "ev"),
        server_entry("asking", upstreams.asking, "ask"),
        server_entry("asking-legacy", upstreams.asking, "askl", **legacy),
        server_entry("managed", managed_url, "adl", **legacy),
    ]
    with run_bridge(servers) as running:
        yield running


@dataclass
class Agent:
    """An SDK client that answers every question with its own name, and keeps what it saw.

    ``seen`` keeps the sampling and elicitation prompts; ``roots_asked`` counts the roots
    requests apart, because server-everything asks its client for roots on its own shortly
    after a legacy session starts (not about any call): whether that reaches the agent
    before the agent leaves is timing, so no test may count it in with the prompts.
    """

    name: str
    mode: str
    seen: list[str] = field(default_factory=list)
    roots_asked: int = 0

    async def sample(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        content = params.messages[0].content
        text = content.text if isinstance(content, types.TextContent) else "?"
        self.seen.append(text)
        reply = types.TextContent(type="text", text=f"{self.name} heard {text}")
        return types.CreateMessageResult(role="assistant", content=reply, model="test")

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.seen.append(params.message)
        return types.ElicitResult(
            action="accept", content={"word": self.name, "name": self.name, "context": self.name}
        )

    async def roots(self, context: Any) -> types.ListRootsResult:
        self.roots_asked += 1
        return types.ListRootsResult(roots=[types.Root(uri=f"file:///{self.name}")])

    def client(self, url: str) -> Client:
        return Client(
            url,
            mode=self.mode,  # type: ignore[arg-type]
            sampling_callback=self.sample,
            elicitation_callback=self.elicit,
            list_roots_callback=self.roots,
        )


def text_of(result: Any) -> str:
    assert not result.is_error, result
    content = result.content[0]
    assert isinstance(content, types.TextContent), result
    return content.text


def audit_of(bridge: RunningBridge, tool: str) -> list[str]:
    return [line["outcome"] for line in bridge.audit_lines() if line["tool"] == tool]


# ------------------------------------------------------------------ the questions, both eras


@pytest.mark.parametrize("mode", MODES)
async def test_sampling_elicitation_and_roots_of_every_upstream_reach_the_agent_and_back(
    bridge: RunningBridge, mode: str
) -> None:
    agent = Agent(f"agent-{mode}", mode)
    async with agent.client(bridge.url) as client:
        for prefix in ("ask", "askl"):  # a 2026-07-28 upstream (input_required), a legacy one
            sampled = text_of(await client.call_tool(f"{prefix}_sample", {"marker": prefix}))
            assert sampled == f"{agent.name} heard say {prefix}"
            elicited = await client.call_tool(f"{prefix}_elicit", {"marker": "w"})
            assert text_of(elicited) == agent.name
            listed = await client.call_tool(f"{prefix}_roots", {})
            assert text_of(listed) == f"file:///{agent.name}"
        for prefix in ("ev", "adl"):  # the TypeScript SDK's server, direct and behind the adapter
            result = await client.call_tool(f"{prefix}_trigger-sampling-request", {"prompt": "hi"})
            assert f"{agent.name} heard Resource trigger-sampling-request context: hi" in (
                text_of(result)
            )
        elicited = await client.call_tool("ev_trigger-elicitation-request", {})
        assert "User provided the requested information" in text_of(elicited)
        assert agent.name in str(elicited.content)
    context = "Resource trigger-sampling-request context: hi"
    assert agent.seen[:-1] == [
        *["say ask", "give a word for w", "say askl", "give a word for w"],
        *[context, context],
    ]
    assert agent.seen[-1].startswith("Please provide inputs")  # server-everything's elicitation
    assert agent.roots_asked >= 2  # the two roots tools; server-everything may ask on its own
    assert set(audit_of(bridge, "ask_sample")) == {"ok"}


async def test_concurrent_agents_of_both_eras_each_get_only_their_own_questions(
    bridge: RunningBridge,
) -> None:
    agents = [Agent(f"agent{i}", MODES[i % 2]) for i in range(4)]
    tools = ["ask_sample", "askl_sample", "ev_trigger-sampling-request"]

    async def one(agent: Agent) -> list[tuple[str, str]]:
        async with agent.client(bridge.url) as client:

            async def call(tool: str, index: int) -> tuple[str, str]:
                marker = f"{agent.name}-{index}"
                key = "prompt" if tool.startswith("ev_") else "marker"
                return marker, text_of(await client.call_tool(tool, {key: marker}))

            return list(await asyncio.gather(*(call(tool, i) for i, tool in enumerate(tools * 2))))

    answers = await asyncio.gather(*(one(agent) for agent in agents))
    for agent, calls in zip(agents, answers, strict=True):
        assert len(calls) == 6
        for marker, text in calls:
            assert f"{agent.name} heard" in text and marker in text, (agent.name, text)
            for other in agents:
                if other is not agent:
                    assert f"{other.name} heard" not in text
        assert len(agent.seen) == 6
        assert all(agent.name in prompt for prompt in agent.seen), agent.seen


# ------------------------------------------------------------------ refused, never sent


def _legacy_session(http: httpx.Client, bridge: RunningBridge, capabilities: dict[str, Any]) -> str:
    opened = http.post(bridge.url, json=wire.initialize(capabilities=capabilities), headers=ACCEPT)
    session = opened.headers["mcp-session-id"]
    headers = {**ACCEPT, "mcp-session-id": session}
    http.post(bridge.url, json=wire.initialized(), headers=headers)
    return session


def _messages(answer: httpx.Response) -> list[dict[str, Any]]:
    """Every JSON-RPC message of a JSON or SSE answer."""
    if answer.headers["content-type"].startswith("application/json"):
        return [answer.json()]
    return [
        json.loads(line[5:])
        for line in answer.text.splitlines()
        if line.startswith("data:") and line[5:].strip()
    ]


def test_a_capability_a_legacy_agent_did_not_declare_is_refused_upstream_and_never_sent(
    bridge: RunningBridge,
) -> None:
    with httpx.Client(timeout=30) as http:
        session = _legacy_session(http, bridge, {"roots": {}})  # roots only
        headers = {**ACCEPT, "mcp-session-id": session}
        for index, (tool, arguments) in enumerate(
            [
                ("ev_trigger-sampling-request", {"prompt": "secret-1"}),
                ("askl_sample", {"marker": "secret-2"}),
                ("ev_trigger-elicitation-request", {}),
            ]
        ):
            call = wire.request("tools/call", {"name": tool, "arguments": arguments}, id=index + 1)
            messages = _messages(http.post(bridge.url, json=call, headers=headers))
            assert [m for m in messages if "method" in m] == []  # nothing was asked of it
            (answer,) = messages
            assert answer["id"] == index + 1
            result = answer["result"]
            assert result["isError"] is True, result
            assert "did not declare" in json.dumps(result), result
    metrics = httpx.get(f"{bridge.health}/metrics", timeout=5).text
    refused = (
        'mcp_bridge_server_requests_total{method="sampling/createMessage",outcome="undeclared"}'
    )
    assert float(metrics.split(refused, 1)[1].split()[0]) >= 2


def test_a_capability_a_2026_agent_did_not_declare_never_becomes_a_round(
    bridge: RunningBridge,
) -> None:
    with httpx.Client(timeout=30) as http:
        for tool, arguments in [
            ("ask_sample", {"marker": "secret-3"}),
            ("askl_sample", {"marker": "secret-4"}),
            ("ev_trigger-sampling-request", {"prompt": "secret-5"}),
        ]:
            params = {"name": tool, "arguments": arguments, "_meta": _envelope({"roots": {}})}
            answer = http.post(
                bridge.url, json=wire.request("tools/call", params), headers=_modern(tool)
            )
            (message,) = _messages(answer)
            if tool == "ask_sample":  # a 2026-07-28 server: its -32021, as the spec has it
                assert answer.status_code == 400, message
                error = message["error"]
                assert error["code"] == -32021
                assert error["data"] == {"requiredCapabilities": {"sampling": {}}}
                assert "secret" not in json.dumps(error)
                continue
            # a legacy server was refused its request (-32601) and failed the call itself
            result = message["result"]
            assert result.get("resultType") != "input_required", result
            assert result["isError"] is True and "secret" not in json.dumps(result["content"])


def _envelope(capabilities: dict[str, Any]) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": wire.MODERN_VERSION,
        "io.modelcontextprotocol/clientInfo": wire.CLIENT_INFO,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }


def _modern(tool: str) -> dict[str, str]:
    return {
        **ACCEPT,
        "mcp-protocol-version": wire.MODERN_VERSION,
        "mcp-method": "tools/call",
        "mcp-name": tool,
    }


# ------------------------------------------------------------------ progress


def test_progress_reaches_each_agent_with_its_own_token_and_upstreams_see_the_bridges(
    bridge: RunningBridge, upstreams: Upstreams
) -> None:
    """Two legacy agents use the same token at once; each gets its own progress only."""
    results: dict[str, list[dict[str, Any]]] = {}

    def call(name: str) -> None:
        with httpx.Client(timeout=30) as http:
            session = _legacy_session(http, bridge, {})
            params = {
                "name": "askl_slow",
                "arguments": {"marker": name, "seconds": 1.0},
                "_meta": {"progressToken": 7},
            }
            headers = {**ACCEPT, "mcp-session-id": session}
            answer = http.post(bridge.url, json=wire.request("tools/call", params), headers=headers)
            results[name] = _messages(answer)

    async def both() -> None:
        await asyncio.gather(*(asyncio.to_thread(call, name) for name in ("tok-a", "tok-b")))

    asyncio.run(both())
    for name, messages in results.items():
        progress = [m for m in messages if m.get("method") == "notifications/progress"]
        assert len(progress) >= 5, messages
        assert {m["params"]["progressToken"] for m in progress} == {7}
        assert messages[-1]["result"]["content"][0]["text"] == f"slept {name}"
        assert [m["params"]["progress"] for m in progress] == sorted(
            m["params"]["progress"] for m in progress
        )
        assert progress[-1]["params"]["progress"] <= 10  # not the other call's too
    seen = {
        line.split()[1]: line.split()[2]
        for line in upstreams.lines()
        if line.startswith("token tok-")
    }
    assert set(seen) == {"tok-a", "tok-b"}
    assert seen["tok-a"] != seen["tok-b"] and "7" not in seen.values()


@pytest.mark.parametrize("mode", MODES)
async def test_an_sdk_agent_gets_progress_from_upstreams_of_both_eras(
    bridge: RunningBridge, mode: str
) -> None:
    for tool, arguments in [
        ("ask_slow", {"marker": f"p-{mode}", "seconds": 0.5}),
        ("ev_trigger-long-running-operation", {"duration": 0.6, "steps": 3}),
    ]:
        seen: list[float] = []

        async def progress(
            value: float, total: float | None, message: str | None, seen: list[float] = seen
        ) -> None:
            seen.append(value)

        async with Client(bridge.url, mode=mode) as client:  # type: ignore[arg-type]
            result = await client.call_tool(tool, arguments, progress_callback=progress)
        assert not result.is_error, result
        assert len(seen) >= 3 and seen == sorted(seen), (tool, seen)


# ------------------------------------------------------------------ cancellation


@pytest.mark.parametrize("prefix", ["ask", "askl"])
@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_call_stops_its_upstream_and_is_audited_cancelled(
    bridge: RunningBridge, upstreams: Upstreams, mode: str, prefix: str
) -> None:
    marker = f"cancel-{prefix}-{mode}"
    async with Client(bridge.url, mode=mode) as client:  # type: ignore[arg-type]
        call = asyncio.create_task(
            client.call_tool(f"{prefix}_slow", {"marker": marker, "seconds": 30})
        )

        async def started() -> bool:
            return f"token {marker} " in " ".join(upstreams.lines())

        await eventually_async("the upstream call started", started, 15)
        began = time.monotonic()
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call

        async def stopped() -> bool:
            return f"cancelled {marker}" in upstreams.lines()

        await eventually_async("the upstream saw the cancellation", stopped, 10)
        assert time.monotonic() - began < 10
        assert f"finished {marker}" not in upstreams.lines()

        async def audited() -> bool:
            return "cancelled" in audit_of(bridge, f"{prefix}_slow")

        await eventually_async("the audit line says cancelled", audited, 10)
        # The session (legacy) or the endpoint (2026) still serves the agent's next call.
        assert text_of(await client.call_tool("ev_echo", {"message": "after"})) == "Echo: after"


# ------------------------------------------------------------------ hostile upstreams


async def test_a_flood_of_requests_is_bounded_and_stalls_no_one(
    bridge: RunningBridge, upstreams: Upstreams
) -> None:
    flooded, bystander = Agent("flooded", "legacy"), Agent("bystander", "2026-07-28")
    async with flooded.client(bridge.url) as a, bystander.client(bridge.url) as b:
        flood = asyncio.create_task(a.call_tool("askl_flood", {"marker": "f", "count": 300}))
        began = time.monotonic()
        sampled = await b.call_tool("ask_sample", {"marker": "meanwhile"})
        assert text_of(sampled) == "bystander heard say meanwhile"
        assert time.monotonic() - began < 5
        counts = dict(part.split("=") for part in text_of(await flood).split())
    assert int(counts["answered"]) <= 32 and int(counts["answered"]) == len(flooded.seen)
    assert sum(map(int, counts.values())) == 300
    assert int(counts["refused"]) >= 1
    assert all(prompt.startswith("flood f ") for prompt in flooded.seen)
    assert bystander.seen == ["say meanwhile"]


async def test_a_request_about_a_call_that_ended_reaches_no_agent(
    bridge: RunningBridge, upstreams: Upstreams
) -> None:
    agent = Agent("ended", "legacy")
    async with agent.client(bridge.url) as client:
        assert text_of(await client.call_tool("askl_late", {"marker": "gone"})) == "ended gone"

        async def decided() -> bool:
            return any(line.startswith("late gone ") for line in upstreams.lines())

        await eventually_async("the late request decided", decided, 10)
        assert text_of(await client.call_tool("ev_echo", {"message": "still"})) == "Echo: still"
    (outcome,) = [line for line in upstreams.lines() if line.startswith("late gone ")]
    assert outcome != "late gone answered"
    assert agent.seen == []


# ------------------------------------------------------------------ a tenant attacking another


def _sampled(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": text}, "model": "m"}


def test_another_session_can_neither_answer_nor_cancel_a_sessions_call(
    bridge: RunningBridge,
) -> None:
    """B knows A's ids (they are small integers) and uses them: nothing of it reaches A's call."""
    with httpx.Client(timeout=30) as http:
        alice = _legacy_session(http, bridge, {"sampling": {}})
        mallory = _legacy_session(http, bridge, {"sampling": {}})
        as_alice = {**ACCEPT, "mcp-session-id": alice}
        as_mallory = {**ACCEPT, "mcp-session-id": mallory}
        params = {"name": "askl_sample", "arguments": {"marker": "alice-secret"}}
        with http.stream(
            "POST", bridge.url, json=wire.request("tools/call", params, id=5), headers=as_alice
        ) as answer:
            assert answer.headers["content-type"].startswith("text/event-stream")
            lines = answer.iter_lines()
            asked = next(
                json.loads(line[5:])
                for line in lines
                if line.startswith("data:") and "method" in line
            )
            assert asked["method"] == "sampling/createMessage"
            for forged in (
                {"jsonrpc": "2.0", "id": asked["id"], "result": _sampled("mallory's words")},
                wire.notification("notifications/cancelled", {"requestId": 5}),
            ):
                assert http.post(bridge.url, json=forged, headers=as_mallory).status_code == 202
            own = {"jsonrpc": "2.0", "id": asked["id"], "result": _sampled("alice's words")}
            assert http.post(bridge.url, json=own, headers=as_alice).status_code == 202
            final = next(json.loads(line[5:]) for line in lines if line.startswith("data:"))
    assert final["id"] == 5
    assert final["result"]["content"][0]["text"] == "alice's words"
    assert "mallory" not in json.dumps(final)


def test_a_2026_retry_with_a_state_it_was_not_given_is_refused(bridge: RunningBridge) -> None:
    meta = _envelope({"sampling": {}})
    with httpx.Client(timeout=30) as http:
        first = http.post(
            bridge.url,
            json=wire.request(
                "tools/call", {"name": "ask_sample", "arguments": {"marker": "m"}, "_meta": meta}
            ),
            headers=_modern("ask_sample"),
        ).json()["result"]
        assert first["resultType"] == "input_required"
        (key,) = first["inputRequests"]
        responses = {key: _sampled("x")}
        for name, state in [
            ("ask_sample", first["requestState"] + "x"),  # altered
            ("ask_elicit", first["requestState"]),  # another tool's retry
            ("ask_sample", "invented"),
        ]:
            params = {
                "name": name,
                "arguments": {"marker": "m"},
                "_meta": meta,
                "requestState": state,
                "inputResponses": responses,
            }
            refused = http.post(
                bridge.url, json=wire.request("tools/call", params), headers=_modern(name)
            )
            assert refused.status_code == 400
            assert refused.json()["error"]["code"] == -32602
        params = {
            "name": "ask_sample",
            "arguments": {"marker": "m"},
            "_meta": meta,
            "requestState": first["requestState"],
            "inputResponses": responses,
        }
        done = http.post(
            bridge.url, json=wire.request("tools/call", params, id=2), headers=_modern("ask_sample")
        ).json()
    assert done["id"] == 2
    assert done["result"]["content"][0]["text"] == "x"


def test_a_legacy_agent_without_sse_on_its_post_is_asked_on_its_get_stream(
    bridge: RunningBridge,
) -> None:
    with httpx.Client(timeout=30) as http:
        session = _legacy_session(http, bridge, {"sampling": {}})
        stream_headers = {"accept": "text/event-stream", "mcp-session-id": session}
        json_only = {
            "accept": "application/json",
            "content-type": "application/json",
            "mcp-session-id": session,
        }
        with (
            httpx.Client(timeout=30) as streaming,
            streaming.stream("GET", bridge.url, headers=stream_headers) as stream,
        ):
            assert stream.status_code == 200
            params = {"name": "askl_sample", "arguments": {"marker": "by-get"}}
            with ThreadPoolExecutor(1) as pool:
                posted = pool.submit(
                    http.post, bridge.url, json=wire.request("tools/call", params, id=3),
                    headers=json_only,
                )  # fmt: skip
                asked = next(
                    json.loads(line[5:])
                    for line in stream.iter_lines()
                    if line.startswith("data:") and "sampling/createMessage" in line
                )
                own = {"jsonrpc": "2.0", "id": asked["id"], "result": _sampled("over GET")}
                assert http.post(bridge.url, json=own, headers=json_only).status_code == 202
                answer = posted.result(30)
    assert answer.headers["content-type"].startswith("application/json")
    assert answer.json()["result"]["content"][0]["text"] == "over GET"


# ------------------------------------------------------------------ prompts/get that asks

CONFORMANCE = [sys.executable, str(ASKING.parent / "conformance_server.py")]


@pytest.fixture(scope="module")
def asking_prompt_bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBridge]:
    """Our conformance server (its prompt asks the user mid-request) behind our adapter,
    the bridge in front of it under the prefix ``cf``."""
    with (
        adapter(CONFORMANCE, tmp_path_factory.mktemp("conformance")) as running,
        run_bridge([server_entry("conformance", running.url, "cf")]) as bridge,
    ):
        yield bridge


@pytest.mark.parametrize("mode", MODES)
async def test_a_prompt_whose_server_asks_the_agent_is_relayed_in_both_eras(
    asking_prompt_bridge: RunningBridge, mode: str
) -> None:
    """prompts/get goes through the call relay: a legacy agent is asked on the request's
    own stream, a 2026-07-28 agent in an input_required round; the prompt has its answer."""
    agent = Agent(f"agent-{mode}", mode)
    async with agent.client(asking_prompt_bridge.url) as client:
        prompt = await client.get_prompt("cf_test_input_required_result_prompt")
    assert agent.seen == ["What context should the prompt use?"]
    content = prompt.messages[0].content
    assert isinstance(content, types.TextContent)
    assert content.text == f"Use this context: {agent.name}"
