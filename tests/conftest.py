"""What every test layer shares: prerequisites checked before a test's fixtures run.

A test marked ``needs.mark(missing)`` (see :mod:`tests.support.needs`), and
every ``e2e`` test when the control plane is not built, is skipped with the
reason and the command that fixes it, or failed when ``CI=true``. Hypothesis runs
under a bounded settings profile (``HYPOTHESIS_PROFILE`` chooses another).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from tests.support import needs

# Property-based tests run a bounded number of examples so that `make test` stays fast;
# HYPOTHESIS_PROFILE=thorough explores more (before a release, or after touching a parser).
settings.register_profile(
    "default", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("thorough", max_examples=2000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("e2e") is not None:
        needs.require(needs.control_plane_missing())
    for marker in item.iter_markers(needs.MARKER):
        needs.require(*marker.args)
