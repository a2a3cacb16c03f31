"""A managed server's access ConfigMap (controller/mcpserver/access.py, pure) and the
operator's side of it (data_path.py, kube/identity.py) against a recording fake API: who may
call, revoked Pods kept across restarts and pruned by time, the probe's own tokens."""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from typing import Any

import jwt
import pytest

from mcp_operator.api import MCPServer
from mcp_operator.controller.mcpserver import access, render
from mcp_operator.controller.mcpserver.data_path import DataPath
from mcp_operator.kube import Resource
from mcp_operator.kube.credentials import CredentialError
from mcp_operator.kube.identity import IssuerKeys, OwnTokens, ServiceAccountRef, own_identity
from mcp_operator.mcp.credentials import CredentialsError
from mcp_operator.serve.auth.access import parse
from tests.unit.fakes import FakeKube

NOW = datetime.datetime(2026, 12, 2, 5, 0, tzinfo=datetime.UTC)
JWKS = {"keys": [{"kty": "RSA", "kid": "k1", "n": "AQAB", "e": "AQAB"}]}


def server(**access_spec: Any) -> MCPServer:
    spec: dict[str, Any] = {"mode": "managed", "deployment": {"image": "srv:1"}}
    if access_spec:
        spec["access"] = access_spec
    return MCPServer.model_validate(
        {"metadata": {"name": "git", "namespace": "tools", "uid": "srv-uid"}, "spec": spec}
    )


def test_the_document_permits_the_servers_namespace_the_listed_ones_and_the_operator() -> None:
    body = access.document(
        server(namespaces=["agents"], serviceAccounts=["robot", "agents/triager"]),
        issuer="https://kubernetes.default.svc",
        jwks=JWKS,
        operators=["system:serviceaccount:mcp-operator-system:mcp-operator"],
        revoked=["b", "a"],
    )
    parsed = parse(body)  # the adapter's own reader takes it
    assert parsed.audience == "mcpserver.mcp-operator.dev/tools/git"
    assert parsed.namespaces == {"tools", "agents"}
    assert parsed.service_accounts == {"tools/robot", "agents/triager"}
    assert parsed.operators == {"system:serviceaccount:mcp-operator-system:mcp-operator"}
    assert parsed.revoked_pods == {"a", "b"}
    assert parsed.issuer == "https://kubernetes.default.svc" and parsed.jwks == JWKS
    assert body["allow"]["namespaces"] == ["agents", "tools"]


def test_a_star_permits_every_namespace_and_oidc_settings_are_passed_on() -> None:
    body = access.document(
        server(
            namespaces=["*", "x"],
            authentication="oidc",
            oidc={"issuer": "https://idp.example", "audience": "https://git.example/mcp"},
        ),
        issuer=None,
        jwks=None,
        operators=[],
        revoked=[],
    )
    assert body["allow"]["namespaces"] == ["*"]
    assert body["oidc"]["issuer"] == "https://idp.example"
    assert "issuer" not in body


def test_revocations_survive_in_the_annotation_and_expire_by_time() -> None:
    later = NOW + datetime.timedelta(minutes=11)
    first = access.revocations(None, {"pod-a": later}, NOW)
    manifest = access.config_map(server(), {"audience": "x"}, first)
    assert manifest["metadata"]["name"] == "git-access"
    assert manifest["metadata"]["ownerReferences"][0]["uid"] == "srv-uid"
    stored = json.loads(manifest["metadata"]["annotations"][access.REVOKED_ANNOTATION])
    assert stored == {"pod-a": "2026-12-02T05:11:00Z"}
    # A restarted operator remembers nothing, reads the ConfigMap back: still revoked.
    again = access.revocations(manifest, {"pod-b": later}, NOW + datetime.timedelta(minutes=5))
    assert sorted(again) == ["pod-a", "pod-b"]
    assert access.revocations(manifest, {}, later + datetime.timedelta(seconds=1)) == {}


def test_a_damaged_annotation_is_read_as_empty_not_as_a_failure() -> None:
    broken = {"metadata": {"annotations": {access.REVOKED_ANNOTATION: "{not json"}}}
    assert access.revocations(broken, {}, NOW) == {}
    odd = {"metadata": {"annotations": {access.REVOKED_ANNOTATION: '{"u": 7, "v": "x"}'}}}
    assert access.revocations(odd, {}, NOW) == {}


def test_revocations_are_bounded_keeping_those_that_expire_last() -> None:
    added = {
        f"p{i}": NOW + datetime.timedelta(seconds=i + 1) for i in range(access.MAX_REVOKED + 5)
    }
    kept = access.revocations(None, added, NOW)
    assert len(kept) == access.MAX_REVOKED
    assert "p0" not in kept and f"p{access.MAX_REVOKED + 4}" in kept


def agent_pod(uid: str = "pod-uid") -> dict[str, Any]:
    token = {"audience": "mcpserver.mcp-operator.dev/tools/git", "expirationSeconds": 600}
    return {
        "metadata": {"uid": uid, "name": "triage", "namespace": "agents"},
        "spec": {
            "volumes": [
                {"name": "token-0", "projected": {"sources": [{"serviceAccountToken": token}]}},
                {
                    "name": "kube-api-access",
                    "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
                },
                {"name": "tmp", "emptyDir": {}},
            ]
        },
    }


def test_a_pods_token_servers_are_read_from_its_projected_audiences() -> None:
    assert access.token_servers(agent_pod()) == [("tools", "git")]
    assert access.token_lifetime(agent_pod()) == datetime.timedelta(seconds=660)
    assert access.token_servers({"spec": {}}) == []


class FakeApi(FakeKube):
    """Answers the requests the data path makes; records them."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[tuple[str, str, Any]] = []
        self.stored: dict[str, Mapping[str, Any]] = {}
        self.issued = 0
        self.fail_tokens = False

    async def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Any:
        self.requests.append((method, path, body))
        if path == "/.well-known/openid-configuration":
            return {"issuer": "https://kubernetes.default.svc"}
        if path == "/openid/v1/jwks":
            return JWKS
        if path.endswith("/token"):
            if self.fail_tokens:
                raise RuntimeError("forbidden")
            self.issued += 1
            expires = (NOW + datetime.timedelta(seconds=600)).isoformat()
            return {"status": {"token": f"tok-{self.issued}", "expirationTimestamp": expires}}
        raise AssertionError(path)

    async def get(self, resource: Resource, namespace: str | None, name: str) -> Any:
        return self.stored.get(f"{namespace}/{name}")

    async def apply(self, resource: Resource, manifest: Mapping[str, Any]) -> Any:
        key = f"{manifest['metadata']['namespace']}/{manifest['metadata']['name']}"
        self.stored[key] = manifest
        return manifest


OPERATOR = ServiceAccountRef("mcp-operator-system", "mcp-operator")


async def test_the_operator_mints_tokens_only_for_itself_once_per_audience() -> None:
    api = FakeApi()
    clock = {"now": NOW}
    tokens = OwnTokens(api, OPERATOR, now=lambda: clock["now"])
    assert await tokens.token("aud-1") == "tok-1"
    assert await tokens.token("aud-1") == "tok-1"  # cached
    assert await tokens.token("aud-2") == "tok-2"
    paths = {path for _method, path, _body in api.requests}
    assert paths == {"/api/v1/namespaces/mcp-operator-system/serviceaccounts/mcp-operator/token"}
    assert [body["spec"]["audiences"] for *_, body in api.requests] == [["aud-1"], ["aud-2"]]
    clock["now"] = NOW + datetime.timedelta(seconds=500)  # within 2 minutes of the end
    assert await tokens.token("aud-1") == "tok-3"
    assert "tok" not in repr(tokens)


async def test_a_refused_token_request_fails_with_the_identity_not_a_value() -> None:
    api = FakeApi()
    api.fail_tokens = True
    with pytest.raises(CredentialError) as caught:
        await OwnTokens(api, OPERATOR).token("aud")
    assert "mcp-operator-system/mcp-operator" in str(caught.value)


async def test_the_probe_uses_the_proxy_header_outside_the_cluster_and_renews_after_401() -> None:
    api = FakeApi()
    data_path = DataPath(api, tokens=OwnTokens(api, OPERATOR, now=lambda: NOW))
    inside = data_path.probe_credentials(server(), proxied=False)
    outside = data_path.probe_credentials(server(), proxied=True)
    assert inside is not None and outside is not None
    assert await inside.headers() == {"authorization": "Bearer tok-1"}
    assert await outside.headers() == {"mcp-operator-authorization": "Bearer tok-1"}
    assert inside.audience == "mcpserver.mcp-operator.dev/tools/git"
    assert await inside.rejected(403, None) is False  # who we are will not change
    assert await inside.rejected(401, None) is True
    assert await inside.headers() == {"authorization": "Bearer tok-2"}
    assert data_path.probe_credentials(server(authentication="none"), proxied=False) is None
    api.fail_tokens = True
    inside.tokens.forget(inside.audience)
    with pytest.raises(CredentialsError):
        await inside.headers()


async def test_a_deleted_pod_is_written_into_its_servers_configmap_and_kept_there() -> None:
    api = FakeApi()
    data_path = DataPath(api, tokens=OwnTokens(api, OPERATOR))
    assert data_path.pod_deleted(agent_pod("gone-1"), NOW) == [("tools", "git")]
    await data_path.write_access(server(), NOW)
    written = api.stored["tools/git-access"]
    body = json.loads(written["data"]["access.json"])
    assert body["revokedPods"] == ["gone-1"]
    assert body["allow"]["operators"] == ["system:serviceaccount:mcp-operator-system:mcp-operator"]
    assert data_path.pending == {}
    # A new operator (nothing pending) keeps it until the token lifetime has passed.
    fresh = DataPath(api, tokens=None)
    await fresh.write_access(server(), NOW + datetime.timedelta(minutes=5))
    assert json.loads(api.stored["tools/git-access"]["data"]["access.json"])["revokedPods"] == [
        "gone-1"
    ]
    await fresh.write_access(server(), NOW + datetime.timedelta(minutes=12))
    assert json.loads(api.stored["tools/git-access"]["data"]["access.json"])["revokedPods"] == []


async def test_no_configmap_is_written_for_a_server_without_authentication() -> None:
    api = FakeApi()
    assert await DataPath(api, tokens=None).write_access(server(authentication="none")) is None
    assert api.stored == {}


async def test_the_issuer_keys_are_cached_and_fetched_again_when_due() -> None:
    api = FakeApi()
    clock = {"now": 0.0}
    keys = IssuerKeys(api, refresh_seconds=300, monotonic=lambda: clock["now"])
    first = await keys.current()
    await keys.current()
    assert first.issuer == "https://kubernetes.default.svc" and len(api.requests) == 2
    clock["now"] = 301
    await keys.current()
    assert len(api.requests) == 4


def test_the_operators_identity_comes_from_the_setting_or_its_in_cluster_token(
    tmp_path: Any,
) -> None:
    assert own_identity("ns/me") == ServiceAccountRef("ns", "me")
    with pytest.raises(ValueError, match="namespace/name"):
        own_identity("just-a-name")
    claims = {"sub": "system:serviceaccount:mcp-operator-system:mcp-operator"}
    token_file = tmp_path / "token"
    # As the kubelet projects it: signed by the API server's key, which the operator need not
    # know to read its own name; an expired token still names it.
    token_file.write_text(jwt.encode({**claims, "exp": 1}, "k" * 32, algorithm="HS256") + "\n")
    assert own_identity(None, token_file) == OPERATOR
    token_file.write_text(jwt.encode({"sub": "alice"}, "k" * 32, algorithm="HS256"))
    assert own_identity(None, token_file) is None
    token_file.write_text("not-a-jwt")
    assert own_identity(None, token_file) is None
    assert own_identity(None, tmp_path / "absent") is None


def test_the_adapter_gets_the_access_flags_and_volume_only_when_it_authenticates() -> None:
    settings = render.RenderSettings()
    stdio = {"command": ["srv"]}

    def adapter(spec_access: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
        body: dict[str, Any] = {"mode": "managed", "deployment": {"image": "srv:1", **stdio}}
        if spec_access:
            body["access"] = spec_access
        model = MCPServer.model_validate(
            {"metadata": {"name": "git", "namespace": "tools", "uid": "u"}, "spec": body}
        )
        pod = render.deployment(model, settings)["spec"]["template"]["spec"]
        (container,) = [c for c in pod["containers"] if c["name"] == "adapter"]
        return container["args"], {v["name"]: v for v in pod["volumes"]}

    args, volumes = adapter({})
    assert "--auth=kubernetes" in args
    assert "--access-config=/etc/mcp-operator/access/access.json" in args
    assert volumes["access"]["configMap"]["name"] == "git-access"
    args, volumes = adapter({"authentication": "none"})
    assert "--auth=none" in args and "access" not in volumes
    assert not any(a.startswith("--access-config") for a in args)
