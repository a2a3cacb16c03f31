"""The registry client against a real registry: ``crane registry serve`` behind the tests'
token-auth front (``tests/support/registry.py``). No cluster needed.

What a user relies on: a tag is read once and then served from the cache for its time
to live; an image already read by digest is not fetched again under another tag; while
the registry is away, a tag once read keeps its last answer (the one the Pod is pinned
to); a private repository needs the right credentials.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from mcp_operator.dev.processes import BIN_DIR
from mcp_operator.oci.auth import Credentials
from mcp_operator.oci.client import RegistryClient, RegistryError
from mcp_operator.oci.settings import RegistrySettings
from tests.support import needs, registry

pytestmark = [pytest.mark.e2e, needs.mark(needs.image_tools_missing())]

SERVER = "/server/mcp-hello-server"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def local(tmp_path: Path) -> Iterator[registry.Registry]:
    with registry.running(tmp_path) as running:
        files = {SERVER: BIN_DIR / "mcp-hello-server"}
        common = {"entrypoint": [SERVER], "cmd": ["stdio"], "user": "10001", "workdir": tmp_path}
        running.push_image("tools/hello", "1", files, **common)
        running.index_of("tools/hello", "multi", "1")
        running.push_image("private/hello", "1", files, **common)
        yield running


@pytest.fixture
async def client() -> AsyncIterator[tuple[RegistryClient, Clock]]:
    clock = Clock()
    settings = RegistrySettings(insecure_hosts=frozenset({registry.FRONT_HOST}), tag_ttl_seconds=60)
    reader = RegistryClient(settings, clock=clock)
    yield reader, clock
    await reader.aclose()


async def test_a_tag_is_cached_for_its_time_to_live_and_a_digest_for_good(
    local: registry.Registry, client: tuple[RegistryClient, Clock]
) -> None:
    reader, clock = client
    image = f"{registry.FRONT_HOST}/tools/hello:multi"
    first = await reader.image_config(image)
    assert (first.entrypoint, first.cmd, first.user) == ((SERVER,), ("stdio",), "10001")
    assert first.index_digest and first.digest != first.index_digest
    cold = reader.requests  # challenge, token, index, manifest, config
    assert cold == 5
    assert await reader.image_config(image) == first
    assert reader.requests == cold, "a cached tag sends nothing"

    clock.now += 61
    assert await reader.image_config(image) == first
    assert reader.requests > cold, "an expired tag is asked again"
    asked = reader.requests
    # The same manifest under another tag: its configuration blob is not fetched again.
    plain = await reader.image_config(f"{registry.FRONT_HOST}/tools/hello:1")
    assert plain.digest == first.digest and plain.index_digest == ""
    assert not any("/blobs/" in path for path in local.served[-2:])
    assert reader.requests - asked <= 3


async def test_a_tag_once_read_keeps_its_answer_while_the_registry_is_away(
    tmp_path: Path, client: tuple[RegistryClient, Clock]
) -> None:
    reader, clock = client
    image = f"{registry.FRONT_HOST}/tools/hello:1"
    with registry.running(tmp_path) as running:
        files = {SERVER: BIN_DIR / "mcp-hello-server"}
        running.push_image(
            "tools/hello", "1", files, entrypoint=[SERVER], cmd=[], user="", workdir=tmp_path
        )
        read = await reader.image_config(image)
    clock.now += 3600
    assert await reader.image_config(image) == read  # the registry is gone: last answer kept
    with pytest.raises(RegistryError) as never_read:
        await reader.image_config(f"{registry.FRONT_HOST}/tools/other:1")
    assert never_read.value.reason == "ImageRegistryUnreachable"


async def test_a_private_repository_needs_the_right_credentials(
    local: registry.Registry, client: tuple[RegistryClient, Clock]
) -> None:
    reader, _ = client
    image = f"{registry.FRONT_HOST}/private/hello:1"
    for credentials, expected in [
        (None, "refused anonymous pull"),
        (Credentials(registry.USER, "wrong", "Secret ns/pull"), "credentials of Secret ns/pull"),
    ]:
        with pytest.raises(RegistryError) as refused:
            await reader.image_config(image, credentials)
        assert refused.value.reason == "ImagePullUnauthorized"
        assert expected in refused.value.message
        assert "wrong" not in refused.value.message
    right = Credentials(registry.USER, registry.PASSWORD, "Secret ns/pull")
    assert (await reader.image_config(image, right)).entrypoint == (SERVER,)


async def test_a_digest_pinned_reference_is_checked_and_never_asked_again(
    local: registry.Registry, client: tuple[RegistryClient, Clock]
) -> None:
    reader, clock = client
    index = local.crane("digest", f"{local.backend}/tools/hello:multi")
    pinned = f"{registry.FRONT_HOST}/tools/hello@{index}"
    read = await reader.image_config(pinned)
    assert read.pinned_digest == index and read.entrypoint == (SERVER,)
    asked = reader.requests
    clock.now += 10 * 365 * 86400
    assert await reader.image_config(pinned) == read
    assert reader.requests == asked, "a digest names one image forever"
    with pytest.raises(RegistryError) as unknown:
        await reader.image_config(f"{registry.FRONT_HOST}/tools/hello@sha256:{'0' * 64}")
    assert unknown.value.reason == "ImageNotFound"
