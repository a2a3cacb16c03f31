"""The index of built images: reading it, recording into it, and what a push speaks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_operator.dev.images import (
    IMAGES,
    BuiltImage,
    ImagesNotBuiltError,
    built,
    parse_index,
    plain_http,
    record,
    recorded_tag,
    with_entry,
)

TAG = "0123456789abcdef"


def test_an_index_is_read_into_built_images() -> None:
    images = parse_index({"demo-agent": {"archive": "/c/demo-agent.oci.tar", "tag": TAG}})
    assert images == {"demo-agent": BuiltImage("demo-agent", Path("/c/demo-agent.oci.tar"), TAG)}


@pytest.mark.parametrize(
    "document",
    [
        [],
        {"x": "y"},
        {"x": {"archive": "/a"}},
        {"x": {"archive": "/a", "tag": "latest"}},
        {"x": {"archive": "/a", "tag": TAG.upper()}},
        {"x": {"archive": 1, "tag": TAG}},
    ],
)
def test_a_malformed_index_is_an_error_that_says_to_build(document: object) -> None:
    with pytest.raises(ImagesNotBuiltError, match="make images"):
        parse_index(document)


def test_recording_keeps_other_entries_and_replaces_its_own(tmp_path: Path) -> None:
    index = tmp_path / "index.json"
    for name in ("b", "a"):
        (tmp_path / f"{name}.oci.tar").write_bytes(b"")
        record(name, tmp_path / f"{name}.oci.tar", TAG, index=index)
    record("b", tmp_path / "b.oci.tar", "f" * 16, index=index)
    document = json.loads(index.read_text())
    assert list(document) == ["a", "b"]
    assert document["b"] == {"archive": str(tmp_path / "b.oci.tar"), "tag": "f" * 16}
    assert recorded_tag("a", index=index) == TAG
    assert with_entry(document, BuiltImage("a", Path("/x"), TAG))["a"]["archive"] == "/x"


def test_a_missing_index_image_or_archive_names_make_images(tmp_path: Path) -> None:
    index = tmp_path / "index.json"
    with pytest.raises(ImagesNotBuiltError, match=r"is missing\); run `make images`"):
        built(index=index)
    assert recorded_tag("a", index=index) is None
    (tmp_path / "a.oci.tar").write_bytes(b"")
    record("a", tmp_path / "a.oci.tar", TAG, index=index)
    assert built(["a"], index=index)["a"].tag == TAG
    with pytest.raises(ImagesNotBuiltError, match=r"not built: mcp-operator.*make images"):
        built(index=index)
    (tmp_path / "a.oci.tar").unlink()
    with pytest.raises(ImagesNotBuiltError, match=r"archives missing: .*a\.oci\.tar"):
        built(["a"], index=index)
    assert recorded_tag("a", index=index) is None


def test_every_image_has_a_dockerfile() -> None:
    repo = Path(__file__).resolve().parents[2]
    for name in IMAGES:
        folder = repo if name == "mcp-operator" else repo / "images" / name
        dockerfile = folder / "Dockerfile"
        assert dockerfile.is_file(), name
        assert "USER 65532:65532" in dockerfile.read_text(), name


@pytest.mark.parametrize(
    ("host", "plain"),
    [
        ("127.0.0.1:5000", True),
        ("127.0.0.2:5000", True),
        ("localhost:5000", True),
        ("[::1]:5000", True),
        ("10.244.0.1:5000", False),
        ("ghcr.io", False),
        ("registry.example.com:443", False),
    ],
)
def test_plain_http_only_on_loopback(host: str, plain: bool) -> None:
    assert plain_http(host) is plain
