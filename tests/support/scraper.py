"""The metrics scraper of the tests on the real node: a ServiceAccount the operator lists in
``--metrics-scrapers`` and a token of the audience ``metrics.mcp-operator.dev`` for it.

``/metrics`` of bridges and adapters answers only such a scraper (docs/metrics.md, "Who may
scrape the data plane"), so a test that reads them presents what Prometheus would.
"""

from __future__ import annotations

import urllib.error
import urllib.request

from mcp_operator import METRICS_AUDIENCE
from mcp_operator.dev.cluster import DEV_IDENTITY
from tests.support.cluster import Cluster

NAMESPACE = DEV_IDENTITY.split("/", 1)[0]
NAME = "prometheus"
FLAG = f"--metrics-scrapers={NAMESPACE}/{NAME}"
"""The operator's flag that lists the scraper."""


def ensure(cluster: Cluster) -> None:
    """The scraper's ServiceAccount exists (in the dev identity's namespace)."""
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": NAME}}
    cluster.apply(NAMESPACE, account)


def token(cluster: Cluster, account: str = NAME, namespace: str = NAMESPACE) -> str:
    """A token of ``namespace/account`` (the scraper by default) for the metrics audience."""
    return cluster.kubectl(
        "-n", namespace, "create", "token", account, f"--audience={METRICS_AUDIENCE}",
        "--duration=600s",
    ).stdout.strip()  # fmt: skip


def scrape(url: str, bearer: str | None) -> tuple[int, str]:
    """``GET url`` with ``bearer``: its status and body (an error's too)."""
    request = urllib.request.Request(url)
    if bearer is not None:
        request.add_header("authorization", f"Bearer {bearer}")
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")
