"""What every test layer shares: prerequisites checked before a test's fixtures run.

A test marked ``needs.mark(missing)`` (see :mod:`tests.support.needs`), and
every ``e2e`` test when the control plane is not built, is skipped with the
reason and the command that fixes it, or failed when ``CI=true``.
"""

from __future__ import annotations

import pytest

from tests.support import needs


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("e2e") is not None:
        needs.require(needs.control_plane_missing())
    for marker in item.iter_markers(needs.MARKER):
        needs.require(*marker.args)
