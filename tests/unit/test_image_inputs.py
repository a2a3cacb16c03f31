"""The tag of an image build: Docker's .dockerignore rules and the hash of the inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_operator.dev.image_inputs import build_tag, context_files, digest, excluded, parse_ignore

REPO = Path(__file__).resolve().parents[2]
ALLOW_LIST = """
# the operator image's: everything out, then three things back in
*
!pyproject.toml
!README.md
!operator/
**/__pycache__
**/*.egg-info
"""


@pytest.mark.parametrize(
    ("path", "out"),
    [
        ("pyproject.toml", False),
        ("README.md", False),
        ("operator/mcp_operator/cli.py", False),
        ("operator/stdio-exec/main.go", False),
        ("Makefile", True),
        ("tests/unit/test_x.py", True),
        ("docs/install.md", True),
        ("operator/mcp_operator/__pycache__/cli.cpython-311.pyc", True),
        ("operator/mcp_operator.egg-info/PKG-INFO", True),
    ],
)
def test_an_allow_list_lets_in_only_what_it_names(path: str, out: bool) -> None:
    assert excluded(path, parse_ignore(ALLOW_LIST)) is out


def test_the_last_matching_pattern_decides_and_a_directory_pattern_covers_its_contents() -> None:
    rules = parse_ignore("build\n!build/keep.txt\n*.log\n")
    assert excluded("build/x.o", rules)
    assert not excluded("build/keep.txt", rules)
    assert excluded("a.log", rules)
    assert not excluded("dir/a.log", rules)  # `*` stays within one segment
    assert excluded("dir/a.log", parse_ignore("**/*.log"))


def test_context_files_are_what_the_ignore_file_lets_through(tmp_path: Path) -> None:
    for name in ("keep/a.py", "keep/__pycache__/a.pyc", "drop/b.py", "top.txt", "pyproject.toml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    rules = parse_ignore("*\n!keep/\n!pyproject.toml\n**/__pycache__\n")
    assert context_files(tmp_path, rules) == ["keep/a.py", "pyproject.toml"]


def test_the_tag_is_sixteen_hex_and_the_same_for_the_same_inputs_in_any_order() -> None:
    files = [("a", False, b"1"), ("b", True, b"2")]
    tag = digest(files, {"X": "1", "Y": "2"}, b"FROM scratch")
    assert len(tag) == 16 and int(tag, 16) >= 0
    assert digest(list(reversed(files)), {"Y": "2", "X": "1"}, b"FROM scratch") == tag


@pytest.mark.parametrize(
    "change",
    [
        {"files": [("a", False, b"1!"), ("b", True, b"2")]},  # content
        {"files": [("a", True, b"1"), ("b", True, b"2")]},  # executable bit
        {"files": [("a2", False, b"1"), ("b", True, b"2")]},  # path
        {"files": [("b", True, b"2")]},  # a file fewer
        {"args": {"X": "1", "Y": "3"}},  # a build argument
        {"dockerfile": b"FROM scratch\n"},
        {"ignore": b"*\n"},
    ],
)
def test_any_change_to_an_input_changes_the_tag(change: dict[str, object]) -> None:
    base: dict[str, object] = {
        "files": [("a", False, b"1"), ("b", True, b"2")],
        "args": {"X": "1", "Y": "2"},
        "dockerfile": b"FROM scratch",
        "ignore": b"",
    }
    assert digest(**{**base, **change}) != digest(**base)  # type: ignore[arg-type]


def test_framing_keeps_inputs_apart() -> None:
    assert digest([], {"ab": "c"}) != digest([], {"a": "bc"})
    assert digest([("ab", False, b"c")], {}) != digest([("a", False, b"bc")], {})


def test_the_operator_image_tag_follows_its_sources_and_nothing_else(tmp_path: Path) -> None:
    context = tmp_path / "repo"
    for name in ("pyproject.toml", "README.md", "operator/mcp_operator/cli.py", "tests/t.py"):
        (context / name).parent.mkdir(parents=True, exist_ok=True)
        (context / name).write_text(name)
    (context / ".dockerignore").write_text((REPO / ".dockerignore").read_text())
    dockerfile = REPO / "Dockerfile"
    before = build_tag(context, dockerfile, {"PYTHON_IMAGE": "base:1"})
    (context / "tests/t.py").write_text("edited")
    assert build_tag(context, dockerfile, {"PYTHON_IMAGE": "base:1"}) == before
    (context / "operator/mcp_operator/cli.py").write_text("edited")
    edited = build_tag(context, dockerfile, {"PYTHON_IMAGE": "base:1"})
    assert edited != before
    assert build_tag(context, dockerfile, {"PYTHON_IMAGE": "base:2"}) != edited
