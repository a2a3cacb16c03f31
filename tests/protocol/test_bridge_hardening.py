"""The bridge's low findings of issue 17, reproduced through the real bridge process.

An upstream (the hostile test server in ``echo`` mode) that quotes the credential it was sent
in its errors, results and tool descriptions: no form of it reaches the agent, the audit or
the bridge's log. A header Secret with CR/LF fails that one server, which is never contacted,
with the reason in ``/readyz``, the metrics and the hint, while the other server keeps
working. A made-up tool name and a lone surrogate get answers and audit lines without the
name, never a 500.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import peers
from tests.support.bridge_run import CountingProxy, RunningBridge, run_bridge, server_entry

pytestmark = pytest.mark.timeout(120)

TOKEN = "ghp_R3alLooking0Token1234567890abcdefXYZ"
BEARER = f"Bearer {TOKEN}"
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}},
}


def _forms(value: str) -> list[str]:
    """What must never show: the token and the encodings a server would use."""
    encoded = base64.b64encode(f"Authorization: {value}".encode()).decode()
    return [TOKEN, TOKEN.lower(), TOKEN.upper(), urllib.parse.quote(value), encoded[12:44]]


def _session(bridge: RunningBridge) -> dict[str, str]:
    answer = httpx.post(bridge.url, json=INIT, headers=ACCEPT, timeout=10)
    assert answer.status_code == 200
    return {**ACCEPT, "mcp-session-id": answer.headers["mcp-session-id"]}


def _call(bridge: RunningBridge, session: dict[str, str], name: Any, request_id: int = 1) -> Any:
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": {}}}  # fmt: skip
    answer = httpx.post(bridge.url, json=body, headers=session, timeout=30)
    assert answer.status_code < 500, answer.text
    return answer.json()


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(BEARER + "\n")
    return path


@pytest.fixture
def echoing(secret_file: Path) -> Iterator[RunningBridge]:
    with peers.hostile_server("echo") as url:
        header = {"name": "Authorization", "valueFile": str(secret_file)}
        with run_bridge([server_entry("echo", url, headers=[header])]) as bridge:
            yield bridge


def test_an_upstream_that_echoes_the_credential_never_shows_it_to_the_agent_or_the_audit(
    echoing: RunningBridge,
) -> None:
    session = _session(echoing)
    listed = httpx.post(echoing.url, json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
                        headers=session, timeout=10).text  # fmt: skip
    rejected = _call(echoing, session, "echo_plain")["result"]
    encoded = _call(echoing, session, "echo_b64", 2)["result"]
    upper = _call(echoing, session, "echo_upper", 3)["result"]
    assert rejected["structuredContent"]["code"] == "upstream_error"
    assert "Unauthorized: the token" in rejected["structuredContent"]["hint"]
    assert encoded["isError"] is True and upper["isError"] is True
    shown = json.dumps([rejected, encoded, upper]) + listed
    audit = json.dumps(echoing.audit_lines())
    for form in _forms(BEARER):
        assert form not in shown, form
        assert form not in audit and form not in echoing.log(), form
    assert "***" in json.dumps(rejected) and "***" in listed


def test_a_listing_refused_in_words_that_quote_the_credential_is_logged_masked(
    secret_file: Path,
) -> None:
    with peers.hostile_server("echo-refusing") as url:
        header = {"name": "Authorization", "valueFile": str(secret_file)}
        with run_bridge([server_entry("refusing", url, headers=[header])]) as bridge:
            log = bridge.log()
    assert "Could not list the tools of server default/refusing" in log
    assert "Unauthorized: the token *** may not list tools" in log
    for form in _forms(BEARER):
        assert form not in log, form


@dataclass
class OneServerFailed:
    """What the agent, ``/readyz``, ``/metrics`` and the log show of a bridge with two servers,
    ``bad`` (configured with headers it cannot be called with) and ``good``."""

    ready: httpx.Response
    metrics: str
    good: Any
    """The answer to a call of ``good_echo``."""
    bad: Any
    """The answer to a call of ``bad_echo``."""
    bad_calls: int
    """``tools/call`` requests that reached the bad server."""
    log: str


def _one_server_failed(headers: list[dict[str, str]]) -> OneServerFailed:
    with (
        peers.hostile_server("ok") as bad_url,
        CountingProxy(bad_url) as counted,
        peers.hostile_server("ok") as good_url,
    ):
        servers = [
            server_entry("bad", counted.url, headers=headers),
            server_entry("good", good_url),
        ]
        with run_bridge(servers) as bridge:
            ready = httpx.get(f"{bridge.health}/readyz", timeout=5)
            metrics = httpx.get(f"{bridge.health}/metrics", timeout=5).text
            session = _session(bridge)
            good = _call(bridge, session, "good_echo")["result"]  # echoes "" (no message)
            bad = _call(bridge, session, "bad_echo", 2)["result"]
            assert bridge.process.poll() is None  # the bridge did not exit
            log = bridge.log()
        return OneServerFailed(ready, metrics, good, bad, counted.calls, log)


def test_a_header_value_with_cr_lf_fails_that_one_server_and_the_others_keep_working(
    tmp_path: Path,
) -> None:
    forged = tmp_path / "forged"
    forged.write_text("Bearer x\r\nX-Forged: yes\n")
    failed = _one_server_failed([{"name": "Authorization", "valueFile": str(forged)}])
    ready, metrics, good, bad = failed.ready, failed.metrics, failed.good, failed.bad
    assert ready.status_code == 200
    problem = ready.json()["servers"]["default/bad"]["problem"]
    assert "control character" in problem and "default/bad" in problem
    assert ready.json()["servers"]["default/good"]["up"] is True
    assert 'mcp_bridge_upstream_misconfigured{reason="InvalidHeader",server="default/bad"} 1.0' in (
        metrics
    )
    assert 'mcp_bridge_upstream_up{server="default/bad"} 0.0' in metrics
    assert good["isError"] is False
    assert bad["structuredContent"]["code"] == "not_allowlisted"
    assert "Server default/bad cannot be called" in bad["structuredContent"]["hint"]
    assert "control character" in bad["structuredContent"]["hint"]
    assert failed.bad_calls == 0


def test_an_unreadable_header_file_fails_that_one_server_and_the_others_keep_working(
    tmp_path: Path, secret_file: Path
) -> None:
    missing = tmp_path / "not-mounted" / "token"
    failed = _one_server_failed(
        [
            {"name": "X-Team", "valueFile": str(secret_file)},
            {"name": "Authorization", "valueFile": str(missing)},
        ]
    )
    ready, metrics, good, bad = failed.ready, failed.metrics, failed.good, failed.bad
    assert ready.status_code == 200
    problem = ready.json()["servers"]["default/bad"]["problem"]
    assert "header Authorization could not be read" in problem and str(missing) in problem
    assert ready.json()["servers"]["default/good"]["up"] is True
    misconfigured = 'mcp_bridge_upstream_misconfigured{{reason="{}",server="default/bad"}} {}'
    assert misconfigured.format("UnreadableHeader", "1.0") in metrics
    assert misconfigured.format("InvalidHeader", "0.0") in metrics
    assert 'mcp_bridge_upstream_up{server="default/bad"} 0.0' in metrics
    assert good["isError"] is False
    assert "Server default/bad cannot be called" in bad["structuredContent"]["hint"]
    assert "could not be read" in bad["structuredContent"]["hint"]
    assert "Could not use server default/bad: header Authorization could not be read" in (
        failed.log
    )
    assert BEARER not in failed.log
    assert failed.bad_calls == 0


def test_a_made_up_name_and_a_lone_surrogate_get_answers_and_audit_lines_without_the_name(
    echoing: RunningBridge,
) -> None:
    session = _session(echoing)
    invented = _call(echoing, session, "ssn 123-45-6789 of john.doe@example.com")
    assert invented["result"]["structuredContent"]["code"] == "not_allowlisted"
    raw = (b'{"jsonrpc":"2.0","id":5,"method":"tools/call",'
           b'"params":{"name":"x\\ud800y","arguments":{}}}')  # fmt: skip
    surrogate = httpx.post(echoing.url, content=raw, headers=session, timeout=10)
    assert surrogate.status_code == 200
    assert surrogate.json()["result"]["structuredContent"]["code"] == "not_allowlisted"
    broken = httpx.post(echoing.url, content=b'{"jsonrpc": "2.0", "id": 6, "method": "to',
                        headers=session, timeout=10)  # fmt: skip
    assert broken.status_code == 400 and broken.json()["error"]["code"] == -32700
    lines = echoing.audit_lines()
    assert [line["tool"] for line in lines] == ["(unknown)"] * 3
    assert [line["outcome"] for line in lines] == ["not_allowlisted"] * 2 + ["invalid_request"]
    log = echoing.log()
    assert "123-45-6789" not in log and "john.doe" not in log
