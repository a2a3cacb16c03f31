"""``spec.deployment.path`` cannot step out of the API server's service proxy.

From a laptop the operator probes a managed server through
``/api/v1/namespaces/NS/services/NAME:PORT/proxy/PATH`` with the kubeconfig
user's credentials; a path with dot segments would collapse into any other API
path (for example one that creates ServiceAccount tokens).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_operator.api import MCPServer
from mcp_operator.api.common import ENDPOINT_PATH_PATTERN
from mcp_operator.controller.mcpserver.managed import OutsideProxy, service_proxy_url
from mcp_operator.controller.parsing import InvalidSpec, parse
from tests.unit.fakes import FakeKube

API = "https://203.0.113.10:6443"
PREFIX = "/api/v1/namespaces/ns/services/srv:8080/proxy/"


def managed(path: str) -> MCPServer | InvalidSpec:
    body: dict[str, Any] = {
        "metadata": {"name": "srv", "namespace": "ns", "uid": "u", "generation": 1},
        "spec": {
            "mode": "managed",
            "transport": "streamable-http",
            "deployment": {"image": "example/server:1", "path": path},
        },
    }
    return parse(MCPServer, body)


TRAVERSALS = [
    "/../../../../api/v1/namespaces/ns/serviceaccounts/default/token",
    "/..",
    "/mcp/..",
    "/a/./../b",
    "/%2e%2e/%2e%2e/x",
    "/.%2E/x",
    "/%252e%252e/x",
    "/a%2f..%2fb",
    "/a\\..\\b",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_the_model_refuses_dot_segments_plain_or_encoded(path: str) -> None:
    assert isinstance(managed(path), InvalidSpec)


@pytest.mark.parametrize("path", ["/mcp", "/", "/v1/mcp/", "/.well-known/mcp", "/a..b/...", "//x"])
def test_ordinary_paths_are_accepted(path: str) -> None:
    parsed = managed(path)
    assert isinstance(parsed, MCPServer), getattr(parsed, "message", "")


@pytest.mark.parametrize("path", [TRAVERSALS[0], "/..", "/a/../../x", *TRAVERSALS[4:7]])
def test_the_proxy_url_is_checked_even_if_the_model_let_a_path_through(path: str) -> None:
    with pytest.raises(OutsideProxy):
        service_proxy_url(API, "ns", "srv", 8080, path)


def test_the_proxy_url_of_an_ordinary_path_is_inside_the_prefix() -> None:
    assert service_proxy_url(API, "ns", "srv", 8080, "/mcp") == f"{API}{PREFIX}mcp"


PCHARS = "ABCxyz019._~!$&'()*+,;=:@-/%\\"


@given(st.text(alphabet=PCHARS, max_size=40).map(lambda rest: "/" + rest))
def test_every_path_the_model_accepts_stays_inside_the_proxy(path: str) -> None:
    if re.fullmatch(ENDPOINT_PATH_PATTERN, path) is None:
        return
    url = service_proxy_url(API, "ns", "srv", 8080, path)
    assert url.startswith(API + PREFIX[:-1])


@given(st.lists(st.sampled_from([".", "..", "%2e", "%2E.", ".%2e", "a", "mcp"]), min_size=1))
def test_no_path_made_of_dot_segments_is_accepted_by_the_model(segments: list[str]) -> None:
    path = "/" + "/".join(segments)
    has_dots = any(s.replace("%2e", ".").replace("%2E", ".") in (".", "..") for s in segments)
    assert (re.fullmatch(ENDPOINT_PATH_PATTERN, path) is None) == (
        has_dots or any("%" in s for s in segments)
    )


class _OutsideKube(FakeKube):
    """What probe_endpoint reads of the operator's API client, outside a cluster."""

    in_cluster = False
    server = API

    def proxy_credentials(self) -> tuple[dict[str, str], bool]:
        return {"Authorization": "Bearer t"}, True


def test_the_probe_through_the_proxy_presents_the_services_name_which_the_adapter_allows() -> None:
    from mcp_operator.controller.mcpserver import render
    from mcp_operator.controller.mcpserver.managed import probe_endpoint
    from mcp_operator.serve.hosts import HostPolicy

    server = managed("/mcp")
    assert isinstance(server, MCPServer)
    settings = render.RenderSettings()
    url, headers, _verify = probe_endpoint(_OutsideKube(), server, settings)
    assert url == f"{API}{PREFIX}mcp"
    # The service proxy hands the client's Host on to the Pod: the API server's own address
    # would be refused by the adapter (421), the Service's in-cluster name is allowed.
    assert headers == {"Authorization": "Bearer t", "Host": "srv.ns.svc.cluster.local:8080"}
    adapter = HostPolicy(tuple(render.allowed_hosts(server, settings)), ())
    assert adapter.host_ok(headers["Host"])
    assert not adapter.host_ok("203.0.113.10:6443")
