"""``/metrics`` of the adapter and the bridge answers only an authenticated, authorized scraper.

Each test runs the real process (``mcp-operator adapter`` in front of a small stdio server,
``mcp-operator bridge`` with no upstream) with ``--metrics-access`` pointing at the file the
operator renders (:func:`~mcp_operator.controller.render.metrics_access`, written with
:func:`~mcp_operator.controller.render.metrics_access_text`), and tokens signed by keys the
test generated (``tests/support/issuer.py``). The attacks kept here: no token, a token of
the scraper for another audience (a server's), a token of a ServiceAccount that is not a
scraper, an expired one, one signed by another key. Only the listed scraper with a token of
the audience ``metrics.mcp-operator.dev`` reads the metrics; ``/healthz`` and ``/readyz``
stay open to anyone (the kubelet's probes carry no token).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from mcp_operator import METRICS_AUDIENCE
from mcp_operator.controller.render import metrics_access, metrics_access_text
from tests.protocol.test_adapter import adapter
from tests.protocol.test_adapter_auth import COUNTING_SERVER
from tests.support.bridge_run import run_bridge
from tests.support.issuer import TestIssuer
from tests.support.peers import free_port

pytestmark = pytest.mark.timeout(120)

ISSUER = TestIssuer()
SCRAPER = ("monitoring", "prometheus")


def access_file(tmp_path: Path) -> Path:
    path = tmp_path / "metrics.json"
    body = metrics_access(ISSUER.issuer, ISSUER.jwks(), [f"{SCRAPER[0]}/{SCRAPER[1]}"])
    path.write_text(metrics_access_text(body))
    return path


def scrape(base: str, token: str | None) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token is not None else {}
    return httpx.get(base + "/metrics", headers=headers, timeout=5)


ATTEMPTS: dict[str, tuple[Callable[[], str | None], int]] = {
    "no token": (lambda: None, 401),
    "the scraper's token for a server's audience": (
        lambda: ISSUER.service_account_token(*SCRAPER, pod=None),
        401,
    ),
    "a run Pod's token of the metrics audience": (
        lambda: ISSUER.service_account_token("team", "agent", audience=METRICS_AUDIENCE),
        403,
    ),
    "the scraper's expired token": (
        lambda: ISSUER.service_account_token(
            *SCRAPER, audience=METRICS_AUDIENCE, now=time.time() - 3600
        ),
        401,
    ),
    "the scraper's token signed by another key": (
        lambda: TestIssuer().service_account_token(*SCRAPER, audience=METRICS_AUDIENCE),
        401,
    ),
}


def check_scrapes(
    base: str, metric: str, health: tuple[str, ...] = ("/healthz", "/readyz")
) -> None:
    for attempt, (token, status) in ATTEMPTS.items():
        answer = scrape(base, token())
        assert answer.status_code == status, (attempt, answer.status_code, answer.text)
        assert metric not in answer.text, attempt
    allowed = scrape(base, ISSUER.service_account_token(*SCRAPER, audience=METRICS_AUDIENCE))
    assert allowed.status_code == 200, allowed.text
    assert metric in allowed.text
    for path in health:
        assert httpx.get(base + path, timeout=5).status_code == 200, path


@pytest.fixture(params=["one child", "a child per session", "front"])
def guarded_adapter(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, bool]]:
    """The adapter in each of its modes (each serves /metrics from its own front)."""
    script = tmp_path / "counting.py"
    script.write_text(COUNTING_SERVER)
    command: tuple[str, ...] = (sys.executable, str(script), str(tmp_path / "seen.txt"))
    flags: tuple[str, ...] = ("--auth=none", f"--metrics-access={access_file(tmp_path)}")
    if request.param == "a child per session":
        flags += ("--child-per-session",)
    elif request.param == "front":
        # Nothing listens upstream: /metrics and health are the front's own.
        flags += (f"--upstream-url=http://127.0.0.1:{free_port()}/mcp",)
        command = ()
    front = request.param == "front"
    with adapter(command, tmp_path, *flags, ready=not front) as running:
        if front:
            running.wait_for("/healthz", 200)
        yield running.base, front


def test_the_adapters_metrics_answer_only_the_listed_scraper(
    guarded_adapter: tuple[str, bool],
) -> None:
    base, front = guarded_adapter
    # The front is not ready without its upstream: its liveness alone is checked open.
    check_scrapes(base, "mcp_adapter_", ("/healthz",) if front else ("/healthz", "/readyz"))


def test_the_bridges_metrics_answer_only_the_listed_scraper(tmp_path: Path) -> None:
    with run_bridge([], extra_args=[f"--metrics-access={access_file(tmp_path)}"]) as bridge:
        check_scrapes(bridge.health, "mcp_bridge_")


def test_without_the_issuers_keys_every_scrape_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    path.write_text(metrics_access_text(metrics_access(None, None, ["monitoring/prometheus"])))
    with run_bridge([], extra_args=[f"--metrics-access={path}"]) as bridge:
        token = ISSUER.service_account_token(*SCRAPER, audience=METRICS_AUDIENCE)
        assert scrape(bridge.health, token).status_code == 401
        assert httpx.get(bridge.health + "/readyz", timeout=5).status_code == 200


def test_a_process_run_by_hand_without_the_flag_serves_metrics_to_anyone(tmp_path: Path) -> None:
    with run_bridge([]) as bridge:
        assert scrape(bridge.health, None).status_code == 200
