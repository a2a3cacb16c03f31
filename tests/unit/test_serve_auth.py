"""Inbound authentication's pure parts: token checks, authorization, the cache, the access
file's reloads and the gate's answers (serve/auth/)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import time
from pathlib import Path
from typing import Any

import jwt
import pytest

from mcp_operator.serve.auth import tokens
from mcp_operator.serve.auth.access import AccessConfigError, AccessFile, parse
from mcp_operator.serve.auth.gate import SCOPE_KEY, AuthGate, bearer
from mcp_operator.serve.auth.tokens import KeySet, TokenCache, TokenRefused, Verified
from mcp_operator.serve.auth.verifier import Verifier
from tests.support.issuer import AUDIENCE, TestIssuer, access_document, write_access

NOW = time.time()
ISSUER = TestIssuer()
EC_ISSUER = TestIssuer(alg="ES256")


def verifier(issuer: TestIssuer = ISSUER, **options: Any) -> Verifier:
    return Verifier(parse(access_document(issuer, **options)))


def refusal(token: str, v: Verifier | None = None, now: float = NOW) -> str:
    with pytest.raises(TokenRefused) as caught:
        (v or verifier()).check(token, now)
    return caught.value.reason


def b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


# ----------------------------------------------------------------- verification


@pytest.mark.parametrize("issuer", [ISSUER, EC_ISSUER], ids=["RS256", "ES256"])
def test_a_pod_bound_service_account_token_names_its_namespace_account_and_pod(
    issuer: TestIssuer,
) -> None:
    decision = verifier(issuer).check(issuer.service_account_token(now=NOW), NOW)
    caller = decision.caller
    assert decision.permitted
    assert (caller.kind, caller.namespace, caller.service_account, caller.pod) == (
        "serviceaccount", "team", "agent", "run-1")  # fmt: skip
    assert caller.describe() == "system:serviceaccount:team:agent (pod run-1)"


def test_each_broken_token_is_refused_with_its_own_reason() -> None:
    other_key = TestIssuer(kid=ISSUER.kid)  # same kid, another key
    cases = {
        "expired": ISSUER.service_account_token(now=NOW - 700),
        "not_yet_valid": ISSUER.service_account_token(now=NOW + 300),
        "wrong_audience": ISSUER.service_account_token(
            audience="mcpserver.mcp-operator.dev/x/y", now=NOW
        ),
        "wrong_issuer": TestIssuer("https://elsewhere").service_account_token(now=NOW),
        "bad_signature": other_key.service_account_token(now=NOW),
        "unknown_key": TestIssuer(ISSUER.issuer).service_account_token(now=NOW),
        "no_expiry": ISSUER.sign({"iss": ISSUER.issuer, "aud": AUDIENCE, "sub": "x"}),
        "bad_claims": ISSUER.service_account_token(sub="system:serviceaccount:team:admin", now=NOW),
        "malformed": "not.a.jwt",
    }
    assert {reason: refusal(token) for reason, token in cases.items()} == {
        reason: reason for reason in cases
    }


def test_the_leeway_is_small_and_both_sides_of_it_hold() -> None:
    token = ISSUER.service_account_token(now=NOW - 600 + 10)  # expired 10 s ago
    assert verifier().check(token, NOW).permitted
    late = ISSUER.service_account_token(now=NOW - 600 - tokens.LEEWAY_SECONDS - 1)
    assert refusal(late) == "expired"


def test_an_audience_list_that_contains_ours_is_accepted() -> None:
    token = ISSUER.service_account_token(
        audience=["https://kubernetes.default.svc", AUDIENCE], now=NOW
    )
    assert verifier().check(token, NOW).permitted


def test_unsigned_and_symmetric_tokens_are_refused_however_they_are_dressed() -> None:
    claims = json.loads(base64.urlsafe_b64decode(
        ISSUER.service_account_token(now=NOW).split(".")[1] + "=="))  # fmt: skip
    unsigned = f"{b64({'alg': 'none', 'kid': ISSUER.kid})}.{b64(claims)}."
    assert refusal(unsigned) in ("unknown_key", "malformed")
    # HS256 with the public key's JSON as the secret: the classic algorithm confusion.
    signing_input = f"{b64({'alg': 'HS256', 'kid': ISSUER.kid})}.{b64(claims)}"
    mac = hmac.new(json.dumps(ISSUER.jwk).encode(), signing_input.encode(), hashlib.sha256)
    confused = f"{signing_input}.{base64.urlsafe_b64encode(mac.digest()).rstrip(b'=').decode()}"
    assert refusal(confused) == "unknown_key"
    # An RS256 key cannot verify an ES256-labelled token, even with a matching kid.
    relabelled = EC_ISSUER.sign(claims, headers={"kid": ISSUER.kid})
    assert refusal(relabelled) == "unknown_key"


@pytest.mark.parametrize(
    "garbage",
    ["", ".", "..", "a.b.c", "x" * 20_000, "é.é.é", f"{b64({'alg': 'RS256'})}.e30.AAAA",
     f"{b64([1])}.{b64([2])}.x",
     f"{b64({'alg': 'RS256', 'kid': 7})}.{b64({'iss': ISSUER.issuer})}.x",
     "eyJ" * 3000 + ".e30.x"],
)  # fmt: skip
def test_garbage_tokens_are_refused_never_raised(garbage: str) -> None:
    assert refusal(garbage) in tokens.REASONS


def test_a_revoked_pods_token_is_refused_and_other_pods_of_the_account_still_work() -> None:
    v = verifier(revoked=["gone-uid"])
    assert refusal(ISSUER.service_account_token(pod_uid="gone-uid", now=NOW), v) == "revoked"
    assert v.check(ISSUER.service_account_token(pod_uid="live-uid", now=NOW), NOW).permitted


def test_rotated_keys_old_and_new_both_verify_while_both_are_published() -> None:
    new = TestIssuer(ISSUER.issuer)
    document = access_document(ISSUER)
    document["jwks"]["keys"].append(new.jwk)
    v = Verifier(parse(document))
    assert v.check(ISSUER.service_account_token(now=NOW), NOW).permitted
    assert v.check(new.service_account_token(now=NOW), NOW).permitted
    document["jwks"] = new.jwks()  # the old key retired
    assert (
        refusal(ISSUER.service_account_token(now=NOW), Verifier(parse(document))) == "unknown_key"
    )


def test_a_jwks_with_odd_keys_keeps_the_good_ones_and_never_raises() -> None:
    odd = [
        {"kty": "oct", "k": "c2VjcmV0", "kid": "sym"},  # symmetric: never
        {**ISSUER.jwk, "kid": "priv", "d": "AAAA"},  # a private key published: never
        {"kty": "RSA", "n": "!!", "e": "AQAB", "kid": "broken"},
        {"kty": "EC", "crv": "P-999", "x": "AA", "y": "AA"},
        {"kty": "OKP", "crv": "Ed25519", "x": "AA"},
        {**ISSUER.jwk, "kid": "enc", "use": "enc"},
        "not a key",
        None,
        7,
        {"kty": ["RSA"]},
    ]
    keys = KeySet({"keys": [*odd, ISSUER.jwk]})
    assert len(keys) == 1 and keys.skipped == len(odd)
    assert KeySet({"keys": odd}).candidates("sym") == []


# ----------------------------------------------------------------- authorization


@pytest.mark.parametrize(
    ("token_of", "allow", "permitted"),
    [
        (("team", "agent"), {}, True),
        (("other", "agent"), {}, False),
        (("other", "agent"), {"namespaces": ["*"]}, True),
        (("team", "agent"), {"service_accounts": ["team/agent"]}, True),
        (("team", "intruder"), {"service_accounts": ["team/agent"]}, False),
        (("team", "agent"), {"namespaces": []}, False),
        (("mcp-operator", "mcp-operator"), {"namespaces": []}, True),
        (("mcp-operator", "other"), {"namespaces": []}, False),
    ],
)
def test_who_may_call_follows_namespaces_accounts_and_operators(
    token_of: tuple[str, str], allow: dict[str, Any], permitted: bool
) -> None:
    v = verifier(**allow)
    decision = v.check(ISSUER.service_account_token(*token_of, pod=None, now=NOW), NOW)
    assert decision.permitted is permitted


# ----------------------------------------------------------------- the cache


def test_a_verified_token_is_checked_once_and_never_trusted_past_its_expiry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    verifications = 0
    real = tokens._verifies

    def counting(*args: Any) -> bool:
        nonlocal verifications
        verifications += 1
        return real(*args)

    v = verifier()
    token = ISSUER.service_account_token(now=NOW, lifetime=600)
    monkeypatch.setattr(tokens, "_verifies", counting)
    for _ in range(5):
        assert v.check(token, NOW).permitted
    assert verifications == 1
    assert v.cached() == 1
    assert refusal(token, v, now=NOW + 600 + tokens.LEEWAY_SECONDS) == "expired"
    assert v.cached() == 0


def test_the_cache_is_bounded_and_drops_the_oldest_first() -> None:
    cache = TokenCache(max_entries=3)
    caller = verifier().check(ISSUER.service_account_token(now=NOW), NOW).caller
    for i in range(5):
        cache.put(bytes([i]), Verified(caller, NOW + 100), NOW)
    assert len(cache) == 3
    assert cache.get(bytes([0]), NOW) is None and cache.get(bytes([4]), NOW) is not None


def test_a_cached_token_of_a_pod_revoked_later_is_refused_after_the_reload(tmp_path: Path) -> None:
    path = write_access(tmp_path / "access.json", access_document(ISSUER))
    clock = FakeClock()
    gate = AuthGate("kubernetes", AccessFile(str(path), clock=clock), clock=lambda: NOW)
    token = ISSUER.service_account_token(pod_uid="p1", now=NOW)
    assert gate.verifier().check(token, NOW).permitted
    write_access(path, access_document(ISSUER, revoked=["p1"]))
    bump(path)
    clock.now += 2
    assert refusal(token, gate.verifier()) == "revoked"


# ----------------------------------------------------------------- the access file


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def bump(path: Path) -> None:
    """Make sure the file's (inode, size, mtime) differ, however fast the test writes."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_a_bad_update_keeps_the_last_good_configuration_and_a_good_one_is_taken(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_access(tmp_path / "access.json", access_document(ISSUER))
    clock = FakeClock()
    access = AccessFile(str(path), clock=clock)
    path.write_text("{not json")
    bump(path)
    clock.now += 2
    assert access.current().namespaces == {"team"} and access.generation == 1
    assert access.reload_failures == 1 and "Kept the last good" in caplog.text
    clock.now += 2
    access.current()
    assert access.reload_failures == 1  # the same bad version is reported once
    path.unlink()
    clock.now += 2
    assert access.current().namespaces == {"team"} and access.reload_failures == 2
    write_access(path, access_document(ISSUER, namespaces=["*"]))
    clock.now += 2
    assert access.current().namespaces == {"*"} and access.generation == 2


def test_the_file_is_read_through_the_kubelets_symlink_swap(tmp_path: Path) -> None:
    """The kubelet's layout: access.json -> ..data/access.json, ..data -> ..<timestamp>."""
    for version, namespaces in (("..v1", ["team"]), ("..v2", ["other"])):
        (tmp_path / version).mkdir()
        write_access(
            tmp_path / version / "access.json", access_document(ISSUER, namespaces=namespaces)
        )
    (tmp_path / "..data").symlink_to("..v1")
    (tmp_path / "access.json").symlink_to("..data/access.json")
    clock = FakeClock()
    access = AccessFile(str(tmp_path / "access.json"), clock=clock)
    assert access.current().namespaces == {"team"}
    (tmp_path / "..data_tmp").symlink_to("..v2")
    (tmp_path / "..data_tmp").replace(tmp_path / "..data")
    clock.now += 0.5
    assert access.current().namespaces == {"team"}  # not checked yet (once a second)
    clock.now += 1
    assert access.current().namespaces == {"other"}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "JSON object"),
        ({}, "audience"),
        ({"audience": "a", "issuer": "i"}, "issuer and jwks go together"),
        ({"audience": "a", "jwks": {"nope": 1}, "issuer": "i"}, "JWK Set"),
        ({"audience": "a", "allow": {"namespaces": "team"}}, "allow.namespaces"),
        ({"audience": "a", "allow": {"serviceAccounts": ["agent"]}}, "ns/name"),
        ({"audience": "a", "oidc": {"issuer": "i", "resource": "r"}}, "jwks or jwksURL"),
        ({"audience": "a", "oidc": {"issuer": "i", "resource": "r", "jwksURL": "file:///x"}},
         "http"),
    ],
)  # fmt: skip
def test_a_bad_configuration_names_what_is_wrong(document: Any, message: str) -> None:
    with pytest.raises(AccessConfigError, match=message):
        parse(document)


def test_a_missing_or_bad_file_is_an_error_at_start(tmp_path: Path) -> None:
    with pytest.raises(AccessConfigError, match="cannot read"):
        AccessFile(str(tmp_path / "nope.json"), clock=time.monotonic)
    (tmp_path / "bad.json").write_text("[]")
    with pytest.raises(AccessConfigError, match="JSON object"):
        AccessFile(str(tmp_path / "bad.json"), clock=time.monotonic)


# ----------------------------------------------------------------- the gate


class Captured:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def __call__(self, message: Any) -> None:
        self.messages.append(dict(message))

    @property
    def status(self) -> int:
        return int(self.messages[0]["status"])

    def header(self, name: bytes) -> str | None:
        for key, value in self.messages[0]["headers"]:
            if key == name:
                return str(value.decode())
        return None

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages[1:])


OIDC = {
    "issuer": "https://login.example",
    "audience": "https://mcp.example/mcp",
    "resource": "https://mcp.example/mcp",
    "authorizationServers": ["https://login.example"],
}


def gate_of(tmp_path: Path, mode: str = "kubernetes", **options: Any) -> tuple[AuthGate, list[str]]:
    counted: list[str] = []
    path = write_access(tmp_path / "access.json", access_document(ISSUER, **options))
    gate = AuthGate(mode, AccessFile(str(path), clock=time.monotonic), count=counted.append)  # type: ignore[arg-type]
    return gate, counted


def admit(gate: AuthGate, headers: dict[bytes, str]) -> tuple[Any, Captured, dict[str, Any]]:
    send = Captured()
    scope: dict[str, Any] = {}
    caller = asyncio.run(gate.admit(scope, headers, send))
    return caller, send, scope


def test_no_token_is_a_401_without_an_error_code_and_a_bad_one_says_invalid_token(
    tmp_path: Path,
) -> None:
    gate, counted = gate_of(tmp_path)
    caller, send, _ = admit(gate, {})
    assert caller is None and send.status == 401
    assert send.header(b"www-authenticate") == "Bearer"
    _, send, _ = admit(gate, {b"authorization": "Bearer a.b.c"})
    challenge = send.header(b"www-authenticate") or ""
    assert send.status == 401 and challenge.startswith('Bearer error="invalid_token"')
    _, send, _ = admit(gate, {b"authorization": "Basic dXNlcjpwYXNz"})
    assert send.status == 401
    assert counted == ["missing", "malformed", "malformed"]


def test_a_valid_caller_that_may_not_call_gets_403_naming_it_never_the_token(
    tmp_path: Path,
) -> None:
    gate, counted = gate_of(tmp_path)
    token = ISSUER.service_account_token("other", "agent", now=NOW)
    caller, send, _ = admit(gate, {b"authorization": f"Bearer {token}"})
    assert caller is None and send.status == 403 and counted == ["forbidden"]
    assert b"system:serviceaccount:other:agent" in send.body and token.encode() not in send.body


def test_the_service_proxy_header_is_checked_like_authorization(tmp_path: Path) -> None:
    gate, _ = gate_of(tmp_path, operators=["system:serviceaccount:mcp-operator:mcp-operator"])
    token = ISSUER.service_account_token("mcp-operator", "mcp-operator", pod=None, now=NOW)
    caller, _, scope = admit(gate, {b"mcp-operator-authorization": f"Bearer {token}"})
    assert caller is not None and scope[SCOPE_KEY] is caller
    assert caller.key == "sa:mcp-operator/mcp-operator"


def test_oidc_mode_names_its_metadata_in_the_challenge_and_accepts_its_issuers_tokens(
    tmp_path: Path,
) -> None:
    login = TestIssuer(OIDC["issuer"])
    gate, _ = gate_of(tmp_path, "oidc", oidc={**OIDC, "jwks": login.jwks()})
    _, send, _ = admit(gate, {})
    assert send.header(b"www-authenticate") == (
        'Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource/mcp"'
    )
    caller, _, _ = admit(
        gate, {b"authorization": f"Bearer {login.oidc_token('ada', OIDC['audience'])}"}
    )
    assert caller is not None and caller.kind == "oidc" and caller.subject == "ada"
    _, send, _ = admit(
        gate, {b"authorization": f"Bearer {login.oidc_token('ada', 'https://other/mcp')}"}
    )
    challenge = send.header(b"www-authenticate") or ""
    assert send.status == 401 and 'error="invalid_token"' in challenge
    assert "resource_metadata=" in challenge
    # the cluster's ServiceAccount tokens still work in OIDC mode (the operator's probe)
    caller, _, _ = admit(
        gate, {b"authorization": f"Bearer {ISSUER.service_account_token(now=NOW)}"}
    )
    assert caller is not None and caller.kind == "serviceaccount"
    send = Captured()
    assert asyncio.run(gate.serve_metadata("/.well-known/oauth-protected-resource/mcp", send))
    assert json.loads(send.body) == {
        "resource": "https://mcp.example/mcp",
        "authorization_servers": ["https://login.example"],
        "bearer_methods_supported": ["header"],
    }


def test_kubernetes_mode_serves_no_metadata_and_none_mode_admits_anonymous(tmp_path: Path) -> None:
    gate, _ = gate_of(tmp_path)
    assert not asyncio.run(gate.serve_metadata("/.well-known/oauth-protected-resource", Captured()))
    open_gate = AuthGate("none", None)
    caller, _, _ = admit(open_gate, {})
    assert caller is not None and caller.kind == "anonymous"
    with pytest.raises(ValueError, match="needs --access-config"):
        AuthGate("kubernetes", None)


@pytest.mark.parametrize(
    ("value", "token"),
    [(None, None), ("", None), ("Bearer abc", "abc"), ("bearer  abc ", "abc"), ("Basic x", ""),
     ("Bearer", "")],
)  # fmt: skip
def test_bearer_values_are_read_by_rfc_6750s_rules(value: str | None, token: str | None) -> None:
    assert bearer(value) == token


@pytest.mark.parametrize("alg", ["RS384", "RS512", "PS256", "PS384", "PS512", "ES384"])
def test_every_algorithm_of_the_allowed_list_verifies_and_refuses_a_changed_payload(
    alg: str,
) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    issuer = TestIssuer(alg="ES256" if alg.startswith("ES") else "RS256")
    if alg == "ES384":
        issuer.key = ec.generate_private_key(ec.SECP384R1())
        issuer.jwk = {**json.loads(jwt.algorithms.ECAlgorithm.to_jwk(issuer.key.public_key())),
                      "kid": issuer.kid}  # fmt: skip
    issuer.alg = alg
    issuer.jwk["alg"] = alg
    v = verifier(issuer)
    token = issuer.service_account_token(now=NOW)
    assert v.check(token, NOW).permitted
    head, body, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=="))
    claims["kubernetes.io"]["namespace"] = "team"  # same claims, re-encoded differently
    claims["sub"] = "system:serviceaccount:team:admin"
    forged = f"{head}.{b64(claims)}.{signature}"
    assert refusal(forged, v) == "bad_signature"


def test_pyjwt_and_we_agree_on_a_token_pyjwt_signed() -> None:
    """The JWS reading of tokens.read against the library's own encoder and decoder."""
    token = ISSUER.service_account_token(now=NOW)
    key = jwt.PyJWK(ISSUER.jwk)
    times = {"verify_exp": False, "verify_iat": False, "verify_nbf": False}
    theirs = jwt.decode(token, key, algorithms=["RS256"], audience=AUDIENCE, options=times)
    assert verifier().check(token, NOW).caller.subject == theirs["sub"]
