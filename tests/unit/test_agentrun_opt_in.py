"""An AgentRun borrows nothing: its agent's Secrets and identity are opted in, its bridge
image is the platform's choice.

The agent runs an image of the run author's choosing: a Secret in its environment or a
ServiceAccount it runs as must carry ``mcp-operator.dev/for-mcp-servers=true``, exactly as
for managed MCPServers. The bridge mounts the servers' header Secrets, so ``spec.bridge.image``
is accepted only from the operator's allowlist. A refused run starts nothing and says why,
naming the object, never a value.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_operator import OPT_IN_LABEL, OPT_IN_VALUE
from mcp_operator.kube import SERVICEACCOUNTS
from tests.unit.fakes import FakeKube
from tests.unit.test_ownership import agent_run, condition, reconcile_run

OWN = "registry.example/mcp-operator:1.2.3@sha256:" + "a" * 64
ENV = [{"name": "DB", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}}]


def agent(**fields: Any) -> dict[str, Any]:
    return {"agent": {"image": "agent:1", **fields}}


@pytest.mark.parametrize(
    ("present", "labelled", "reason"),
    [(False, False, "SecretNotFound"), (True, False, "SecretNotOptedIn")],
)
async def test_an_agent_env_secret_must_exist_and_be_opted_in(
    present: bool, labelled: bool, reason: str
) -> None:
    kube = FakeKube()
    if present:
        kube.put_secret("ns", "db", {"pw": "hunter2"}, opted_in=labelled)
    done = await reconcile_run(kube, agent_run(**agent(env=ENV)))
    status, found, message = condition(done.patch, "Ready")
    assert (status, found) == ("False", reason)
    assert "Secret ns/db" in message and "hunter2" not in message
    assert kube.applied == []


async def test_an_opted_in_env_secret_reaches_the_agent_by_reference() -> None:
    kube = FakeKube()
    kube.put_secret("ns", "db", {"pw": "hunter2"})
    await reconcile_run(kube, agent_run(**agent(env=ENV)))
    pod = kube.objects[("pods", "ns", "app")]
    (container,) = pod["spec"]["containers"]
    assert ENV[0] in container["env"]
    assert "hunter2" not in str(kube.objects)


@pytest.mark.parametrize(
    ("labels", "reason"),
    [(None, "ServiceAccountNotFound"), ({}, "ServiceAccountNotOptedIn")],
)
async def test_the_agents_service_account_must_be_opted_in(
    labels: dict[str, str] | None, reason: str
) -> None:
    kube = FakeKube()
    if labels is not None:
        kube.put(
            SERVICEACCOUNTS, {"metadata": {"name": "admin", "namespace": "ns", "labels": labels}}
        )
    done = await reconcile_run(kube, agent_run(**agent(serviceAccountName="admin")))
    status, found, message = condition(done.patch, "Ready")
    assert (status, found) == ("False", reason)
    assert "ServiceAccount ns/admin" in message
    assert kube.applied == []


async def test_an_opted_in_service_account_runs_the_agent() -> None:
    kube = FakeKube()
    labels = {OPT_IN_LABEL: OPT_IN_VALUE}
    kube.put(SERVICEACCOUNTS, {"metadata": {"name": "bot", "namespace": "ns", "labels": labels}})
    await reconcile_run(kube, agent_run(**agent(serviceAccountName="bot")))
    assert kube.objects[("pods", "ns", "app")]["spec"]["serviceAccountName"] == "bot"


def bridge_image(kube: FakeKube) -> str:
    pod = kube.objects[("pods", "ns", "app")]
    image: str = pod["spec"]["initContainers"][0]["image"]
    return image


async def test_a_foreign_bridge_image_is_refused() -> None:
    kube = FakeKube()
    run = agent_run(bridge={"image": "evil.example/bridge:1"})
    done = await reconcile_run(kube, run, bridge_image=OWN)
    status, reason, message = condition(done.patch, "Ready")
    assert (status, reason) == ("False", "BridgeImageNotAllowed")
    assert "evil.example/bridge:1" in message
    assert kube.applied == []


@pytest.mark.parametrize(
    ("patterns", "image"),
    [
        ((), OWN),  # the operator's own image, named explicitly
        (("registry.example/bridge:*",), "registry.example/bridge:2.0"),
        (
            ("registry.example/bridge@sha256:" + "b" * 64,),
            "registry.example/bridge@sha256:" + "b" * 64,
        ),
    ],
)
async def test_an_allowed_bridge_image_runs(patterns: tuple[str, ...], image: str) -> None:
    kube = FakeKube()
    await reconcile_run(
        kube, agent_run(bridge={"image": image}), bridge_image=OWN, bridge_images=patterns
    )
    assert bridge_image(kube) == image


async def test_without_a_bridge_image_the_operators_own_runs() -> None:
    kube = FakeKube()
    await reconcile_run(kube, agent_run(), bridge_image=OWN, bridge_images=("x/*",))
    assert bridge_image(kube) == OWN


async def test_a_glob_for_one_repository_does_not_allow_another() -> None:
    kube = FakeKube()
    run = agent_run(bridge={"image": "registry.example/other:2.0"})
    done = await reconcile_run(kube, run, bridge_images=("registry.example/bridge:*",))
    assert condition(done.patch, "Ready")[1] == "BridgeImageNotAllowed"


COMPILED = "registry.example/mcp-dataplane:1.2.3@sha256:" + "c" * 64


async def test_with_the_compiled_data_plane_named_a_run_gets_its_bridge() -> None:
    kube = FakeKube()
    await reconcile_run(kube, agent_run(), bridge_image=OWN, dataplane_image=COMPILED)
    assert bridge_image(kube) == COMPILED
    pod = kube.objects[("pods", "ns", "app")]
    (sidecar,) = pod["spec"]["initContainers"]
    assert sidecar["args"][0] == "bridge"  # the same arguments run either program
    assert not any(e["name"].startswith("OTEL_") for e in sidecar["env"])


async def test_a_run_that_asks_for_traces_keeps_the_python_bridge() -> None:
    """The compiled bridge exports no traces yet: a run with spec.bridge.tracing would lose
    them silently."""
    kube = FakeKube()
    run = agent_run(bridge={"tracing": {"endpoint": "http://collector.obs:4318"}})
    await reconcile_run(kube, run, bridge_image=OWN, dataplane_image=COMPILED)
    assert bridge_image(kube) == OWN


@pytest.mark.parametrize("named", [OWN, COMPILED])
async def test_a_run_may_name_either_of_the_operators_images(named: str) -> None:
    kube = FakeKube()
    run = agent_run(bridge={"image": named})
    await reconcile_run(kube, run, bridge_image=OWN, dataplane_image=COMPILED)
    assert bridge_image(kube) == named


async def test_naming_the_data_plane_lets_no_other_image_in() -> None:
    """A tenant's attempt: with the compiled data plane named, an image that merely looks
    like it (another tag, another registry) is still refused, and nothing is applied."""
    for image in (
        "registry.example/mcp-dataplane:9.9.9",
        "evil.example/mcp-dataplane:1.2.3@sha256:" + "c" * 64,
    ):
        kube = FakeKube()
        run = agent_run(bridge={"image": image})
        done = await reconcile_run(kube, run, bridge_image=OWN, dataplane_image=COMPILED)
        assert condition(done.patch, "Ready")[1] == "BridgeImageNotAllowed"
        assert kube.applied == []
