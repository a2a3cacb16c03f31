"""The table that turns a failed probe into one reason and message (mcp_operator.mcp.errors)."""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl

import pydantic
import pytest
from mcp_types import INVALID_REQUEST

from mcp_operator.mcp.errors import HTTPStatus, ProbeError, ProbeState, ResponseTooLarge, scrub
from mcp_operator.mcp.failures import McpFailure
from mcp_operator.mcp.translation import RULES, match, translate
from mcp_operator.net.http1 import BrokenHTTP, ConnectFailed, ConnectionLost

URL = "http://srv.example/mcp"
MiB = 1024 * 1024


def state(**seen: object) -> ProbeState:
    probe = ProbeState(URL, 2.0)
    probe.phase = "the handshake"
    for name, value in seen.items():
        setattr(probe, name, value)
    return probe


def connect_error(text: str, cause: BaseException | None = None) -> ConnectFailed:
    """What the pool raises when it cannot connect (net/pool.py), with the OS's error under
    it, or (``cause`` None) only its text."""
    error = ConnectFailed(text)
    error.__cause__ = cause
    return error


def cert_error() -> ssl.SSLCertVerificationError:
    error = ssl.SSLCertVerificationError(1, "certificate verify failed")
    error.verify_message = "self-signed certificate"
    return error


def tls_error() -> ssl.SSLError:
    error = ssl.SSLError(1, "wrong version number")
    error.reason = "WRONG_VERSION_NUMBER"
    return error


def validation_error() -> pydantic.ValidationError:
    class Shape(pydantic.BaseModel):
        a: int
        b: int

    try:
        Shape.model_validate({"a": "x", "b": "y"})
    except pydantic.ValidationError as error:
        return error
    raise AssertionError("the model accepted bad input")


CANNOT = f"could not connect to {URL}:"

CASES = [
    pytest.param(
        RuntimeError("aborted read"),
        state(probe_limit=64 * MiB),
        "ResponseTooLarge",
        f"{URL} sent more than 64 MiB in one probe (stopped in the handshake)",
        id="probe-byte-bound",
    ),
    pytest.param(
        RuntimeError("aborted read"),
        state(response_limit=16 * MiB),
        "ResponseTooLarge",
        f"{URL} sent a response larger than 16 MiB during the handshake",
        id="response-byte-bound",
    ),
    pytest.param(
        ExceptionGroup("tasks", [ValueError("x"), ResponseTooLarge(16 * MiB)]),
        state(),
        "ResponseTooLarge",
        f"{URL} sent a response larger than 16 MiB during the handshake",
        id="response-too-large-raised",
    ),
    pytest.param(
        TimeoutError(),
        state(),
        "Timeout",
        f"{URL} did not complete the probe within 2s (stuck in the handshake)",
        id="deadline",
    ),
    pytest.param(
        connect_error("x", cert_error()),
        state(),
        "TLSError",
        f"{CANNOT} certificate verification failed (self-signed certificate)",
        id="certificate",
    ),
    pytest.param(
        connect_error("x", tls_error()),
        state(),
        "TLSError",
        f"{CANNOT} TLS handshake failed (WRONG_VERSION_NUMBER)",
        id="tls-handshake",
    ),
    pytest.param(
        connect_error("x", socket.gaierror(-2, "Name or service not known")),
        state(),
        "Unreachable",
        f"{CANNOT} host name not resolved",
        id="dns",
    ),
    pytest.param(
        connect_error("x", ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")),
        state(),
        "Unreachable",
        f"{CANNOT} connection refused",
        id="refused",
    ),
    pytest.param(
        connect_error("x", OSError(errno.ENETUNREACH, "Network is unreachable")),
        state(),
        "Unreachable",
        f"{CANNOT} no route to host",
        id="no-route",
    ),
    pytest.param(
        connect_error("x", OSError(errno.EACCES, "Permission Denied")),
        state(),
        "Unreachable",
        f"{CANNOT} permission denied",
        id="other-os-error",
    ),
    pytest.param(
        connect_error("All connection attempts failed"),
        state(),
        "Unreachable",
        f"{CANNOT} connection refused",
        id="text-refused",
    ),
    pytest.param(
        connect_error("[Errno 8] nodename nor servname provided"),
        state(),
        "Unreachable",
        f"{CANNOT} host name not resolved",
        id="text-dns",
    ),
    pytest.param(
        connect_error("SSL: record layer failure"),
        state(),
        "TLSError",
        f"{CANNOT} TLS handshake failed",
        id="text-tls",
    ),
    pytest.param(
        connect_error("something else"),
        state(),
        "Unreachable",
        f"{CANNOT} connection failed",
        id="connect-other",
    ),
    pytest.param(
        HTTPStatus(503),
        state(),
        "HTTPError",
        f"{URL} answered HTTP 503 Service Unavailable during the handshake",
        id="http-status-lean",
    ),
    pytest.param(
        BrokenHTTP("the answer is not HTTP/1.1: invalid constant string"),
        state(),
        "ProtocolError",
        f"{URL} broke the HTTP protocol during the handshake",
        id="broken-http-lean",
    ),
    pytest.param(
        ConnectionLost("the server closed the connection mid-answer"),
        state(),
        "Unreachable",
        f"the connection to {URL} failed during the handshake (ConnectionLost)",
        id="connection-lost-lean",
    ),
    pytest.param(
        McpFailure("rpc", "x", code=-32001, detail="denied: " + "z" * 500),
        state(),
        "ServerError",
        f"{URL} answered the handshake with error -32001: denied: " + "z" * 191 + "…",
        id="json-rpc-error-cut",
    ),
    pytest.param(
        McpFailure("timeout", "the server did not answer tools/list within 5s"),
        state(),
        "Timeout",
        f"{URL} did not complete the probe within 2s (stuck in the handshake)",
        id="session-timeout",
    ),
    pytest.param(
        McpFailure(
            "credentials",
            "no credentials for the server: the token file /var/run/t/token does not exist",
        ),
        state(),
        "CredentialsUnavailable",
        "no credentials for the server: the token file /var/run/t/token does not exist",
        id="session-credentials-unavailable",
    ),
    pytest.param(
        McpFailure(
            "http",
            "HTTP 401",
            status=401,
            challenge='Bearer error="invalid_token", resource_metadata="https://srv.example/.well-known/oauth-protected-resource/mcp"',
        ),
        state(),
        "AuthRequired",
        f"{URL} (during the handshake) answered HTTP 401 asking for Bearer authentication "
        "(error invalid_token; resource metadata "
        "https://srv.example/.well-known/oauth-protected-resource/mcp): configure spec.auth "
        "(see docs/authentication.md)",
        id="session-401-challenge",
    ),
    pytest.param(
        McpFailure("http", "HTTP 401", status=401),
        state(),
        "AuthRequired",
        f"{URL} (during the handshake) answered HTTP 401 without a WWW-Authenticate challenge",
        id="session-401-without-challenge",
    ),
    pytest.param(
        McpFailure(
            "http",
            "HTTP 403",
            status=403,
            challenge='Bearer error="insufficient_scope", scope="files:read files:write"',
        ),
        state(),
        "InsufficientScope",
        f"{URL} (during the handshake) answered HTTP 403: the token lacks a scope it needs "
        "(scope 'files:read files:write'): grant the client that scope, or ask for it in "
        "spec.auth",
        id="session-403-insufficient-scope",
    ),
    pytest.param(
        McpFailure("http", "HTTP 403", status=403, challenge='Bearer realm="x"'),
        state(),
        "HTTPError",
        f"{URL} answered HTTP 403 Forbidden during the handshake",
        id="session-403-other",
    ),
    pytest.param(
        McpFailure("json", "the server answered with a body that is not JSON"),
        state(),
        "ProtocolError",
        f"{URL} answered the handshake with a body that is not valid JSON-RPC",
        id="session-not-json",
    ),
    pytest.param(
        McpFailure("mismatch", "the answer is not the response to the request"),
        state(),
        "ProtocolError",
        f"{URL} gave an answer that is not MCP during the handshake: "
        "the answer is not the response to the request",
        id="session-answer-to-another-request",
    ),
    pytest.param(
        McpFailure("rpc", "x", code=INVALID_REQUEST, detail="wrong\n   request"),
        state(),
        "ProtocolError",
        f"{URL} gave an answer that is not MCP during the handshake: wrong request",
        id="session-invalid-request",
    ),
    pytest.param(
        McpFailure("rpc", "x", code=-32001, detail="denied"),
        state(),
        "ServerError",
        f"{URL} answered the handshake with error -32001: denied",
        id="session-json-rpc-error",
    ),
    pytest.param(
        validation_error(),
        state(),
        "ProtocolError",
        f"{URL} gave an answer that does not match the MCP schema during the handshake "
        "(2 validation errors)",
        id="schema",
    ),
]


@pytest.mark.parametrize(("error", "seen", "reason", "message"), CASES)
def test_each_rule_gives_its_reason_and_message(
    error: BaseException, seen: ProbeState, reason: str, message: str
) -> None:
    translated = translate(error, seen)
    assert (translated.reason, translated.message) == (reason, message)


def test_every_rule_of_the_table_is_exercised_by_a_case() -> None:
    used = set()
    for case in CASES:
        error, seen, _, _ = case.values
        found = match(error, seen)  # type: ignore[arg-type]
        assert found is not None, case.id
        used.add(id(found[0]))
    unused = [rule for rule in RULES if id(rule) not in used]
    assert unused == []


def test_a_probe_error_raised_inside_is_kept_as_it_is() -> None:
    own = ProbeError("TooManyPages", "the server's tool list runs past 100 pages")
    group = ExceptionGroup("tasks", [TimeoutError(), own])
    assert translate(group, state(probe_limit=64 * MiB)) is own


def test_rules_are_tried_in_order_across_the_failures_of_a_group() -> None:
    group = ExceptionGroup("tasks", [ConnectionLost("reset"), TimeoutError()])
    assert translate(group, state()).reason == "Timeout"


def test_rows_of_one_kind_judge_the_first_failure_of_that_kind() -> None:
    first = McpFailure("rpc", "x", code=-32001, detail="first")
    second = McpFailure("json", "the server answered with a body that is not JSON")
    translated = translate(ExceptionGroup("tasks", [first, second]), state())
    assert translated.reason == "ServerError"
    assert translated.message.endswith("with error -32001: first")


def test_an_unknown_failure_names_its_types() -> None:
    group = ExceptionGroup("tasks", [KeyError("k"), ValueError("v"), KeyError("j")])
    translated = translate(group, state())
    assert translated.reason == "ProbeFailed"
    assert translated.message == (
        f"the probe of {URL} failed during the handshake: KeyError, ValueError"
    )


def test_scrub_masks_echoed_header_values_whole_and_cut() -> None:
    secret = "Bearer s3cr3t-token-value-42"
    error = ProbeError("ServerError", f"bad {secret} and s3cr3t-tok…")
    masked = scrub(error, {"Authorization": secret})
    assert "s3cr3t" not in masked.message
    assert masked.reason == "ServerError"
    assert scrub(ProbeError("Timeout", "clean"), {"Authorization": secret}).message == "clean"


async def test_a_probe_whose_cancellation_came_back_as_an_error_ends_cancelled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The SDK's task groups can answer our cancellation with anyio's BrokenResourceError;
    discover must end cancelled, not with a ProbeError its caller would write to status."""
    import anyio

    from mcp_operator.mcp import discovery
    from mcp_operator.mcp.target import ProbeTarget
    from mcp_operator.net.egress import EgressPolicy

    started = asyncio.Event()

    async def swallowing(*_args: object) -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise anyio.BrokenResourceError from None

    monkeypatch.setattr(discovery, "_discover", swallowing)
    target = ProbeTarget("http://127.0.0.1:9/mcp", egress=EgressPolicy(allow_loopback=True))
    task = asyncio.create_task(discovery.discover(target))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
