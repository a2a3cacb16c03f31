"""Events survive an API server that goes away: retried under one name, never posted twice.

The API server is an httpx mock that keeps the Events it accepted; it can refuse
connections for a while, or accept a POST and lose the answer (the connection drops).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from mcp_operator.kube import client as client_module
from mcp_operator.kube.client import KubeClient
from mcp_operator.kube.credentials import Credential, Credentials
from mcp_operator.kube.errors import ApiUnreachable, KubeError

INVOLVED = {
    "apiVersion": "mcp-operator.dev/v1alpha1",
    "kind": "MCPServer",
    "metadata": {"name": "s", "namespace": "ns", "uid": "u"},
}


class Api:
    def __init__(self, *, refuse: int = 0, lose_answers: int = 0, status: int = 201) -> None:
        self.refuse, self.lose_answers, self.status = refuse, lose_answers, status
        self.stored: dict[str, Any] = {}
        self.attempts = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        import json

        self.attempts += 1
        if self.refuse:
            self.refuse -= 1
            raise httpx.ConnectError("connection refused", request=request)
        event = json.loads(request.content)
        name = event["metadata"]["name"]
        if name in self.stored:
            return httpx.Response(409, json={"message": f"events {name!r} already exists"})
        if self.status >= 400:
            return httpx.Response(self.status, json={"message": "no"})
        self.stored[name] = event
        if self.lose_answers:
            self.lose_answers -= 1
            raise httpx.ReadError("connection reset", request=request)
        return httpx.Response(201, json=event)


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "EVENT_RETRY_DELAYS", (0.0, 0.0, 0.0))


async def post(api: Api) -> None:
    kube = KubeClient(Credentials(Credential("https://api", token="t")))
    kube._client = httpx.AsyncClient(base_url="https://api", transport=httpx.MockTransport(api))
    try:
        await kube.post_event(INVOLVED, type_="Normal", reason="ToolsDiscovered", message="m")
    finally:
        await kube.close()


async def test_an_event_is_posted_once_the_api_server_is_back() -> None:
    api = Api(refuse=2)
    await post(api)
    assert api.attempts == 3 and len(api.stored) == 1


async def test_an_event_whose_answer_was_lost_is_not_posted_twice() -> None:
    api = Api(lose_answers=1)
    await post(api)
    assert api.attempts == 2 and len(api.stored) == 1


async def test_an_outage_longer_than_the_retries_loses_the_event_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = Api(refuse=10)
    await post(api)
    assert api.attempts == 4 and not api.stored
    assert "Could not post event ToolsDiscovered for s" in caplog.text


async def test_a_refusal_that_will_not_change_is_not_retried() -> None:
    api = Api(status=403)
    await post(api)
    assert api.attempts == 1


async def test_no_answer_is_a_kube_error_not_the_http_librarys() -> None:
    """The client translates a request that got no answer once, where it sends: callers catch
    KubeError alone (the leader, the NetworkPolicy reader), never httpx's exceptions."""
    kube = KubeClient(Credentials(Credential("https://api", token="t")))
    kube._client = httpx.AsyncClient(
        base_url="https://api", transport=httpx.MockTransport(Api(refuse=1))
    )
    try:
        with pytest.raises(ApiUnreachable) as raised:
            await kube.request("GET", "/api")
    finally:
        await kube.close()
    assert isinstance(raised.value, KubeError) and raised.value.status == 0
    assert raised.value.summary == "The API server did not answer: ConnectError: connection refused"
    assert isinstance(raised.value.__cause__, httpx.ConnectError)
