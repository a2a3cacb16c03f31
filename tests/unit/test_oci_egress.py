"""The registry reader's egress decisions, without sockets: which origins the operator's
flags name (and so may be private or loopback), the policy everything else gets, and the one
translation of a refusal into the reader's own error. The real connections are
``tests/protocol/test_oci_egress.py``'s."""

from __future__ import annotations

import httpx
import pytest

from mcp_operator.controller.mcpserver import destinations
from mcp_operator.controller.settings import EgressSettings
from mcp_operator.net.egress import EgressPolicy, Refused
from mcp_operator.net.transport import DestinationRefused
from mcp_operator.oci.client import RegistryClient, RegistryError
from mcp_operator.oci.settings import RegistrySettings
from mcp_operator.oci.wire import named_origins, named_policy, origin_of


def test_named_origins_are_the_exact_hosts_of_the_flags_with_their_ports() -> None:
    settings = RegistrySettings(
        insecure_hosts=frozenset({"127.0.0.1:5000", "registry.local", "[::1]:5001"}),
        allowed_hosts=frozenset({"Harbor.Corp.Example", "*.corp.example", "docker.io", "q?"}),
    )
    assert named_origins(settings) == {
        ("127.0.0.1", 5000),
        ("registry.local", 80),  # spoken to over plain HTTP
        ("::1", 5001),
        ("harbor.corp.example", 443),
        ("registry-1.docker.io", 443),  # where docker.io's API answers
    }


def test_no_flags_name_no_origin() -> None:
    assert named_origins(RegistrySettings()) == frozenset()


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("https://ghcr.io/v2/x/manifests/1", ("ghcr.io", 443)),
        ("http://Registry.Local/v2/", ("registry.local", 80)),
        ("http://127.0.0.1:5000/v2/", ("127.0.0.1", 5000)),
        ("https://[::1]:5001/v2/", ("::1", 5001)),
    ],
)
def test_a_request_s_origin_fills_in_the_scheme_s_port(url: str, origin: tuple[str, int]) -> None:
    assert origin_of(httpx.URL(url)) == origin


def test_a_named_registry_may_be_private_or_loopback_but_never_the_api_server() -> None:
    egress = EgressPolicy().with_refused([("10.96.0.1", 443)])
    policy = named_policy(egress)
    assert policy.refusal("10.1.2.3", 5000) is None
    assert policy.refusal("127.0.0.1", 5000) is None
    assert policy.refusal("10.96.0.1", 443) == "it is the Kubernetes API server"
    assert policy.refusal("169.254.169.254", 80) == "it is a cloud metadata address"


@pytest.mark.parametrize(
    ("private", "loopback", "private_ok", "loopback_ok"),
    [
        ("refused", "refused", False, False),
        ("labelled", "labelled", False, False),  # no Namespace decides for a shared reader
        ("allowed", "refused", True, False),
        ("refused", "allowed", False, True),
    ],
)
def test_other_registries_follow_the_operator_wide_settings_only(
    private: str, loopback: str, private_ok: bool, loopback_ok: bool
) -> None:
    settings = EgressSettings(
        private_destinations=private,  # type: ignore[arg-type]
        loopback_destinations=loopback,  # type: ignore[arg-type]
        refused_endpoints=frozenset({("10.96.0.1", None)}),
    )
    policy = destinations.registry_policy(settings)
    assert (policy.refusal("10.1.2.3") is None) is private_ok
    assert (policy.refusal("127.0.0.1") is None) is loopback_ok
    assert policy.refusal("10.96.0.1", 443) == "it is the Kubernetes API server"
    assert policy.refusal("140.82.112.33") is None


async def test_a_refused_redirect_is_one_error_that_names_the_hop_and_keeps_no_query() -> None:
    """The reader's one translation of the wire's refusal (httpx follows the redirect)."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "registry.example":
            return httpx.Response(307, headers={"location": "http://10.0.0.7:9000/b?sig=s3cr3t"})
        raise DestinationRefused(Refused("10.0.0.7", "it is a private address"), request=request)

    client = RegistryClient(transport=httpx.MockTransport(handler))
    try:
        with pytest.raises(RegistryError) as caught:
            await client.image_config("registry.example/acme/server:1")
    finally:
        await client.aclose()
    assert caught.value.reason == "ImageRegistryNotAllowed"
    assert caught.value.message == (
        "registry.example/acme/server:1: did not connect to http://10.0.0.7:9000 (redirected "
        "from registry.example:443): 10.0.0.7 is a private address (the operator's egress "
        "policy, docs/security.md)"
    )
