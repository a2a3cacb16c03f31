"""Every package names its modules in its docstring, one line each.

A newcomer reads the map in ``__init__.py`` before the files; a map that misses a room or names
one that is gone sends them the wrong way. The line format is ``- ``name``  what it owns``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import mcp_operator

ROOT = Path(mcp_operator.__file__).parent
PACKAGES = sorted(
    "" if init.parent == ROOT else init.parent.relative_to(ROOT).as_posix()
    for init in ROOT.rglob("__init__.py")
)
"""Every package, found on disk: a new one cannot go without its map."""
ENTRY = re.compile(r"^- ``(\w+)``\s+\S")


def named(package: Path) -> list[str]:
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    return [match[1] for line in docstring.splitlines() if (match := ENTRY.match(line))]


def on_disk(package: Path) -> set[str]:
    modules = {path.stem for path in package.glob("*.py")} - {"__init__", "__main__"}
    packages = {path.parent.name for path in package.glob("*/__init__.py")}
    return modules | packages


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: f"mcp_operator/{p}")
def test_a_packages_map_names_each_of_its_modules_once(package: str) -> None:
    path = ROOT / package
    names = named(path)
    assert sorted(set(names)) == sorted(names), "named twice"
    assert set(names) == on_disk(path), (
        f"missing from the map: {sorted(on_disk(path) - set(names))}; "
        f"named but absent: {sorted(set(names) - on_disk(path))}"
    )


def test_the_map_reader_sees_a_missing_module(tmp_path: Path) -> None:
    (tmp_path / "__init__.py").write_text('"""Room.\n\n- ``kept``  what it owns\n"""\n')
    (tmp_path / "kept.py").write_text("")
    assert named(tmp_path) == ["kept"] and on_disk(tmp_path) == {"kept"}
    (tmp_path / "new.py").write_text("")
    assert on_disk(tmp_path) - set(named(tmp_path)) == {"new"}
