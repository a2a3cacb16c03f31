"""The authenticating front of an HTTP-native server traces what it forwards.

Our adapter in front mode (``--upstream-url``, what a managed ``streamable-http`` MCPServer
runs with ``spec.tracing``) in front of server-everything's own Streamable HTTP transport,
with the standard ``OTEL_*`` variables pointing at a collector stand-in of this test: a
forwarded ``tools/call`` gets a SERVER span whose parent is the context in its
``params._meta`` and whose link is the HTTP header's, and the server still gets the call
(the body is forwarded as it came). Arguments are never recorded.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support import peers, wire
from tests.support.otlp_collector import Collector
from tests.support.waiting import eventually

pytestmark = [pytest.mark.timeout(120)]

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
SECRET = "argument-value-never-recorded"


@pytest.fixture
def collector() -> Iterator[Collector]:
    collector = Collector()
    yield collector
    collector.close()


def test_the_front_makes_a_server_span_per_forwarded_request(
    everything_url: str, collector: Collector
) -> None:
    port = peers.free_port()
    argv = [sys.executable, "-m", "mcp_operator", "adapter", f"--upstream-url={everything_url}",
            "--port", str(port), "--auth=none"]  # fmt: skip
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, "OTEL_BSP_SCHEDULE_DELAY": "50"}
    meta_trace, meta_span = "5" * 32, "6" * 16
    header_trace, header_span = "7" * 32, "8" * 16
    with peers.run_server(argv, port, name="front", env=env), httpx.Client(timeout=10) as http:
        front = f"http://127.0.0.1:{port}/mcp"
        opened = http.post(front, json=wire.initialize(), headers=ACCEPT)
        assert opened.status_code == 200, opened.text
        session = {"mcp-session-id": opened.headers["mcp-session-id"]}
        http.post(front, json=wire.initialized(), headers={**ACCEPT, **session})
        meta = f"00-{meta_trace}-{meta_span}-01"
        call = wire.traced_call("echo", {"message": SECRET}, meta, id=9)
        headers = {**ACCEPT, **session, "traceparent": f"00-{header_trace}-{header_span}-01"}
        answered = http.post(front, json=call, headers=headers)
        assert answered.status_code == 200, answered.text
        assert SECRET in answered.text  # the server got the call and echoed it

        def spans() -> list[dict[str, Any]]:
            return [s for s in collector.spans if s["trace"] == meta_trace]

        eventually("the front's server span", spans, timeout=15)
    (span,) = spans()
    assert span["service"] == "mcp-operator-adapter"
    assert span["kind"] == "SERVER"
    assert span["name"] == "tools/call echo"
    assert span["parent"] == meta_span
    assert span["links"] == [(header_trace, header_span)]
    assert span["attributes"]["jsonrpc.request.id"] == "9"
    assert span["attributes"]["mcp.session.id"] == session["mcp-session-id"]
    assert span["attributes"]["gen_ai.tool.name"] == "echo"
    assert not span["error"]
    assert SECRET not in repr(collector.spans)
