"""The adapter's inbound authentication as a real process, with real HTTP and real peers.

Each test starts ``python -m mcp_operator adapter --auth kubernetes|oidc --access-config
FILE`` on loopback, in front of npm ``server-everything`` (stdio) or of a small counting
stdio server written here (it writes every message it receives to a file, so that "the child
saw nothing" is a fact a test can read), with tokens signed by keys the test generated
(``tests/support/issuer.py``). The OIDC test runs the official SDK client's OAuth flow
(client credentials) against a local authorization server of the test's own: the client
finds our RFC 9728 metadata from the 401 challenge, gets a token for our resource, and calls.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from mcp_operator.net.egress import EgressPolicy
from mcp_operator.serve.auth.jwks import JwksFetcher
from tests.protocol import test_adapter
from tests.protocol.test_adapter import ACCEPT, EVERYTHING, INIT, Adapter, adapter
from tests.support import needs, wire
from tests.support.issuer import TestIssuer, access_document, write_access
from tests.support.peers import free_port
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(180)
needs_node = needs.mark(needs.node_missing())

ISSUER = TestIssuer()

COUNTING_SERVER = r"""
import json, sys
seen = open(sys.argv[1], "a", buffering=1)
for raw in sys.stdin:
    msg = json.loads(raw)
    seen.write((msg.get("method") or "answer") + "\n")
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"],
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "counting", "version": "0"}}
    elif msg["method"] == "tools/list":
        result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    elif msg["method"] == "tools/call":
        result = {"content": [{"type": "text", "text": "echo"}]}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"""


def bearer(token: str) -> dict[str, str]:
    return {**ACCEPT, "authorization": f"Bearer {token}"}


def sdk_http(token: str) -> httpx2.AsyncClient:
    """The HTTP client for the SDK's transport, sending ``token`` on every request."""
    return httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=30)


@pytest.fixture
def counted(tmp_path: Path) -> Iterator[tuple[Adapter, Path, Path]]:
    """An authenticating adapter in front of the counting server: (adapter, seen, access)."""
    script = tmp_path / "counting.py"
    script.write_text(COUNTING_SERVER)
    seen = tmp_path / "seen.txt"
    access = write_access(tmp_path / "access.json", access_document(ISSUER))
    command = (sys.executable, str(script), str(seen))
    with adapter(command, tmp_path, "--auth=kubernetes", f"--access-config={access}") as running:
        yield running, seen, access


def methods_seen(seen: Path) -> list[str]:
    return seen.read_text().split()


def refusals(running: Adapter) -> dict[str, float]:
    counts: dict[str, float] = {}
    for line in running.health("/metrics").text.splitlines():
        if line.startswith("mcp_adapter_auth_refusals_total{"):
            reason = line.split('reason="', 1)[1].split('"', 1)[0]
            counts[reason] = float(line.rsplit(" ", 1)[1])
    return counts


def modern_call(token: str | None) -> tuple[dict[str, Any], dict[str, str]]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = wire.request("tools/call", {"name": "echo", "arguments": {}, "_meta": meta})
    headers = {**ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
               "mcp-name": "echo"}  # fmt: skip
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return body, headers


def test_refused_requests_never_reach_the_child_in_either_era(
    counted: tuple[Adapter, Path, Path],
) -> None:
    running, seen, _ = counted
    before = methods_seen(seen)
    assert before[:2] == ["initialize", "notifications/initialized"]  # the adapter's own
    assert "tools/call" not in before
    wrong = ISSUER.service_account_token(audience="mcpserver.mcp-operator.dev/tools/other")
    stranger = ISSUER.service_account_token("elsewhere", "agent")
    with httpx.Client(timeout=10) as http:
        answers = {
            "missing": http.post(running.url, json=INIT, headers=ACCEPT),
            "wrong_audience": http.post(running.url, json=INIT, headers=bearer(wrong)),
            "malformed": http.post(running.url, json=INIT, headers=bearer("x" * 100_000)),
            "forbidden": http.post(running.url, json=INIT, headers=bearer(stranger)),
        }
        body, headers = modern_call(None)
        modern_missing = http.post(running.url, json=body, headers=headers)
        body, headers = modern_call(wrong)
        modern_wrong = http.post(running.url, json=body, headers=headers)
    assert {reason: answer.status_code for reason, answer in answers.items()} == {
        "missing": 401, "wrong_audience": 401, "malformed": 401, "forbidden": 403}  # fmt: skip
    assert answers["missing"].headers["www-authenticate"] == "Bearer"
    assert 'error="invalid_token"' in answers["wrong_audience"].headers["www-authenticate"]
    assert "system:serviceaccount:elsewhere:agent" in answers["forbidden"].text
    assert stranger not in answers["forbidden"].text
    for answer in answers.values():  # never a JSON-RPC answer
        assert not answer.headers["content-type"].startswith("application/json")
    assert (modern_missing.status_code, modern_wrong.status_code) == (401, 401)
    assert methods_seen(seen) == before
    assert refusals(running) == {"missing": 2.0, "wrong_audience": 2.0, "malformed": 1.0,
                                 "forbidden": 1.0}  # fmt: skip
    assert stranger not in running.logs() and wrong not in running.logs()


def test_a_permitted_caller_is_served_in_both_eras_and_logged_once_without_its_token(
    counted: tuple[Adapter, Path, Path],
) -> None:
    running, seen, _ = counted
    token = ISSUER.service_account_token(pod="run-7")
    with httpx.Client(timeout=10) as http:
        first = http.post(running.url, json=INIT, headers=bearer(token))
        assert first.status_code == 200, first.text
        session = {"mcp-session-id": first.headers["mcp-session-id"]}
        call = wire.request("tools/call", {"name": "echo", "arguments": {}}, id=2)
        legacy = http.post(running.url, json=call, headers={**bearer(token), **session})
        # the service proxy's header, in the 2026-07-28 era
        body, headers = modern_call(None)
        headers["mcp-operator-authorization"] = f"Bearer {token}"
        modern = http.post(running.url, json=body, headers=headers)
        # a session opened by one caller is no use without a token, nor to another caller
        stolen = http.post(running.url, json=call, headers={**ACCEPT, **session})
        other = bearer(ISSUER.service_account_token(name="other-agent"))
        borrowed = http.post(running.url, json=call, headers={**other, **session})
        gone = http.delete(running.url, headers={**other, **session})
        listen = http.get(running.url, headers={**other, **session, "accept": "text/event-stream"})
    assert legacy.status_code == 200 and "echo" in legacy.text
    assert modern.status_code == 200 and "echo" in modern.text
    assert stolen.status_code == 401
    assert (borrowed.status_code, gone.status_code, listen.status_code) == (404, 404, 404)
    assert methods_seen(seen).count("tools/call") == 2
    log = running.logs()
    assert log.count("Verified caller system:serviceaccount:team:agent (pod run-7)") == 1
    assert token not in log
    health = running.health().json()
    assert health["auth"] == "kubernetes"
    assert 'mcp_adapter_auth_mode{mode="kubernetes"} 1.0' in running.health("/metrics").text


def test_a_revoked_pod_is_refused_once_the_file_changes_and_a_bad_update_is_survived(
    counted: tuple[Adapter, Path, Path],
) -> None:
    running, _, access = counted
    token = ISSUER.service_account_token(pod_uid="uid-gone")
    with httpx.Client(timeout=10) as http:
        assert http.post(running.url, json=INIT, headers=bearer(token)).status_code == 200
        access.write_text("{broken")
        time.sleep(1.5)  # the file is checked at most once a second
        assert http.post(running.url, json=INIT, headers=bearer(token)).status_code == 200
        write_access(access, access_document(ISSUER, revoked=["uid-gone"]))
        deadline = time.monotonic() + 10
        while http.post(running.url, json=INIT, headers=bearer(token)).status_code != 401:
            assert time.monotonic() < deadline, running.logs()
            time.sleep(0.2)
    assert "Kept the last good access configuration" in running.logs()
    assert refusals(running).get("revoked", 0) >= 1


def test_without_an_access_configuration_the_adapter_refuses_to_start(tmp_path: Path) -> None:
    import subprocess

    base = [*test_adapter.PROGRAM, "--port", str(free_port())]
    missing = subprocess.run([*base, "--", "true"], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "needs --access-config" in missing.stderr
    (tmp_path / "bad.json").write_text('{"audience": 1}')
    bad = subprocess.run([*base, f"--access-config={tmp_path / 'bad.json'}", "--", "true"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "audience must be a non-empty string" in bad.stderr


@needs_node
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_sdk_client_with_a_token_calls_server_everything_in_both_eras(
    tmp_path: Path, mode: str
) -> None:
    access = write_access(tmp_path / "access.json", access_document(ISSUER))
    token = ISSUER.service_account_token()
    flags = ("--auth=kubernetes", f"--access-config={access}")
    with adapter(EVERYTHING, tmp_path, *flags) as running:
        http = sdk_http(token)
        async with (
            http,
            Client(streamable_http_client(running.url, http_client=http), mode=mode) as client,
        ):
            result = await client.call_tool("echo", {"message": f"hi {mode}"})
        assert result.content[0].text == f"Echo: hi {mode}"  # type: ignore[union-attr]
        async with httpx.AsyncClient(timeout=10) as plain:
            anonymous = await plain.post(running.url, json=INIT, headers=ACCEPT)
        assert anonymous.status_code == 401


# ------------------------------------------------------------------ OIDC, with the SDK's OAuth


class ThreadedHttp:
    """A ``ThreadingHTTPServer`` on a free loopback port, served from a thread while entered."""

    def serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._http = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    def __enter__(self) -> Any:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()


class AuthorizationServer(ThreadedHttp):
    """A local OAuth 2.0 authorization server: metadata, a client-credentials token endpoint
    that honours RFC 8707 ``resource`` (the token's audience), and its JWKS."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.issuer = TestIssuer(self.url, alg="ES256")
        self.resources: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def answer(self, status: int, document: Any) -> None:
                data = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/.well-known/oauth-authorization-server":
                    self.answer(200, {
                        "issuer": server.url,
                        "authorization_endpoint": f"{server.url}/authorize",
                        "token_endpoint": f"{server.url}/token",
                        "jwks_uri": f"{server.url}/jwks",
                        "response_types_supported": ["code"],
                        "grant_types_supported": ["client_credentials"],
                        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
                    })  # fmt: skip
                elif self.path == "/jwks":
                    self.answer(200, server.issuer.jwks())
                elif self.path == "/huge":
                    self.answer(200, {"keys": [{"kty": "RSA", "n": "A" * 300_000}]})
                elif self.path == "/odd":
                    self.answer(200, {"keys": [{"kty": "oct", "k": "c2VjcmV0"}, 7, None]})
                else:
                    self.answer(404, {"error": "not_found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                basic = base64.b64decode(self.headers["authorization"].split(" ", 1)[1]).decode()
                if self.path != "/token" or basic != "ide:secret":
                    self.answer(401, {"error": "invalid_client"})
                    return
                resource = form.get("resource", [""])[0]
                server.resources.append(resource)
                token = server.issuer.oidc_token("ide-user", resource)
                self.answer(200, {"access_token": token, "token_type": "Bearer", "expires_in": 300})

        self.serve(Handler)


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@pytest.fixture
def oidc_adapter(tmp_path: Path) -> Iterator[tuple[Adapter, AuthorizationServer]]:
    needs.require(needs.node_missing())
    with AuthorizationServer() as authorization:
        port = free_port()
        resource = f"http://127.0.0.1:{port}/mcp"
        oidc = {"issuer": authorization.url, "audience": resource, "resource": resource,
                "authorizationServers": [authorization.url],
                "jwks": authorization.issuer.jwks()}  # fmt: skip
        access = write_access(tmp_path / "access.json", access_document(ISSUER, oidc=oidc))
        flags = ("--auth=oidc", f"--access-config={access}")
        with adapter(EVERYTHING, tmp_path, *flags, port=port) as running:
            assert running.url == resource
            yield running, authorization


async def test_the_sdk_clients_oauth_flow_discovers_our_metadata_and_its_token_is_accepted(
    oidc_adapter: tuple[Adapter, AuthorizationServer],
) -> None:
    running, authorization = oidc_adapter
    metadata_url = f"{running.base}/.well-known/oauth-protected-resource/mcp"
    async with httpx.AsyncClient(timeout=10) as plain:
        challenge = await plain.post(running.url, json=INIT, headers=ACCEPT)
        document = (await plain.get(metadata_url)).json()
        root = (await plain.get(f"{running.base}/.well-known/oauth-protected-resource")).json()
    assert challenge.status_code == 401
    assert challenge.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_url}"'
    assert document == {"resource": running.url, "authorization_servers": [authorization.url],
                        "bearer_methods_supported": ["header"]}  # fmt: skip
    assert root == document
    provider = ClientCredentialsOAuthProvider(
        server_url=running.url, storage=MemoryStorage(), client_id="ide",
        client_secret="secret", issuer=authorization.url,
    )  # fmt: skip
    http = httpx2.AsyncClient(auth=provider, timeout=30)
    async with http, Client(streamable_http_client(running.url, http_client=http)) as client:
        result = await client.call_tool("echo", {"message": "from the IDE"})
    assert result.content[0].text == "Echo: from the IDE"  # type: ignore[union-attr]
    assert authorization.resources and set(authorization.resources) == {running.url}
    assert "Verified caller oidc:" in running.logs()


def test_oidc_tokens_that_are_expired_unsigned_for_another_audience_or_issuer_are_refused(
    oidc_adapter: tuple[Adapter, AuthorizationServer],
) -> None:
    running, authorization = oidc_adapter
    login = authorization.issuer
    good = login.oidc_token("ada", running.url)
    payload = good.split(".")[1]
    unsigned_header = base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').rstrip(b"=").decode()
    tokens = {
        "good": good,
        "expired": login.oidc_token("ada", running.url, now=time.time() - 3600),
        "unsigned": f"{unsigned_header}.{payload}.",
        "wrong_audience": login.oidc_token("ada", "http://127.0.0.1:1/mcp"),
        "wrong_issuer": TestIssuer("http://127.0.0.1:2", alg="ES256").oidc_token(
            "ada", running.url
        ),
    }
    with httpx.Client(timeout=10) as http:
        status = {name: http.post(running.url, json=INIT, headers=bearer(token)).status_code
                  for name, token in tokens.items()}  # fmt: skip
        challenge = http.post(running.url, json=INIT, headers=bearer(tokens["expired"]))
    assert status == {"good": 200, "expired": 401, "unsigned": 401, "wrong_audience": 401,
                      "wrong_issuer": 401}  # fmt: skip
    assert challenge.headers["www-authenticate"].startswith("Bearer resource_metadata=")
    assert 'error="invalid_token"' in challenge.headers["www-authenticate"]
    counts = refusals(running)
    assert counts["expired"] == 2 and counts["wrong_audience"] == 1
    assert (
        counts["wrong_issuer"] == 1
        and counts.get("unknown_key", 0) + counts.get("malformed", 0) == 1
    )


async def test_the_oidc_keys_are_fetched_from_the_jwks_url_and_refetched_for_a_new_kid() -> None:
    with AuthorizationServer() as authorization:
        now = [0.0]
        fetcher = JwksFetcher(f"{authorization.url}/jwks", clock=lambda: now[0],
                              egress=EgressPolicy(allow_loopback=True))  # fmt: skip
        try:
            assert await fetcher.refresh()
            assert list(fetcher.keys.by_kid) == [authorization.issuer.kid]
            assert not await fetcher.refresh(unknown_kid=True)  # too soon after the last fetch
            authorization.issuer = TestIssuer(authorization.url, alg="ES256")  # rotated
            now[0] += 31
            assert await fetcher.refresh(unknown_kid=True)
            assert list(fetcher.keys.by_kid) == [authorization.issuer.kid]
            assert fetcher.fetches == 2
            kept = fetcher.keys
            for path in ("/huge", "/odd", "/missing"):  # hostile answers keep the last keys
                fetcher.url = f"{authorization.url}{path}"
                now[0] += 301
                assert not await fetcher.refresh()
                assert fetcher.keys is kept
            assert fetcher.failures == 3
        finally:
            await fetcher.aclose()
        refused = JwksFetcher(f"{authorization.url}/jwks", clock=lambda: 0.0)  # default egress
        try:
            assert not await refused.refresh() and refused.failures == 1  # loopback refused
        finally:
            await refused.aclose()


# ------------------------------------------------------------------ the front of an HTTP server


class QuietHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass


class Upstream(ThreadedHttp):
    """An HTTP server that records each POST's headers and answers a JSON-RPC result, or
    with ``stream`` an event stream: one event, then (once the test sets ``release``) another."""

    def __init__(self, *, stream: bool = False) -> None:
        self.port = free_port()
        self.seen: list[dict[str, str]] = []
        self.release = threading.Event()
        self.released_in_time: bool | None = None
        upstream = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                upstream.seen.append({k.lower(): v for k, v in self.headers.items()})
                self.rfile.read(int(self.headers.get("content-length", "0")))
                if stream:
                    self.events()
                    return
                data = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def events(self) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                self.wfile.write(b'event: message\ndata: {"first": true}\n\n')
                self.wfile.flush()
                upstream.released_in_time = upstream.release.wait(20)
                self.wfile.write(b'event: message\ndata: {"second": true}\n\n')
                self.wfile.flush()

        self.serve(Handler)


def test_the_front_refuses_before_the_upstream_and_never_passes_a_token_on(
    tmp_path: Path,
) -> None:
    access = write_access(tmp_path / "access.json", access_document(ISSUER))
    token = ISSUER.service_account_token()
    with Upstream() as upstream:
        url = f"http://127.0.0.1:{upstream.port}/mcp"
        flags = (f"--upstream-url={url}", "--auth=kubernetes", f"--access-config={access}")
        with adapter((), tmp_path, *flags) as front, httpx.Client(timeout=10) as http:
            assert http.post(front.url, json=INIT, headers=ACCEPT).status_code == 401
            stranger = ISSUER.service_account_token("elsewhere")
            assert http.post(front.url, json=INIT, headers=bearer(stranger)).status_code == 403
            assert upstream.seen == []
            both = {**bearer(token), "mcp-operator-authorization": f"Bearer {token}",
                    "x-trace": "kept"}  # fmt: skip
            answer = http.post(front.url, json=INIT, headers=both)
            assert answer.status_code == 200 and answer.json()["result"] == {}
            assert front.health().json()["auth"] == "kubernetes"
    assert len(upstream.seen) == 1
    seen = upstream.seen[0]
    assert "authorization" not in seen and "mcp-operator-authorization" not in seen
    assert seen["x-trace"] == "kept" and seen["host"] == f"127.0.0.1:{upstream.port}"
    assert all(token not in value for value in seen.values())


@needs_node
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_sdk_client_through_the_front_streams_from_server_everything_over_http(
    tmp_path: Path, mode: str
) -> None:
    from tests.support.peers import server_everything

    access = write_access(tmp_path / "access.json", access_document(ISSUER))
    token = ISSUER.service_account_token()
    with server_everything("streamableHttp") as url:
        flags = (f"--upstream-url={url}", "--auth=kubernetes", f"--access-config={access}")
        with adapter((), tmp_path, *flags) as front:
            http = sdk_http(token)
            transport = streamable_http_client(front.url, http_client=http)
            async with http, Client(transport, mode=mode) as client:
                tools = await client.list_tools()
                assert "echo" in {tool.name for tool in tools.tools}
                result = await client.call_tool("echo", {"message": f"via the front {mode}"})
    assert result.content[0].text == f"Echo: via the front {mode}"  # type: ignore[union-attr]


async def test_the_sdk_client_through_the_front_speaks_2026_with_mcp_server_time(
    tmp_path: Path,
) -> None:
    from tests.support.peers import mcp_server_time

    access = write_access(tmp_path / "access.json", access_document(ISSUER))
    token = ISSUER.service_account_token()
    with mcp_server_time() as url:
        flags = (f"--upstream-url={url}", "--auth=kubernetes", f"--access-config={access}")
        with adapter((), tmp_path, *flags) as front:
            http = sdk_http(token)
            transport = streamable_http_client(front.url, http_client=http)
            async with http, Client(transport, mode="auto") as client:
                result = await client.call_tool("get_current_time", {"timezone": "UTC"})
            async with httpx.AsyncClient(timeout=10) as plain:
                refused = await plain.post(front.url, json=INIT, headers=ACCEPT)
    assert '"timezone": "UTC"' in result.content[0].text  # type: ignore[union-attr]
    assert refused.status_code == 401


def test_the_front_takes_only_a_loopback_upstream(tmp_path: Path) -> None:
    import subprocess

    base = [*test_adapter.PROGRAM, "--auth=none"]
    for url, message in (("http://10.0.0.1:80/mcp", "loopback"), ("ftp://127.0.0.1/", "http")):
        run = subprocess.run([*base, f"--upstream-url={url}"], capture_output=True, text=True,
                             timeout=60)  # fmt: skip
        assert run.returncode == 2 and message in run.stderr


def test_the_audit_names_the_verified_caller_tool_and_outcome_never_the_arguments(
    tmp_path: Path,
) -> None:
    script = tmp_path / "counting.py"
    script.write_text(COUNTING_SERVER)
    access = write_access(tmp_path / "access.json", access_document(ISSUER))
    audit = tmp_path / "audit.jsonl"
    command = (sys.executable, str(script), str(tmp_path / "seen.txt"))
    flags = ("--auth=kubernetes", f"--access-config={access}", f"--audit={audit}")
    token = ISSUER.service_account_token(pod="run-9")
    secret_argument = "the-argument-value-4711"
    with adapter(command, tmp_path, *flags) as running, httpx.Client(timeout=10) as http:
        session = http.post(running.url, json=INIT, headers=bearer(token)).headers
        call = wire.request("tools/call", {"name": "echo", "arguments": {"x": secret_argument}})
        headers = {**bearer(token), "mcp-session-id": session["mcp-session-id"]}
        assert http.post(running.url, json=call, headers=headers).status_code == 200
        bad_name = wire.request("tools/call", {"name": "rm -rf /\n", "arguments": {}}, id=3)
        http.post(running.url, json=bad_name, headers=headers)
        body, modern = modern_call(token)
        assert http.post(running.url, json=body, headers=modern).status_code == 200
        http.post(running.url, json=call, headers=ACCEPT)  # refused: no line, never reached
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    caller = {"kind": "serviceaccount", "namespace": "team", "serviceAccount": "agent",
              "pod": "run-9"}  # fmt: skip
    assert [(line["caller"], line["tool"], line["outcome"]) for line in lines] == [
        (caller, "echo", "ok"), (caller, "(invalid)", "ok"), (caller, "echo", "ok")]  # fmt: skip
    assert "toolSha256" in lines[1] and all(line["durationMs"] >= 0 for line in lines)
    text = audit.read_text()
    assert secret_argument not in text and "rm -rf" not in text and token not in text


@needs_node
async def test_the_front_of_a_legacy_sse_server_streams_its_events_and_takes_its_messages(
    tmp_path: Path,
) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.sse import sse_client

    from tests.support.peers import server_everything

    access = write_access(tmp_path / "access.json", access_document(ISSUER))
    token = ISSUER.service_account_token()
    with server_everything("sse") as url:
        origin = url.rsplit("/", 1)[0]
        # server-everything's own paths: its stream on /sse, its messages on /message
        flags = (f"--upstream-url={origin}/mcp", "--sse", "--messages-path=/message",
                 "--auth=kubernetes", f"--access-config={access}")  # fmt: skip
        with adapter((), tmp_path, *flags) as front:
            async with httpx.AsyncClient(timeout=10) as plain:
                refused = await plain.get(
                    f"{front.base}/sse", headers={"accept": "text/event-stream"}
                )
                posted = await plain.post(f"{front.base}/message?sessionId=x", json=INIT)
            headers = {"authorization": f"Bearer {token}"}
            async with (
                sse_client(f"{front.base}/sse", headers=headers) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                result = await session.call_tool("echo", {"message": "over sse"})
    assert (refused.status_code, posted.status_code) == (401, 401)
    assert result.content[0].text == "Echo: over sse"  # type: ignore[union-attr]


def test_the_front_streams_an_event_before_the_upstream_has_finished(tmp_path: Path) -> None:
    access = write_access(tmp_path / "access.json", access_document(ISSUER))
    token = ISSUER.service_account_token()
    with Upstream(stream=True) as upstream:
        url = f"http://127.0.0.1:{upstream.port}/mcp"
        flags = (f"--upstream-url={url}", "--auth=kubernetes", f"--access-config={access}")
        with (
            adapter((), tmp_path, *flags) as front,
            httpx.Client(timeout=30) as http,
            http.stream("POST", front.url, json=INIT, headers=bearer(token)) as answer,
        ):
            assert answer.headers["content-type"] == "text/event-stream"
            chunks = answer.iter_bytes()
            first = next(chunks)
            upstream.release.set()  # only now may the upstream send its second event
            rest = b"".join(chunks)
    assert b'"first"' in first and b'"second"' not in first
    assert b'"second"' in rest and upstream.released_in_time is True


def test_a_client_gone_mid_stream_closes_the_upstream_connection(tmp_path: Path) -> None:
    access = write_access(tmp_path / "access.json", access_document(ISSUER))
    token = ISSUER.service_account_token()
    with Upstream(stream=True) as upstream:
        url = f"http://127.0.0.1:{upstream.port}/mcp"
        flags = (f"--upstream-url={url}", "--auth=kubernetes", f"--access-config={access}")
        with adapter((), tmp_path, *flags) as front:
            with (
                httpx.Client(timeout=30) as http,
                http.stream("POST", front.url, json=INIT, headers=bearer(token)) as answer,
            ):
                assert b'"first"' in next(answer.iter_bytes())
            # the client left before the second event: the front gives the stream up
            eventually(
                "the front has no request in flight",
                lambda: front.health().json()["inflight"],
                until=lambda inflight: inflight == 0,
                timeout=10,
            )
            upstream.release.set()
            with httpx.Client(timeout=10) as http:  # and still serves the next caller
                again = http.post(front.url, json=INIT, headers=bearer(token))
            assert again.status_code == 200
    assert len(upstream.seen) == 2
