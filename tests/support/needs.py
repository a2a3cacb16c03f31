"""Prerequisites of tests: skip on a laptop with the command that fixes it, fail in CI.

A test that needs something outside Python (the Node MCP peers, helm, the
control plane, the image tools) calls :func:`require`, or carries
:func:`mark`. On a developer's machine a missing prerequisite skips the test
and the skip reason names the command that installs it (``pytest -ra`` lists
them). With ``CI=true`` the same test fails with that reason instead, so a CI
run can never pass by skipping what it was meant to prove.

Which prerequisites exist and how each is found is also kept here, so that
every test asks the same question the same way (the node and its images: the
``node_cluster`` and ``node_images`` fixtures, whose start says what to run). Installing
them is the Makefile's job (``make tools``).
"""

from __future__ import annotations

import os
import shutil

import pytest

from mcp_operator.dev.cluster import BINARIES
from mcp_operator.dev.processes import BIN_DIR
from tests.support.peers import INSPECTOR, NODE_TOOLS, SERVER_EVERYTHING

MARKER = "requires"
"""The marker that :func:`mark` sets; ``tests/conftest.py`` turns it into :func:`require`."""


def in_ci() -> bool:
    """Whether this run is CI (``CI=true``, as CI services set it): missing means failed."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def require(missing: str | None) -> None:
    """Go on when nothing is ``missing``; else skip with the reason, or fail under ``CI=true``.

    ``missing`` is ``None`` when the prerequisite is there, else what is missing and the
    command that fixes it (what the ``*_missing`` functions below return).
    """
    if missing is None:
        return
    if in_ci():
        pytest.fail(f"Missing prerequisite (CI=true: a failure, not a skip): {missing}")
    pytest.skip(missing)


def mark(missing: str | None) -> pytest.MarkDecorator:
    """:func:`require` as a decorator or ``pytestmark``, checked before the test's fixtures."""
    return pytest.mark.requires(missing)


# ------------------------------------------------------------------ what the tests need


def node_missing() -> str | None:
    """Why server-everything cannot run here, or ``None`` when it can."""
    if shutil.which("node") is None:
        return "node is not on PATH: install Node.js 20 or newer, then run `make node-tools`"
    if not SERVER_EVERYTHING.is_file():
        return f"server-everything is not installed in {NODE_TOOLS}; run `make node-tools`"
    return None


def inspector_missing() -> str | None:
    """Why the official inspector CLI cannot run here, or ``None`` when it can."""
    if (why := node_missing()) is not None:
        return why
    if not INSPECTOR.is_file():
        return f"the inspector CLI is not installed in {NODE_TOOLS}; run `make node-tools`"
    return None


def helm() -> str:
    """The path of helm, after :func:`require` for it."""
    require(helm_missing())
    return helm_path() or "helm"


def helm_missing() -> str | None:
    """Why helm cannot run here, or ``None`` when :func:`helm_path` finds it."""
    return None if helm_path() else f"helm is not installed in {BIN_DIR}; run `make helm`"


def helm_path() -> str | None:
    """helm from the cache that ``make helm`` fills (as the Makefile finds it), else ``PATH``."""
    candidate = BIN_DIR / "helm"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which("helm")


def control_plane_missing() -> str | None:
    """Why the local control plane cannot start here, or ``None`` when its binaries exist."""
    absent = [
        name
        for name in BINARIES
        if not os.access(BIN_DIR / name, os.X_OK) and shutil.which(name) is None
    ]
    if absent:
        return f"{', '.join(absent)} not built in {BIN_DIR}; run `make control-plane`"
    return None


def real_node_missing() -> str | None:
    """Why the local cluster's real node cannot start here (root, ``make node``, cgroup v1),
    or ``None`` when it can (:func:`mcp_operator.dev.node_needs.missing` decides)."""
    from mcp_operator.dev import node_needs

    return control_plane_missing() or node_needs.missing()


IMAGE_TOOLS = ("mcp-stdio-exec", "crane", "mcp-hello-server")
"""What ``make image-tools`` builds (``hack/build-image-tools.sh``)."""


def image_tools_missing() -> str | None:
    """Why the stdio helper, crane or the Go hello server cannot run here, or ``None``."""
    absent = [name for name in IMAGE_TOOLS if not os.access(BIN_DIR / name, os.X_OK)]
    if absent:
        return f"{', '.join(absent)} not built in {BIN_DIR}; run `make image-tools`"
    return None


def images_missing() -> str | None:
    """Why our built images (``make images``) cannot be pushed here, or ``None``."""
    from mcp_operator.dev.images import ImagesNotBuiltError, built

    if (why := image_tools_missing()) is not None:
        return why
    try:
        built()
    except ImagesNotBuiltError as error:
        return str(error)
    return None
