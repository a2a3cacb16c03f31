"""The probe's identity on a real adapter that authenticates: the operator's own token for
the server's audience (data_path.ProbeCredentials over kube/identity.OwnTokens) gets the probe
in, in ``Authorization`` and in ``Mcp-Operator-Authorization`` (the service-proxy path); no
token, or the token of another audience, is refused with 401 — against our adapter with
``--auth kubernetes`` in front of the Go SDK's hello server over stdio."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_operator.controller.mcpserver.data_path import PROXY_HEADER, ProbeCredentials
from mcp_operator.dev.processes import BIN_DIR
from mcp_operator.kube.identity import OwnTokens, ServiceAccountRef
from mcp_operator.mcp.discovery import discover
from mcp_operator.mcp.errors import ProbeError
from mcp_operator.mcp.target import ProbeTarget
from mcp_operator.net.egress import EgressPolicy
from tests.support import peers
from tests.support.issuer import AUDIENCE, TestIssuer, access_document, write_access

HELLO = BIN_DIR / "mcp-hello-server"
OPERATOR = ServiceAccountRef("mcp-operator-system", "mcp-operator")
pytestmark = pytest.mark.skipif(
    not HELLO.exists(), reason=f"{HELLO} is not built: run `make image-tools`"
)


class IssuingApi:
    """The TokenRequest API of a cluster whose issuer is ``issuer``."""

    def __init__(self, issuer: TestIssuer) -> None:
        self.issuer = issuer
        self.audiences: list[str] = []

    async def request(self, method: str, path: str, *, body: Any = None) -> Any:
        assert method == "POST" and path.endswith(f"/serviceaccounts/{OPERATOR.name}/token")
        audience = body["spec"]["audiences"][0]
        self.audiences.append(audience)
        token = self.issuer.service_account_token(
            OPERATOR.namespace, OPERATOR.name, audience=audience, pod=None
        )
        return {"status": {"token": token}}


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, TestIssuer]]:
    issuer = TestIssuer()
    directory = tmp_path_factory.mktemp("access")
    document = access_document(issuer, operators=[OPERATOR.username])
    access = write_access(Path(directory) / "access.json", document)
    port = peers.free_port()
    argv = [sys.executable, "-m", "mcp_operator", "adapter", "--port", str(port),
            "--auth=kubernetes", f"--access-config={access}", "--", str(HELLO)]  # fmt: skip
    with peers.run_server(argv, port, name="adapter", ready="/readyz"):
        yield f"http://127.0.0.1:{port}/mcp", issuer


def target(url: str, credentials: ProbeCredentials | None) -> ProbeTarget:
    return ProbeTarget(url, egress=EgressPolicy(allow_loopback=True), credentials=credentials)


@pytest.mark.parametrize("header", ["authorization", PROXY_HEADER])
async def test_the_probe_gets_in_with_its_own_token_in_either_header(
    guarded: tuple[str, TestIssuer], header: str
) -> None:
    url, issuer = guarded
    api = IssuingApi(issuer)
    credentials = ProbeCredentials(OwnTokens(api, OPERATOR), AUDIENCE, header)
    found = await discover(target(url, credentials))
    assert "greet" in {tool.name for tool in found.tools}
    assert api.audiences == [AUDIENCE]  # one token for every request of the probe
    assert json.dumps(repr(target(url, credentials))).count("eyJ") == 0


async def test_without_a_token_or_with_another_audiences_the_probe_is_refused(
    guarded: tuple[str, TestIssuer],
) -> None:
    url, issuer = guarded
    with pytest.raises(ProbeError) as bare:
        await discover(target(url, None))
    assert bare.value.reason == "AuthRequired"
    other = ProbeCredentials(OwnTokens(IssuingApi(issuer), OPERATOR), "another-audience")
    with pytest.raises(ProbeError) as wrong:
        await discover(target(url, other))
    assert "401" in wrong.value.message
