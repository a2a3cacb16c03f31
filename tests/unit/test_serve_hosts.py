"""The Host/Origin policy (DNS rebinding protection) that every MCP endpoint applies."""

from __future__ import annotations

import pytest

from mcp_operator.serve.hosts import HostPolicy


@pytest.mark.parametrize(
    ("host", "ok"),
    [
        ("localhost:8080", True),
        ("127.0.0.1", True),
        ("[::1]:9000", True),
        ("evil.example:8080", False),
        ("my-svc.ns.svc.cluster.local:8080", True),
        ("other.ns.svc:80", True),
        (None, False),
    ],
)
def test_host_policy_allows_localhost_and_the_configured_names(host: str | None, ok: bool) -> None:
    policy = HostPolicy(("my-svc.ns.svc.cluster.local", "*.ns.svc"), ())
    assert policy.host_ok(host) is ok


def test_origin_policy_follows_the_host_list_and_explicit_origins() -> None:
    policy = HostPolicy((), ("https://app.example",))
    assert policy.origin_ok(None)
    assert policy.origin_ok("http://localhost:3000")
    assert policy.origin_ok("https://app.example")
    assert not policy.origin_ok("https://evil.example")


@pytest.mark.parametrize(
    ("host", "ok"),
    [
        ("[fd00::5]:8080", True),
        ("[fd00::5]", True),
        ("[fd00::6]:8080", False),
        ("10.0.0.7:8080", True),
        ("10.0.0.8:8080", False),
    ],
)
def test_a_pod_ip_allowed_host_matches_ipv4_and_bracketed_ipv6(host: str, ok: bool) -> None:
    policy = HostPolicy(("fd00::5", "10.0.0.7"), ())
    assert policy.host_ok(host) is ok
