"""Which bridge a protocol test starts: fixtures ``tests/protocol/conftest.py`` offers the
``test_dataplane_bridge*.py`` modules.

- ``compiled_bridge`` (module-wide; a module asks for it with
  ``pytest.mark.usefixtures("compiled_bridge")``): every bridge the module's tests start is
  the compiled one (``mcp-dataplane bridge``), the home modules' module-scoped bridges
  included;
- ``program``: a test that takes it runs twice, against the Python bridge (the reference) and
  the compiled one, and gets which (``"python"`` or ``"compiled"``);
- :func:`started`: that a running bridge is the program the test asked for.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import dataplane
from tests.support.bridge_run import RunningBridge


@pytest.fixture(scope="module")
def compiled_bridge() -> Iterator[None]:
    """Every bridge of the module is the compiled one, unless a test takes ``program``."""
    with pytest.MonkeyPatch.context() as patch:
        dataplane.use_bridge(patch, "compiled")
        yield


def choose(request: pytest.FixtureRequest) -> Iterator[str]:
    """The bridge of ``request.param`` for one test (a parametrized fixture's body)."""
    with pytest.MonkeyPatch.context() as patch:
        dataplane.use_bridge(patch, str(request.param))
        yield str(request.param)


@pytest.fixture(params=["python", "compiled"])
def program(request: pytest.FixtureRequest) -> Iterator[str]:
    """The bridge the test starts: each test runs against both."""
    yield from choose(request)


def started(bridge: RunningBridge, program: str) -> None:
    """``bridge`` runs the program the test chose."""
    compiled = bridge.process.args[0] == str(dataplane.BINARY)  # type: ignore[index]
    assert compiled == (program == "compiled"), bridge.process.args
