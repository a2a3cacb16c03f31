"""The compiled bridge (``mcp-dataplane bridge``) held to the Python bridge's assertions.

The data plane moves to Rust (``operator/dataplane``); until the port is whole, the
operator's Pods keep running the Python bridge, and this module runs the black-box tests
that the compiled one passes, unchanged: each test below is the same function as in its
home module, started against ``tests.support.dataplane``'s binary instead (the autouse
fixture swaps the program ``tests.support.bridge_run.run_bridge`` starts). A test of the
home module that is not listed here is not served by the compiled bridge yet
(``test_dataplane_bridge_catalog.py`` holds those of ``test_bridge_catalog.py``, whose
``bridge`` fixture is another).
"""

from __future__ import annotations

import pytest

from tests.protocol.test_bridge import (
    bridge,
    counted,
    managed_url,
    test_a_2026_upstreams_list_changed_reaches_the_agent_through_its_listen_stream,
    test_a_dead_upstream_leaves_the_others_working_and_its_return_is_noticed,
    test_a_denied_tool_and_invalid_arguments_fail_with_hints_before_the_upstream,
    test_a_server_down_at_start_does_not_hold_readiness_and_joins_when_it_comes_up,
    test_an_upstreams_list_changed_reaches_the_agent_with_the_new_tools,
    test_every_audit_line_is_json_and_carries_no_argument_value,
    test_health_and_metrics_report_the_calls,
    test_legacy_sessions_are_the_bridges_own,
    test_results_relayed_from_a_2026_upstream_are_the_bridges_own_in_both_eras,
    test_sigterm_ends_the_bridge_cleanly,
    test_the_2026_era_is_stateless_and_checks_its_envelope,
    test_the_inspector_cli_lists_and_calls_tools_through_the_bridge,
    test_the_sdk_client_lists_and_calls_the_prefixed_tools_of_upstreams_of_both_eras,
)
from tests.protocol.test_bridge_failures import (
    scripted,
    test_a_call_the_upstream_read_before_dropping_the_connection_is_sent_once,
    test_a_json_rpc_error_reaches_the_agent_with_the_upstreams_code,
)
from tests.protocol.test_bridge_fairness import (
    test_one_caller_filling_the_table_does_not_keep_another_caller_out,
)
from tests.protocol.test_bridge_hardening import (
    echoing,
    secret_file,
    test_a_header_value_with_cr_lf_fails_that_one_server_and_the_others_keep_working,
    test_a_listing_refused_in_words_that_quote_the_credential_is_logged_masked,
    test_an_unreadable_header_file_fails_that_one_server_and_the_others_keep_working,
    test_an_upstream_that_echoes_the_credential_never_shows_it_to_the_agent_or_the_audit,
)
from tests.protocol.test_metrics_access import (
    test_a_process_run_by_hand_without_the_flag_serves_metrics_to_anyone,
    test_the_bridges_metrics_answer_only_the_listed_scraper,
    test_without_the_issuers_keys_every_scrape_is_refused,
)
from tests.support import needs
from tests.support.bridge_run import run_bridge, server_entry

pytestmark = [
    pytest.mark.timeout(180),
    needs.mark(needs.node_missing()),
    pytest.mark.usefixtures("compiled_bridge"),
]

# The fixtures and the tests of the home module that run here again (pytest collects them).
__all__ = [
    "bridge",
    "counted",
    "echoing",
    "managed_url",
    "scripted",
    "secret_file",
    "test_a_2026_upstreams_list_changed_reaches_the_agent_through_its_listen_stream",
    "test_a_call_the_upstream_read_before_dropping_the_connection_is_sent_once",
    "test_a_dead_upstream_leaves_the_others_working_and_its_return_is_noticed",
    "test_a_denied_tool_and_invalid_arguments_fail_with_hints_before_the_upstream",
    "test_a_header_value_with_cr_lf_fails_that_one_server_and_the_others_keep_working",
    "test_a_json_rpc_error_reaches_the_agent_with_the_upstreams_code",
    "test_a_listing_refused_in_words_that_quote_the_credential_is_logged_masked",
    "test_a_process_run_by_hand_without_the_flag_serves_metrics_to_anyone",
    "test_a_server_down_at_start_does_not_hold_readiness_and_joins_when_it_comes_up",
    "test_an_unreadable_header_file_fails_that_one_server_and_the_others_keep_working",
    "test_an_upstream_that_echoes_the_credential_never_shows_it_to_the_agent_or_the_audit",
    "test_an_upstreams_list_changed_reaches_the_agent_with_the_new_tools",
    "test_every_audit_line_is_json_and_carries_no_argument_value",
    "test_health_and_metrics_report_the_calls",
    "test_legacy_sessions_are_the_bridges_own",
    "test_one_caller_filling_the_table_does_not_keep_another_caller_out",
    "test_results_relayed_from_a_2026_upstream_are_the_bridges_own_in_both_eras",
    "test_sigterm_ends_the_bridge_cleanly",
    "test_the_2026_era_is_stateless_and_checks_its_envelope",
    "test_the_bridges_metrics_answer_only_the_listed_scraper",
    "test_the_inspector_cli_lists_and_calls_tools_through_the_bridge",
    "test_the_sdk_client_lists_and_calls_the_prefixed_tools_of_upstreams_of_both_eras",
    "test_without_the_issuers_keys_every_scrape_is_refused",
]


def test_traces_asked_of_the_compiled_bridge_are_said_to_be_missing(everything_url: str) -> None:
    """The compiled bridge exports no traces yet: asked for them (the operator renders the
    Python bridge for such runs, but a run may name this image), it says so at start, and
    never prints the endpoint (a URL may carry credentials)."""
    endpoint = "http://user:s3cret@collector.example:4318"
    with run_bridge([server_entry("ev", everything_url)]) as quiet:
        assert "exports none yet" not in quiet.log()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}
    with run_bridge([server_entry("ev", everything_url)], env=env) as asked:
        log = asked.log()
    assert "Traces were asked for" in log and "exports none yet" in log, log
    assert "s3cret" not in log
