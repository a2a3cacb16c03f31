"""A fresh clone stays clean after the installs that write into the tree.

``make venv`` (an editable install: pip writes ``*.egg-info`` next to the package)
and ``make node-tools`` (``npm ci`` into ``hack/node-tools/node_modules``) are the
steps of ``make tools`` that write into the working tree; the Go builds and helm
write only into the cache (``$MCP_OPERATOR_CACHE``), so a clone does not run them
again. This test clones the repository's committed ``HEAD`` into a temporary
directory, runs those two targets there as a new contributor would, and asserts that
``git status`` shows nothing: no tracked file rewritten (a lockfile that npm updates,
as the one before ``npm ci`` was), no untracked file that ``.gitignore`` misses.

It reuses the caches so that it takes about a minute: npm's (``prefer-offline``) and
pip's. pip installs the package alone (``PIP_NO_DEPS``): its dependencies go into
``.venv/lib``, which is ignored as a whole, and the editable build of the package is
what writes beside the sources.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import needs

pytestmark = pytest.mark.timeout(900)

REPO = Path(__file__).resolve().parents[2]
OUR_VENV_BIN = str(REPO / ".venv" / "bin")


def _missing() -> str | None:
    absent = [tool for tool in ("git", "make", "npm", "python3") if shutil.which(tool) is None]
    return f"{', '.join(absent)} not on PATH (needed to install into a clone)" if absent else None


def clone(destination: Path) -> Path:
    """A fresh clone of the committed ``HEAD`` (uncommitted changes are not in it)."""
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(destination)], check=True)
    return destination


def dirty(tree: Path) -> list[str]:
    """``git status --porcelain`` of ``tree``: what a commit would pick up, one line each."""
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    return status.stdout.splitlines()


def fresh_shell() -> dict[str, str]:
    """The environment of a new shell: not our venv, not the make that may have started us."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("VIRTUAL_ENV", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTHONPATH")
    }
    env["PATH"] = os.pathsep.join(
        part for part in env.get("PATH", "").split(os.pathsep) if part != OUR_VENV_BIN
    )
    env.update(PIP_NO_DEPS="1", npm_config_prefer_offline="true")
    return env


@pytest.fixture(scope="module")
def installed_clone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    needs.require(_missing())
    tree = clone(tmp_path_factory.mktemp("fresh") / "mcp-operator")
    try:
        ran = subprocess.run(
            ["make", "-j2", "venv", "node-tools"],
            cwd=tree,
            env=fresh_shell(),
            capture_output=True,
            text=True,
            timeout=840,
            check=False,
        )
        assert ran.returncode == 0, f"make venv node-tools failed:\n{ran.stdout}\n{ran.stderr}"
        yield tree
    finally:
        shutil.rmtree(tree, ignore_errors=True)  # node_modules and .venv: hundreds of MiB


def test_make_venv_and_node_tools_leave_a_fresh_clone_clean(installed_clone: Path) -> None:
    assert (installed_clone / "hack" / "node-tools" / "node_modules" / ".installed").is_file()
    assert (installed_clone / ".venv" / "bin" / "python").is_file()
    assert dirty(installed_clone) == [], "the installs changed the tree (commit or ignore it)"


def test_the_check_sees_a_rewritten_tracked_file_and_an_unignored_new_one(
    tmp_path: Path,
) -> None:
    needs.require(_missing())
    tree = clone(tmp_path / "mcp-operator")
    lockfile = tree / "hack" / "node-tools" / "package-lock.json"
    lockfile.write_text(lockfile.read_text() + "\n")
    (tree / "hack" / "node-tools" / "stray.log").write_text("x")
    (tree / ".venv").mkdir()
    (tree / ".venv" / "pyvenv.cfg").write_text("")  # ignored: not reported
    assert dirty(tree) == [" M hack/node-tools/package-lock.json", "?? hack/node-tools/stray.log"]
