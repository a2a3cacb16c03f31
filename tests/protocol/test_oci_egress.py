"""The registry reader connects only where the egress policy allows, on every hop.

A registry is a tenant's choice (an MCPServer's image), so the tests play a tenant who
controls one: a real HTTP registry on loopback (``tests/support/http_peer``) that asks for a
bearer token and keeps its configuration blob behind a redirect, as registries do with
their storage hosts. The redirect, or the token service, points at the cloud metadata
address, the API server, a loopback port, or a name that resolves to loopback. A listening
socket that nobody accepts from stands in for the victim: ``connected`` tells whether any
connection reached it. The allowed redirect carries no ``Authorization``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Callable

import pytest

from mcp_operator.net.egress import EgressPolicy
from mcp_operator.oci.auth import Credentials
from mcp_operator.oci.client import RegistryClient, RegistryError
from mcp_operator.oci.config import ImageConfig
from mcp_operator.oci.settings import RegistrySettings
from tests.protocol.test_egress import connected, victim
from tests.support.http_peer import Answer, Behaviour, HttpPeer, Request, http_peer

TOKEN = "tenant-registry-token"
CONFIG = json.dumps({"config": {"Entrypoint": ["/server"], "Cmd": ["stdio"]}}).encode()
CONFIG_DIGEST = "sha256:" + hashlib.sha256(CONFIG).hexdigest()
MANIFEST = json.dumps(
    {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"digest": CONFIG_DIGEST, "size": len(CONFIG)},
        "layers": [],
    }
).encode()


def registry_script(
    peer: Callable[[], HttpPeer], blob_at: str | None, realm: str | None = None
) -> Callable[[Request], Answer]:
    """A registry that challenges for a bearer token (its realm: ``realm`` or its own
    ``/token``), serves the manifest, and redirects the blob to ``blob_at`` (``None``:
    serves it)."""

    def respond(request: Request) -> Answer:
        own = f"http://{peer().host}:{peer().port}"
        if request.path.startswith("/token"):
            return 200, {"content-type": "application/json"}, json.dumps({"token": TOKEN}).encode()
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            challenge = f'Bearer realm="{realm or own + "/token"}",service="tenant"'
            return 401, {"www-authenticate": challenge}, b"{}"
        if "/manifests/" in request.path:
            kind = "application/vnd.oci.image.manifest.v1+json"
            return 200, {"content-type": kind}, MANIFEST
        if blob_at is None:
            return 200, {"content-type": "application/octet-stream"}, CONFIG
        return 307, {"location": f"{blob_at}/storage/{CONFIG_DIGEST}?X-Signature=s3cr3t"}, b""

    return respond


@contextlib.asynccontextmanager
async def tenant_registry(blob_at: str | None, realm: str | None = None) -> AsyncIterator[HttpPeer]:
    behaviour = Behaviour()
    async with http_peer(behaviour) as peer:
        behaviour.respond = registry_script(lambda: peer, blob_at, realm)
        yield peer


async def read(
    peer: HttpPeer,
    egress: EgressPolicy | None = None,
    *,
    named: bool = True,
    credentials: Credentials | None = None,
) -> ImageConfig:
    """The image's configuration, read with the registry named (or not) by the flags."""
    host = f"{peer.host}:{peer.port}"
    settings = RegistrySettings(
        insecure_hosts=frozenset({host}) if named else frozenset(), timeout_seconds=5
    )
    client = RegistryClient(settings, egress=egress)
    try:
        return await client.image_config(f"{host}/acme/server:1", credentials)
    finally:
        await client.aclose()


async def refused(peer: HttpPeer, egress: EgressPolicy | None = None) -> RegistryError:
    with pytest.raises(RegistryError) as caught:
        await read(peer, egress)
    return caught.value


@pytest.mark.parametrize(
    ("target", "hop", "why"),
    [
        ("http://169.254.169.254", "169.254.169.254:80", "169.254.169.254 is a cloud metadata"),
        ("http://[fd00:ec2::254]", "[fd00:ec2::254]:80", "fd00:ec2::254 is a cloud metadata"),
        ("http://metadata.google.internal", "metadata.google.internal:80", "is a cloud metadata"),
        ("http://169.254.10.1:8080", "169.254.10.1:8080", "169.254.10.1 is a link-local address"),
    ],
)
async def test_a_blob_redirected_to_the_metadata_endpoint_is_refused_whatever_is_allowed(
    target: str, hop: str, why: str
) -> None:
    async with tenant_registry(target) as peer:
        error = await refused(peer, EgressPolicy(allow_loopback=True, allow_private=True))
    assert error.reason == "ImageRegistryNotAllowed"
    assert f"did not connect to http://{hop} " in error.message
    assert why in error.message
    assert f"redirected from 127.0.0.1:{peer.port}" in error.message
    assert "s3cr3t" not in error.message, "a signed URL's query is no message's business"


@pytest.mark.parametrize(
    ("host", "why"),
    [
        ("127.0.0.1", "is a loopback address"),
        ("localhost", "is a loopback address"),  # a name, resolved at connect time
        ("[::ffff:127.0.0.1]", "is a loopback address"),
        ("0.0.0.0", "is the unspecified address"),  # Linux connects it to loopback
    ],
)
async def test_a_blob_redirected_to_a_refused_loopback_port_never_reaches_it(
    host: str, why: str
) -> None:
    """The registry itself is named by the flags (a local registry); where it redirects is
    not, and loopback is refused there, by address or by a name that resolves to it."""
    with victim() as (port, listener):
        async with tenant_registry(f"http://{host}:{port}") as peer:
            error = await refused(peer)
        assert error.reason == "ImageRegistryNotAllowed"
        assert why in error.message
        assert not connected(listener)
    assert [r.path.split("/")[-2] for r in peer.requests][-1] == "blobs"


async def test_a_blob_redirected_to_the_api_server_never_reaches_it() -> None:
    with victim() as (port, listener):
        egress = EgressPolicy(allow_loopback=True).with_refused([("127.0.0.1", port)])
        async with tenant_registry(f"http://127.0.0.1:{port}") as peer:
            error = await refused(peer, egress)
        assert error.reason == "ImageRegistryNotAllowed"
        assert "127.0.0.1 is the Kubernetes API server" in error.message
        assert not connected(listener)


async def test_the_api_server_stays_refused_even_as_a_named_registry() -> None:
    """Naming a registry opens private and loopback addresses, never the API server."""
    with victim() as (port, listener):
        egress = EgressPolicy().with_refused([("127.0.0.1", port)])
        settings = RegistrySettings(insecure_hosts=frozenset({f"127.0.0.1:{port}"}))
        client = RegistryClient(settings, egress=egress)
        try:
            with pytest.raises(RegistryError) as caught:
                await client.image_config(f"127.0.0.1:{port}/acme/server:1")
        finally:
            await client.aclose()
        assert caught.value.reason == "ImageRegistryNotAllowed"
        assert not connected(listener)


async def test_a_token_service_on_a_refused_address_is_never_asked() -> None:
    with victim() as (port, listener):
        realm = f"http://localhost:{port}/token"
        async with tenant_registry(None, realm=realm) as peer:
            with pytest.raises(RegistryError) as caught:
                await read(peer, credentials=Credentials("user", "pull-password", "Secret t/p"))
        assert caught.value.reason == "ImageRegistryNotAllowed"
        assert f"localhost:{port}" in caught.value.message
        assert "pull-password" not in caught.value.message
        assert not connected(listener)


async def test_a_registry_the_flags_do_not_name_is_judged_on_its_first_request() -> None:
    async with tenant_registry(None) as peer:
        with pytest.raises(RegistryError) as caught:
            await read(peer, named=False)
    assert caught.value.reason == "ImageRegistryNotAllowed"
    assert "is a loopback address" in caught.value.message
    assert peer.connections == 0


async def test_an_allowed_redirect_is_followed_without_the_registry_token() -> None:
    storage = Behaviour(respond=lambda _: (200, {"content-type": "application/json"}, CONFIG))
    async with (
        http_peer(storage) as store,
        tenant_registry(f"http://127.0.0.1:{store.port}") as peer,
    ):
        config = await read(peer, EgressPolicy(allow_loopback=True))
    assert config.entrypoint == ("/server",)
    assert any(r.headers.get("authorization") == f"Bearer {TOKEN}" for r in peer.requests)
    assert [r.path.split("?")[0] for r in store.requests] == [f"/storage/{CONFIG_DIGEST}"]
    assert "authorization" not in store.requests[0].headers


async def test_a_token_service_redirect_does_not_carry_the_pull_credentials() -> None:
    """The Basic credentials sent to the token service stay with its origin."""
    token = json.dumps({"token": TOKEN}).encode()
    issuer = Behaviour(respond=lambda _: (200, {"content-type": "application/json"}, token))
    async with http_peer(issuer) as other:
        behaviour = Behaviour()
        async with http_peer(behaviour) as peer:
            serve = registry_script(lambda: peer, None)

            def respond(request: Request) -> Answer:
                if request.path.startswith("/token"):
                    return 307, {"location": f"http://127.0.0.1:{other.port}/t"}, b""
                return serve(request)

            behaviour.respond = respond
            credentials = Credentials("user", "pull-password", "Secret t/p")
            await read(peer, EgressPolicy(allow_loopback=True), credentials=credentials)
    asked = [r for r in peer.requests if r.path.startswith("/token")]
    assert asked and asked[0].headers["authorization"].startswith("Basic ")
    assert other.requests and "authorization" not in other.requests[0].headers
