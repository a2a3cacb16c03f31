"""The inputs of an image build, and the one hash of them that names the build.

``hack/build-images.sh`` asks this module for the tag of every image it would build
(``python -m mcp_operator.dev.image_inputs``): the hash of the Dockerfile, of every file
of the build context that the context's ``.dockerignore`` lets through (path, executable
bit and content), and of the build arguments (base images included, themselves named
by the hash of their own recipe). Equal inputs give the equal tag, so the script skips a
build whose tag is already in ``index.json``; any change to an input gives a new tag.

The ``.dockerignore`` rules are Docker's: one pattern a line, ``#`` comments, ``!``
re-includes, ``*`` and ``?`` within one path segment, ``**`` across segments, the last
matching pattern decides, and a pattern that matches a directory matches everything
under it. This module only reads files; building, exporting and the index are
:mod:`mcp_operator.dev.images`'s and the script's.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

TAG_LENGTH = 16
"""Hex digits of the tag: 64 bits of sha256, far beyond any collision among our builds."""


@dataclass(frozen=True)
class IgnoreRule:
    """One ``.dockerignore`` line: whether it re-includes, and what it matches."""

    negated: bool
    pattern: str
    regex: re.Pattern[str]

    @property
    def literal_prefix(self) -> str:
        """The pattern up to its first wildcard: what every path it matches starts with."""
        return re.split(r"[*?\[]", self.pattern, maxsplit=1)[0]


def _to_regex(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


def parse_ignore(text: str) -> list[IgnoreRule]:
    """The rules of a ``.dockerignore`` file, in order."""
    rules = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = os.path.normpath(line[1:].strip() if negated else line).lstrip("/")
        rules.append(IgnoreRule(negated, pattern, _to_regex(pattern)))
    return rules


def excluded(path: str, rules: Sequence[IgnoreRule]) -> bool:
    """Whether the context path ``path`` (``/``-separated, relative) stays out of the build."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    verdict = False
    for rule in rules:
        if any(rule.regex.fullmatch(prefix) for prefix in prefixes):
            verdict = not rule.negated
    return verdict


def _may_hold_included(directory: str, rules: Sequence[IgnoreRule]) -> bool:
    """Whether a re-including rule could match something under an excluded ``directory``."""
    inside = directory + "/"
    return any(
        rule.negated
        and (rule.literal_prefix.startswith(inside) or inside.startswith(rule.literal_prefix))
        for rule in rules
    )


def context_files(context: Path, rules: Sequence[IgnoreRule]) -> list[str]:
    """The relative paths of the regular files a build of ``context`` sees, sorted."""
    found: list[str] = []
    for top, directories, files in os.walk(context):
        relative_top = os.path.relpath(top, context)
        base = "" if relative_top == "." else relative_top.replace(os.sep, "/") + "/"
        directories[:] = sorted(
            d
            for d in directories
            if not excluded(base + d, rules) or _may_hold_included(base + d, rules)
        )
        for name in files:
            path = base + name
            if not excluded(path, rules) and (Path(top) / name).is_file():
                found.append(path)
    return sorted(found)


def digest(
    files: Iterable[tuple[str, bool, bytes]],
    args: Mapping[str, str],
    dockerfile: bytes = b"",
    ignore: bytes = b"",
) -> str:
    """The tag for these inputs: ``files`` as (path, executable, content), build ``args``.

    Pure: the same inputs give the same tag whatever their order, and each input is
    framed with its length, so no two different sets of inputs read as the same stream.
    """
    hasher = hashlib.sha256()

    def put(kind: str, *fields: bytes) -> None:
        hasher.update(kind.encode() + b"\0")
        for value in fields:
            hasher.update(str(len(value)).encode() + b":" + value)

    put("dockerfile", dockerfile)
    put("dockerignore", ignore)
    for key in sorted(args):
        put("arg", key.encode(), args[key].encode())
    for path, executable, content in sorted(files, key=lambda entry: entry[0]):
        put("file", path.encode(), b"x" if executable else b"-", content)
    return hasher.hexdigest()[:TAG_LENGTH]


def build_tag(context: Path | None, dockerfile: Path | None, args: Mapping[str, str]) -> str:
    """The tag of a build of ``dockerfile`` in ``context`` with ``args`` (each may be absent)."""
    ignore = b""
    entries: list[tuple[str, bool, bytes]] = []
    if context is not None:
        ignore_file = context / ".dockerignore"
        ignore = ignore_file.read_bytes() if ignore_file.is_file() else b""
        for path in context_files(context, parse_ignore(ignore.decode())):
            full = context / path
            executable = bool(full.stat().st_mode & stat.S_IXUSR)
            entries.append((path, executable, full.read_bytes()))
    text = dockerfile.read_bytes() if dockerfile is not None else b""
    return digest(entries, args, text, ignore)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcp_operator.dev.image_inputs",
        description="Print the 16-hex tag (input hash) of an image build.",
    )
    parser.add_argument("--context", type=Path, help="the build context (.dockerignore applies)")
    parser.add_argument("--dockerfile", type=Path)
    parser.add_argument(
        "--arg", action="append", default=[], metavar="KEY=VALUE", help="a build input"
    )
    options = parser.parse_args(argv)
    args = dict(item.partition("=")[::2] for item in options.arg)
    print(build_tag(options.context, options.dockerfile, args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
