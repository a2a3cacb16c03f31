"""The pure side of reading images: references, pull credentials, challenges, configurations."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from mcp_operator.oci.auth import PullSecretError, credentials_for, parse_challenge
from mcp_operator.oci.client import RegistryClient, RegistryError
from mcp_operator.oci.config import ImageConfigError, numeric_user, parse_config, pick_platform
from mcp_operator.oci.reference import InvalidReference, parse_reference
from mcp_operator.oci.settings import RegistrySettings

DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize(
    ("image", "registry", "repository", "tag", "digest", "api_host"),
    [
        ("node", "docker.io", "library/node", "latest", None, "registry-1.docker.io"),
        ("node:22-alpine", "docker.io", "library/node", "22-alpine", None, "registry-1.docker.io"),
        ("mcp/github", "docker.io", "mcp/github", "latest", None, "registry-1.docker.io"),
        ("index.docker.io/mcp/time:1", "docker.io", "mcp/time", "1", None, "registry-1.docker.io"),
        (
            "ghcr.io/github/github-mcp-server:v1",
            "ghcr.io",
            "github/github-mcp-server",
            "v1",
            None,
            "ghcr.io",
        ),
        ("localhost:5000/team/srv", "localhost:5000", "team/srv", "latest", None, "localhost:5000"),
        ("127.0.0.1:5000/srv:2", "127.0.0.1:5000", "srv", "2", None, "127.0.0.1:5000"),
        (f"ghcr.io/a/b@{DIGEST}", "ghcr.io", "a/b", None, DIGEST, "ghcr.io"),
        (f"ghcr.io/a/b:1@{DIGEST}", "ghcr.io", "a/b", "1", DIGEST, "ghcr.io"),
    ],
)
def test_references_are_normalised_as_a_runtime_reads_them(
    image: str, registry: str, repository: str, tag: str | None, digest: str | None, api_host: str
) -> None:
    reference = parse_reference(image)
    assert (reference.registry, reference.repository, reference.tag, reference.digest) == (
        registry,
        repository,
        tag,
        digest,
    )
    assert reference.api_host == api_host
    assert reference.manifest_reference == (digest or tag)


@pytest.mark.parametrize(
    "image", ["Node:22", "ghcr.io/a/b@sha256:abc", "ghcr.io/a/b@md5:" + "0" * 32, "a/b:-x", "a//b"]
)
def test_a_reference_a_runtime_would_refuse_is_refused(image: str) -> None:
    with pytest.raises(InvalidReference):
        parse_reference(image)


def auth(user: str, password: str) -> dict[str, str]:
    return {"auth": base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_pull_credentials_are_picked_as_the_kubelet_picks_them() -> None:
    first = ("Secret ns/one", {"auths": {"other.example": auth("o", "x")}})
    second = (
        "Secret ns/two",
        {
            "auths": {
                "registry.example": auth("host", "h"),
                "https://registry.example/team": {"username": "team", "password": "t"},
                "*.corp.example": auth("wild", "w"),
                "https://index.docker.io/v1/": auth("hub", "d"),
            }
        },
    )
    pick = lambda image: credentials_for([first, second], parse_reference(image))  # noqa: E731
    assert pick("registry.example/team/srv:1").username == "team"  # type: ignore[union-attr]
    assert pick("registry.example/other/srv:1").username == "host"  # type: ignore[union-attr]
    assert pick("eu.corp.example/srv").username == "wild"  # type: ignore[union-attr]
    assert pick("a.eu.corp.example/srv") is None  # one label per *, as the kubelet globs
    assert pick("mcp/github").username == "hub"  # type: ignore[union-attr]
    assert pick("ghcr.io/x/y") is None
    found = pick("other.example/x")
    assert found is not None and found.source == "Secret ns/one (auths key other.example)"
    assert "x" not in repr(found).replace("auths key other.example", "")


@pytest.mark.parametrize(
    "entry",
    [{"auth": "not base64!"}, {"auth": base64.b64encode(b"nocolon").decode()}, {"email": "e"}],
)
def test_a_malformed_pull_secret_entry_is_an_error_that_names_no_value(entry: Any) -> None:
    with pytest.raises(PullSecretError, match="Secret ns/s"):
        credentials_for(
            [("Secret ns/s", {"auths": {"r.example": entry}})], parse_reference("r.example/a")
        )


def test_challenges_are_read_with_quoted_and_bare_parameters() -> None:
    scheme, params = parse_challenge(
        'Bearer realm="https://auth.example/token",service="registry.example",'
        'scope="repository:a/b:pull"'
    )
    assert scheme == "bearer"
    assert params == {
        "realm": "https://auth.example/token",
        "service": "registry.example",
        "scope": "repository:a/b:pull",
    }
    assert parse_challenge('Basic realm="Registry Realm"') == ("basic", {"realm": "Registry Realm"})


def test_the_platform_is_picked_from_an_index_and_a_missing_one_is_said() -> None:
    index = {
        "manifests": [
            {"digest": "sha256:arm", "platform": {"os": "linux", "architecture": "arm64"}},
            {"digest": "sha256:amd", "platform": {"os": "linux", "architecture": "amd64"}},
        ]
    }
    assert pick_platform(index, "linux", "amd64")["digest"] == "sha256:amd"
    with pytest.raises(ImageConfigError, match=r"no linux/s390x variant \(it offers: linux/amd64"):
        pick_platform(index, "linux", "s390x")


def test_an_image_configuration_gives_entrypoint_cmd_and_user() -> None:
    blob = {
        "architecture": "amd64",
        "config": {"Entrypoint": ["/server/github-mcp-server"], "Cmd": ["stdio"], "User": "1000"},
    }
    config = parse_config(blob, DIGEST)
    assert (config.entrypoint, config.cmd, config.user) == (
        ("/server/github-mcp-server",),
        ("stdio",),
        "1000",
    )
    assert parse_config({"config": {}}, DIGEST).entrypoint == ()
    with pytest.raises(ImageConfigError, match="Entrypoint is not a list of strings"):
        parse_config({"config": {"Entrypoint": "/bin/x"}}, DIGEST)
    assert numeric_user("65532:65532") == (65532, 65532)
    assert numeric_user("nonroot") is None


async def test_a_registry_outside_the_allowed_list_is_refused_without_a_request() -> None:
    client = RegistryClient(RegistrySettings(allowed_hosts=frozenset({"*.corp.example"})))
    try:
        with pytest.raises(RegistryError) as refused:
            await client.image_config("ghcr.io/github/github-mcp-server")
    finally:
        await client.aclose()
    assert refused.value.reason == "ImageRegistryNotAllowed"
    assert "*.corp.example" in refused.value.message
    assert client.requests == 0
