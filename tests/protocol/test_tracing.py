"""One agent call traced end to end: the agent (the official SDK client), the bridge, the
adapter and the stdio child (an SDK server with OpenTelemetry on), connected through the
trace context in ``params._meta``.

The bridge and the adapter run as real processes exporting OTLP/HTTP to a collector
stand-in of this test (a local HTTP server decoding the protobuf requests); the agent's
spans go to an in-memory exporter; the child writes its spans to a file.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support import peers, wire
from tests.support.bridge_run import run_bridge, server_entry
from tests.support.otlp_collector import Collector
from tests.support.waiting import eventually

pytestmark = [pytest.mark.timeout(120)]

TRACED_SERVER = Path(__file__).parent.parent / "support" / "traced_server.py"
SECRET = "argument-value-never-recorded"
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture(scope="module")
def collector() -> Iterator[Collector]:
    collector = Collector()
    yield collector
    collector.close()


@pytest.fixture(scope="module")
def agent_spans() -> InMemorySpanExporter:
    """The agent's own spans (the SDK client's), in memory."""
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


def _otel_env(collector: Collector) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "OTEL_METRIC_EXPORT_INTERVAL": "200",
    }


@pytest.fixture(scope="module")
def child_spans(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("child") / "spans.jsonl"


@pytest.fixture(scope="module")
def traced_bridge(collector: Collector, child_spans: Path) -> Iterator[tuple[str, str]]:
    port = peers.free_port()
    argv = [sys.executable, "-m", "mcp_operator", "adapter", "--port", str(port), "--auth=none",
            "--", sys.executable, str(TRACED_SERVER), str(child_spans)]  # fmt: skip
    env = {**_otel_env(collector), "OTEL_SERVICE_NAME": "adapter-under-test"}
    with peers.run_server(argv, port, name="adapter", env=env, ready="/readyz"):
        adapter = f"http://127.0.0.1:{port}/mcp"
        with run_bridge([server_entry("traced", adapter, "tr")], env=_otel_env(collector)) as b:
            yield b.url, adapter


def _one(spans: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    found = [s for s in spans if all(s.get(k) == v for k, v in match.items())]
    assert len(found) == 1, (match, spans)
    return found[0]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_one_agent_call_yields_connected_spans_from_the_agent_to_the_child(
    traced_bridge: tuple[str, str],
    collector: Collector,
    agent_spans: InMemorySpanExporter,
    child_spans: Path,
    mode: str,
) -> None:
    bridge_url, _adapter = traced_bridge
    agent_spans.clear()
    async with Client(bridge_url, mode=mode) as client:  # type: ignore[arg-type]
        result = await client.call_tool("tr_echo", {"message": SECRET})
    assert not result.is_error, result
    seen = json.loads(result.content[0].text)["traceparent"]

    finished = agent_spans.get_finished_spans()
    agent = next((s for s in finished if s.name.endswith("tools/call tr_echo")), None)
    assert agent is not None, [(s.name, s.kind) for s in finished]
    trace_id = f"{agent.context.trace_id:032x}"
    agent_id = f"{agent.context.span_id:016x}"

    def mine() -> list[dict[str, Any]]:
        return [s for s in collector.spans if s["trace"] == trace_id]

    eventually("bridge and adapter spans", lambda: len(mine()) >= 4, timeout=15)
    spans = mine()
    b_server = _one(spans, service="mcp-operator-bridge", kind="SERVER")
    b_client = _one(spans, service="mcp-operator-bridge", kind="CLIENT")
    a_server = _one(spans, service="adapter-under-test", kind="SERVER")
    a_client = _one(spans, service="adapter-under-test", kind="CLIENT")
    # Parent to child: agent -> bridge server -> bridge client -> adapter server -> child request
    assert b_server["parent"] == agent_id
    assert b_client["parent"] == b_server["span"]
    assert a_server["parent"] == b_client["span"]
    assert a_client["parent"] == a_server["span"]
    assert b_server["name"] == "tools/call tr_echo" and b_client["name"] == "tools/call echo"
    assert a_server["name"] == a_client["name"] == "tools/call echo"
    for span in (b_server, a_server):
        attributes = span["attributes"]
        assert attributes["mcp.method.name"] == "tools/call"
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert "jsonrpc.request.id" in attributes
        assert not span["error"]
    assert b_server["attributes"]["gen_ai.tool.name"] == "tr_echo"
    assert a_server["attributes"]["gen_ai.tool.name"] == "echo"
    # The child saw the adapter's client span as its parent, and its own span says so.
    assert seen.startswith(f"00-{trace_id}-{a_client['span']}-")

    def child() -> list[dict[str, Any]]:
        lines = child_spans.read_text().splitlines() if child_spans.exists() else []
        return [json.loads(line) for line in lines if json.loads(line)["trace"] == trace_id]

    eventually("the child's span", child, timeout=10)
    child_span = _one(child(), kind="SERVER")
    assert child_span["parent"] == a_client["span"]
    assert child_span["name"] == "tools/call echo"
    # Arguments are never recorded.
    assert SECRET not in json.dumps(spans)


def test_the_http_header_context_is_a_link_and_the_meta_context_the_parent(
    traced_bridge: tuple[str, str], collector: Collector
) -> None:
    _bridge, adapter = traced_bridge
    meta_trace, meta_span = "1" * 32, "2" * 16
    header_trace, header_span = "3" * 32, "4" * 16
    with httpx.Client(timeout=10) as http:
        opened = http.post(adapter, json=wire.initialize(), headers=ACCEPT)
        session = {"mcp-session-id": opened.headers["mcp-session-id"]}
        http.post(adapter, json=wire.initialized(), headers={**ACCEPT, **session})
        meta = f"00-{meta_trace}-{meta_span}-01"
        call = wire.traced_call("echo", {"message": SECRET}, meta, id=7)
        headers = {**ACCEPT, **session, "traceparent": f"00-{header_trace}-{header_span}-01"}
        answered = http.post(adapter, json=call, headers=headers)
    assert answered.status_code == 200, answered.text

    def server_span() -> list[dict[str, Any]]:
        return [s for s in collector.spans if s["trace"] == meta_trace and s["kind"] == "SERVER"]

    eventually("the adapter's server span", server_span, timeout=15)
    span = server_span()[0]
    assert span["parent"] == meta_span
    assert span["links"] == [(header_trace, header_span)]
    assert span["attributes"]["jsonrpc.request.id"] == "7"
    assert not [s for s in collector.spans if s["trace"] == header_trace]
