"""TokenFileCredentials: when the file is read again (metadata, age, refusal), and how a
missing, empty or odd file fails (naming the path, never a value), on a virtual clock."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcp_operator.mcp.credentials import CredentialsError, TokenFileCredentials


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def rotate(path: Path, token: str) -> None:
    fresh = path.with_suffix(".new")
    fresh.write_text(token + "\n")
    os.replace(fresh, path)


async def test_the_token_is_sent_as_a_bearer_header_and_never_shown(tmp_path: Path) -> None:
    path = tmp_path / "token"
    rotate(path, "s3cret.jwt.value")
    credentials = TokenFileCredentials(path)
    assert await credentials.headers() == {"authorization": "Bearer s3cret.jwt.value"}
    assert "s3cret" not in repr(credentials)
    assert "s3cret" not in credentials.describe()
    assert str(path) in credentials.describe()


async def test_a_rotated_file_is_read_again_once_its_metadata_is_looked_at(tmp_path: Path) -> None:
    path = tmp_path / "token"
    rotate(path, "one")
    clock = Clock()
    credentials = TokenFileCredentials(path, check_seconds=1, reread_seconds=60, monotonic=clock)
    assert credentials.token() == "one"
    rotate(path, "two")
    clock.now += 0.5
    assert credentials.token() == "one"  # within the check interval: no stat on the hot path
    clock.now += 0.6
    assert credentials.token() == "two"


async def test_the_file_is_read_again_when_due_even_if_its_metadata_looks_the_same(
    tmp_path: Path,
) -> None:
    path = tmp_path / "token"
    rotate(path, "aaa")
    clock = Clock()
    credentials = TokenFileCredentials(path, check_seconds=1, reread_seconds=60, monotonic=clock)
    assert credentials.token() == "aaa"
    info = os.stat(path)
    path.write_text("bbb\n")  # same inode and size, mtime put back: metadata cannot tell
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    clock.now += 30
    assert credentials.token() == "aaa"
    clock.now += 31
    assert credentials.token() == "bbb"


async def test_a_refusal_is_worth_a_retry_only_when_the_token_changed(tmp_path: Path) -> None:
    path = tmp_path / "token"
    rotate(path, "old")
    credentials = TokenFileCredentials(path, check_seconds=3600)
    await credentials.headers()
    assert await credentials.rejected(401, 'Bearer error="invalid_token"') is False
    rotate(path, "new")
    assert await credentials.rejected(403, None) is True
    assert await credentials.headers() == {"authorization": "Bearer new"}
    assert await credentials.rejected(500, None) is False


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "does not exist"),
        (b"", "is empty"),
        (b"  \n", "is empty"),
        (b"one two", "more than one token"),
        (b"\xff\xfe", "not ASCII"),
        (b"x" * (64 * 1024 + 1), "larger than 64 KiB"),
    ],
)
async def test_an_unusable_file_fails_naming_the_path_and_not_the_content(
    tmp_path: Path, content: bytes | None, words: str
) -> None:
    path = tmp_path / "token"
    if content is not None:
        path.write_bytes(content)
    credentials = TokenFileCredentials(path)
    with pytest.raises(CredentialsError) as caught:
        await credentials.headers()
    assert str(path) in str(caught.value)
    assert words in str(caught.value)
    assert "one two" not in str(caught.value)


async def test_a_file_that_vanishes_after_a_refusal_is_no_reason_to_retry(tmp_path: Path) -> None:
    path = tmp_path / "token"
    rotate(path, "t")
    credentials = TokenFileCredentials(path)
    await credentials.headers()
    path.unlink()
    assert await credentials.rejected(401, None) is False
