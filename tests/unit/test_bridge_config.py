"""The bridge configuration file: defaults, strictness, errors naming the field, round-trips,
filter layers and policy tightening (mcp_operator.api.bridge, bridge_filters, bridge_policy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from mcp_operator.api import bridge, bridge_filters, bridge_policy
from mcp_operator.api.bridge import (
    BridgeConfig,
    BridgeConfigError,
    Header,
    dump_bridge_config,
    load_bridge_config,
    parse_bridge_config,
)
from mcp_operator.api.bridge_filters import FilterLayer, tool_allowed
from mcp_operator.api.bridge_policy import (
    CallPolicy,
    CallPolicyOverride,
    RetryPolicy,
    stricter_pii,
    tighten,
)
from mcp_operator.api.common import ConfigModel


def server(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "github",
        "namespace": "tools",
        "url": "http://github.tools.svc.cluster.local:8080/mcp",
        "prefix": "github",
    }
    return body | overrides


def config(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "mcp-operator.dev/v1alpha1",
        "kind": "BridgeConfig",
        "run": {"name": "triage", "namespace": "agents"},
        "servers": [server()],
    }
    return body | overrides


def test_a_minimal_file_gets_the_documented_defaults() -> None:
    parsed = BridgeConfig.model_validate(config())
    assert (parsed.listen.host, parsed.listen.port, parsed.listen.path) == (
        "127.0.0.1",
        7800,
        "/mcp",
    )
    assert parsed.audit.stdout is True and parsed.audit.file is None
    only = parsed.servers[0]
    assert only.transport == "streamable-http"
    assert only.filters == [] and only.headers == []
    policy = only.policy
    assert (policy.pii.arguments, policy.pii.results) == ("off", "off")
    assert (policy.retry.max_attempts, policy.retry.initial_backoff_ms) == (3, 100)
    assert policy.retry.max_backoff_ms == 2000
    assert policy.timeout_seconds == 30
    assert (policy.circuit_breaker.failure_threshold, policy.circuit_breaker.open_seconds) == (
        5,
        30,
    )


def test_every_field_is_documented() -> None:
    models = [
        value
        for module in (bridge, bridge_filters, bridge_policy)
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, ConfigModel) and value is not ConfigModel
    ]
    assert {BridgeConfig, CallPolicyOverride, FilterLayer} <= set(models)
    for model in models:
        undocumented = [n for n, f in model.model_fields.items() if not f.description]
        assert not undocumented, f"{model.__name__}: {undocumented}"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (config(extra=1), "extra"),
        (config(kind="ConfigMap"), "kind"),
        (config(apiVersion="v1"), "apiVersion"),
        (config(servers=[server(url="ftp://x")]), "servers[0].url"),
        (config(servers=[server(transport="stdio")]), "servers[0].transport"),
        (config(servers=[server(prefix="Git")]), "servers[0].prefix"),
        (config(servers=[server(unknown=True)]), "servers[0].unknown"),
        (config(servers=[server(filters=[{"allow": ["a[b]"]}])]), "servers[0].filters[0].allow[0]"),
        (
            config(servers=[server(policy={"retry": {"maxAttempts": 6}})]),
            "servers[0].policy.retry.maxAttempts",
        ),
        (
            config(servers=[server(policy={"pii": {"arguments": "shout"}})]),
            "servers[0].policy.pii.arguments",
        ),
        (config(servers=[server(headers=[{"name": "X-Key"}])]), "servers[0].headers[0]"),
        (
            config(servers=[server(headers=[{"name": "A", "valueFile": "relative/path"}])]),
            "servers[0].headers[0].valueFile",
        ),
        (config(listen={"port": 80}), "listen.port"),
    ],
)
def test_an_invalid_file_is_refused_with_the_field_named(body: dict[str, Any], field: str) -> None:
    import yaml

    with pytest.raises(BridgeConfigError) as caught:
        parse_bridge_config(yaml.safe_dump(body), "cfg.yaml")
    assert str(caught.value).startswith("cfg.yaml: ")
    assert f"{field}:" in str(caught.value)


def test_two_servers_may_share_a_prefix_since_collisions_are_found_per_tool_name() -> None:
    body = config(servers=[server(), server(name="other")])
    assert len(BridgeConfig.model_validate(body).servers) == 2


def test_header_names_must_be_unique_ignoring_case() -> None:
    headers = [{"name": "X-Key", "value": "a"}, {"name": "x-key", "valueFile": "/secrets/k"}]
    with pytest.raises(ValidationError, match="header names"):
        BridgeConfig.model_validate(config(servers=[server(headers=headers)]))


def test_a_header_takes_a_value_or_a_file_never_both() -> None:
    assert Header(name="X-Key", value_file="/var/run/secrets/key").value is None
    with pytest.raises(ValidationError, match="exactly one of value or valueFile"):
        Header(name="X-Key", value="a", value_file="/x/y")


def test_retry_backoff_bounds_must_be_ordered() -> None:
    with pytest.raises(ValidationError, match="initialBackoffMs"):
        RetryPolicy(initial_backoff_ms=500, max_backoff_ms=100)


def test_a_missing_file_and_a_non_mapping_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(BridgeConfigError, match="cannot be read"):
        load_bridge_config(tmp_path / "absent.yaml")
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    with pytest.raises(BridgeConfigError, match="must be a mapping"):
        load_bridge_config(listed)
    broken = tmp_path / "broken.yaml"
    broken.write_text("run: [unclosed\n")
    with pytest.raises(BridgeConfigError, match="not valid YAML or JSON"):
        load_bridge_config(broken)


def test_a_full_file_round_trips_through_dump_and_load(tmp_path: Path) -> None:
    body = config(
        listen={"host": "127.0.0.1", "port": 7801, "path": "/agent/mcp"},
        audit={"stdout": False, "file": "/var/log/bridge/audit.jsonl"},
        servers=[
            server(
                transport="sse",
                protocolVersion="2025-06-18",
                filters=[{"allow": ["get_*"], "deny": ["get_secret"]}, {"deny": ["*_admin"]}],
                headers=[
                    {"name": "X-Tenant", "value": "blue"},
                    {"name": "Authorization", "valueFile": "/var/run/mcp/github/token"},
                ],
                policy={
                    "pii": {"arguments": "block", "results": "redact"},
                    "retry": {"maxAttempts": 2, "initialBackoffMs": 50, "maxBackoffMs": 400},
                    "timeoutSeconds": 12,
                    "circuitBreaker": {"failureThreshold": 3, "openSeconds": 60},
                },
            ),
            server(name="time", prefix="time", url="https://time.example.invalid/mcp"),
        ],
    )
    original = BridgeConfig.model_validate(body)
    path = tmp_path / "bridge.yaml"
    path.write_text(dump_bridge_config(original))
    loaded = load_bridge_config(path)
    assert loaded == original
    assert dump_bridge_config(loaded) == path.read_text()
    text = path.read_text()
    assert "valueFile: /var/run/mcp/github/token" in text and "timeoutSeconds: 12" in text


def test_json_is_accepted_as_well_as_yaml() -> None:
    import json

    assert parse_bridge_config(json.dumps(config())).run.name == "triage"


# filter layers


def test_a_tool_must_pass_every_filter_layer() -> None:
    layers = [FilterLayer(allow=["get_*", "list_*"]), FilterLayer(deny=["list_secrets"])]
    assert tool_allowed(layers, "get_issue")
    assert tool_allowed(layers, "list_issues")
    assert not tool_allowed(layers, "list_secrets")  # denied by the run's layer
    assert not tool_allowed(layers, "delete_repo")  # not allowed by the server's layer


def test_a_later_layer_cannot_widen_an_earlier_one() -> None:
    layers = [FilterLayer(allow=["get_*"]), FilterLayer(allow=["*"])]
    assert not tool_allowed(layers, "delete_repo")


def test_no_layers_allow_every_tool() -> None:
    assert tool_allowed([], "anything")


# tighten


def test_the_stricter_pii_mode_wins_in_either_order() -> None:
    modes = ["off", "detect", "redact", "block"]
    for i, first in enumerate(modes):
        for j, second in enumerate(modes):
            assert stricter_pii(first, second) == modes[max(i, j)]  # type: ignore[arg-type]
    assert stricter_pii("redact", None) == "redact"


def test_a_run_without_override_gets_the_server_policy() -> None:
    base = CallPolicy.model_validate({"timeoutSeconds": 90, "pii": {"results": "detect"}})
    assert tighten(base, None) == base
    assert tighten(base, CallPolicyOverride()) == base


def test_a_run_may_tighten_but_never_loosen() -> None:
    base = CallPolicy.model_validate(
        {
            "pii": {"arguments": "redact", "results": "detect"},
            "retry": {"maxAttempts": 3, "initialBackoffMs": 100, "maxBackoffMs": 2000},
            "timeoutSeconds": 30,
            "circuitBreaker": {"failureThreshold": 5, "openSeconds": 30},
        }
    )
    looser = CallPolicyOverride.model_validate(
        {
            "pii": {"arguments": "off", "results": "off"},
            "retry": {"maxAttempts": 5, "initialBackoffMs": 10, "maxBackoffMs": 100},
            "timeoutSeconds": 300,
            "circuitBreaker": {"failureThreshold": 50, "openSeconds": 1},
        }
    )
    assert tighten(base, looser) == base
    stricter = CallPolicyOverride.model_validate(
        {
            "pii": {"arguments": "block", "results": "redact"},
            "retry": {"maxAttempts": 1, "initialBackoffMs": 500, "maxBackoffMs": 5000},
            "timeoutSeconds": 5,
            "circuitBreaker": {"failureThreshold": 2, "openSeconds": 120},
        }
    )
    effective = tighten(base, stricter)
    assert (effective.pii.arguments, effective.pii.results) == ("block", "redact")
    assert effective.retry.max_attempts == 1
    assert (effective.retry.initial_backoff_ms, effective.retry.max_backoff_ms) == (500, 5000)
    assert effective.timeout_seconds == 5
    assert effective.circuit_breaker.failure_threshold == 2
    assert effective.circuit_breaker.open_seconds == 120


def test_tighten_mixes_field_by_field_and_leaves_its_inputs_alone() -> None:
    base = CallPolicy()
    run = CallPolicyOverride.model_validate({"timeoutSeconds": 10, "pii": {"results": "block"}})
    effective = tighten(base, run)
    assert effective.timeout_seconds == 10 and effective.pii.results == "block"
    assert effective.pii.arguments == "off" and effective.retry == base.retry
    assert base == CallPolicy()
