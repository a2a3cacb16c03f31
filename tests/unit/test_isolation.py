"""The ``Isolation`` condition of a managed MCPServer: who besides bridges holds a key to it.

Pure (``controller.mcpserver.isolation``): the server and the bridge-key policy the operator
found at start in, the condition out; and that the status patch carries it next to the
others without touching ``Ready``.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_operator.api import MCPServer
from mcp_operator.controller.mcpserver.isolation import condition
from mcp_operator.controller.mcpserver.status import Outcome, status_patch


def server(**spec: Any) -> MCPServer:
    body = {
        "metadata": {"name": "tools", "namespace": "team"},
        "spec": {"mode": "managed", "deployment": {"image": "x/tools:1"}, **spec},
    }
    return MCPServer.model_validate(body)


def test_a_server_guarded_by_the_bridge_key_policy_is_isolated() -> None:
    found = condition(server(), "mcpo-bridge-keys")
    assert found is not None
    assert (found.type, found.status, found.reason) == ("Isolation", "True", "BridgeOnly")
    assert "mcpo-bridge-keys" in found.message


def test_without_the_policy_the_condition_says_who_can_go_around_the_bridge() -> None:
    found = condition(server(access={"namespaces": ["apps"]}), None)
    assert found is not None
    assert (found.status, found.reason) == ("False", "BridgeKeysUnguarded")
    assert "create Pods in apps, team" in found.message
    assert "serviceaccounts/token" in found.message and "exec" in found.message
    everyone = condition(server(access={"namespaces": ["*"]}), None)
    assert everyone is not None and "create Pods in any namespace can" in everyone.message


def test_servers_that_take_other_callers_by_design_say_so() -> None:
    none = condition(server(access={"authentication": "none"}, transport="stdio"), "p")
    assert none is not None and (none.status, none.reason) == ("False", "Unauthenticated")
    oidc = server(
        access={
            "authentication": "oidc",
            "oidc": {"issuer": "https://id.example", "audience": "https://tools.example/mcp"},
        }
    )
    found = condition(oidc, "p")
    assert found is not None and (found.status, found.reason) == ("False", "ExternalCallers")


def test_an_external_server_has_no_isolation_condition() -> None:
    external = MCPServer.model_validate(
        {
            "metadata": {"name": "x", "namespace": "team"},
            "spec": {"mode": "external", "url": "https://x.example/mcp"},
        }
    )
    assert condition(external, "p") is None


def test_the_status_carries_the_condition_and_ready_does_not_depend_on_it() -> None:
    isolation = condition(server(), None)
    outcome = Outcome("not-probed", isolation=isolation)
    patch = status_patch(None, outcome, generation=1, url=None, now="2026-12-07T00:00:00Z")
    by_type = {c["type"]: c for c in patch["conditions"]}
    assert by_type["Isolation"]["reason"] == "BridgeKeysUnguarded"
    assert by_type["Ready"]["status"] == "True"


def test_the_scrapers_flag_takes_namespace_slash_name_only() -> None:
    from mcp_operator.commands.run_network import scraper_list

    assert scraper_list(" monitoring/prometheus,ops/vm ,monitoring/prometheus") == (
        "monitoring/prometheus",
        "ops/vm",
    )
    assert scraper_list("") == ()
    for bad in ("prometheus", "a/b/c", "system:serviceaccount:a:b", "/x"):
        with pytest.raises(SystemExit, match="must be NAMESPACE/NAME"):
            scraper_list(bad)


def test_the_metrics_file_lists_the_scrapers_by_username_and_nothing_else() -> None:
    from mcp_operator.controller.render import metrics_access

    body = metrics_access("https://issuer", {"keys": []}, ["monitoring/prometheus"])
    assert body == {
        "audience": "metrics.mcp-operator.dev",
        "issuer": "https://issuer",
        "jwks": {"keys": []},
        "allow": {
            "namespaces": [],
            "operators": ["system:serviceaccount:monitoring:prometheus"],
        },
    }
    assert "issuer" not in metrics_access(None, None, [])
