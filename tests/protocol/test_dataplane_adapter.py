"""The compiled adapter (``mcp-dataplane adapter``) held to the Python adapter's assertions.

The data plane moves to Rust (``operator/dataplane``); until the port is whole, the
operator's Pods keep running the Python adapter, and this module runs the black-box tests
that the compiled one passes, unchanged: each test below is the same function as in its
home module, started against ``tests.support.dataplane``'s binary instead (the autouse
fixture swaps the program ``test_adapter.adapter`` starts). A test of the home modules that
is not listed here is not served by the compiled adapter yet; docs/adapter.md ("The
compiled adapter") says which features those are.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.protocol import (
    test_adapter,
    test_metrics_access,
)
from tests.protocol.test_adapter import (
    everything,
    test_a_child_that_never_answers_the_handshake_is_never_ready,
    test_a_killed_child_fails_calls_promptly_and_health_recovers,
    test_fifty_sessions_times_twenty_calls_get_exactly_their_own_answers,
    test_progress_reaches_the_caller_that_asked_for_it,
    test_sessions_answer_404_when_unknown_and_end_with_delete,
    test_sigterm_stops_the_adapter_and_leaves_no_child,
    test_stdout_lines_that_are_not_json_are_logged_and_dropped,
    test_the_2026_era_is_stateless_and_checks_its_headers,
    test_the_inspector_cli_lists_and_calls_tools_through_the_adapter,
    test_the_sdk_client_calls_mcp_server_time_in_both_eras,
    test_the_sdk_client_lists_and_calls_server_everything_in_both_eras,
    test_wrong_host_is_421_bad_origin_is_403_and_allowed_names_pass,
)
from tests.protocol.test_adapter_attribution import (
    late,
    test_session_b_receives_nothing_of_session_a,
    test_the_only_session_gets_its_own_late_messages,
)
from tests.protocol.test_adapter_auth import (
    counted,
    test_a_client_gone_mid_stream_closes_the_upstream_connection,
    test_a_permitted_caller_is_served_in_both_eras_and_logged_once_without_its_token,
    test_a_revoked_pod_is_refused_once_the_file_changes_and_a_bad_update_is_survived,
    test_refused_requests_never_reach_the_child_in_either_era,
    test_the_audit_names_the_verified_caller_tool_and_outcome_never_the_arguments,
    test_the_front_refuses_before_the_upstream_and_never_passes_a_token_on,
    test_the_front_streams_an_event_before_the_upstream_has_finished,
    test_the_front_takes_only_a_loopback_upstream,
    test_the_sdk_client_through_the_front_speaks_2026_with_mcp_server_time,
    test_the_sdk_client_through_the_front_streams_from_server_everything_over_http,
    test_the_sdk_client_with_a_token_calls_server_everything_in_both_eras,
    test_without_an_access_configuration_the_adapter_refuses_to_start,
)
from tests.protocol.test_adapter_bounds import (
    bounds_server,
    test_a_client_that_sends_its_headers_or_body_too_slowly_is_disconnected,
    test_a_flood_of_initializes_evicts_idle_sessions_instead_of_locking_clients_out,
    test_a_hundred_concurrent_megabyte_calls_leave_the_adapter_within_its_limit,
    test_an_answer_over_the_line_limit_fails_its_call_at_once_and_logs_no_content,
    test_concurrent_2026_calls_with_a_megabyte_of_capabilities_keep_none_of_it,
    test_large_calls_beyond_the_byte_budget_get_503_with_retry_after_then_pass,
    test_listening_on_all_addresses_takes_ipv4_and_ipv6,
    test_readyz_is_red_while_every_session_is_busy_and_new_clients_get_503,
    test_thirty_initializes_with_a_megabyte_of_capabilities_each_leave_the_adapter_small,
)
from tests.protocol.test_adapter_fairness import (
    callers,
    test_held_streams_of_one_caller_do_not_stop_another_callers_initialize,
    test_one_callers_initializes_do_not_evict_another_callers_idle_session,
)
from tests.protocol.test_adapter_fifo import (
    adapter,
    test_fifo_mode_and_a_command_are_exclusive,
    test_the_adapter_serves_a_server_in_another_process_and_survives_its_restart,
)
from tests.protocol.test_adapter_isolation import (
    conformance,
    test_a_2026_round_names_its_questions_and_refuses_altered_state,
    test_a_sampling_tool_and_an_elicitation_tool_complete_in_each_era,
    test_an_undeclared_capability_is_refused_with_32021_and_400,
    test_concurrent_callers_in_both_eras_each_get_only_their_own_requests,
    test_four_legacy_sessions_sampling_at_once_never_see_each_others_prompts,
    test_methods_the_2026_revision_removed_answer_404_32601,
)
from tests.protocol.test_adapter_metrics import (
    test_calls_sessions_and_child_restarts_are_counted,
)
from tests.protocol.test_adapter_modern import (
    test_a_listen_stream_is_acknowledged_then_carries_only_what_it_asked_for,
    test_calls_waiting_for_input_are_bounded_in_count_and_time,
    test_logs_reach_a_2026_caller_only_when_its_request_set_a_level,
    test_param_headers_must_agree_with_the_arguments,
)
from tests.protocol.test_adapter_per_session import (
    pooled,
    spawn_helper,
    test_a_2026_caller_asking_for_roots_gets_its_own_not_an_earlier_callers,
    test_a_2026_caller_that_disconnects_mid_call_has_its_child_reaped,
    test_a_child_that_hangs_on_spawn_is_killed_at_the_timeout,
    test_a_client_opening_sessions_without_end_is_bounded_and_others_keep_working,
    test_an_idle_sessions_child_is_reaped_and_the_session_then_gets_404,
    test_caller_names_do_not_buy_one_address_more_than_its_share,
    test_in_a_managed_pod_the_spawn_helper_gives_each_session_its_own_server,
    test_twelve_concurrent_sampling_calls_of_four_sessions_get_their_own_answers,
)
from tests.protocol.test_metrics_access import guarded_adapter
from tests.support import dataplane, needs

pytestmark = pytest.mark.timeout(180)

# The fixtures and the tests of the home modules that run here again (pytest collects them).
__all__ = [
    "adapter",
    "bounds_server",
    "callers",
    "conformance",
    "counted",
    "everything",
    "guarded_adapter",
    "late",
    "pooled",
    "spawn_helper",
    "test_a_2026_caller_asking_for_roots_gets_its_own_not_an_earlier_callers",
    "test_a_2026_caller_that_disconnects_mid_call_has_its_child_reaped",
    "test_a_2026_round_names_its_questions_and_refuses_altered_state",
    "test_a_child_that_hangs_on_spawn_is_killed_at_the_timeout",
    "test_a_child_that_never_answers_the_handshake_is_never_ready",
    "test_a_client_gone_mid_stream_closes_the_upstream_connection",
    "test_a_client_opening_sessions_without_end_is_bounded_and_others_keep_working",
    "test_a_client_that_sends_its_headers_or_body_too_slowly_is_disconnected",
    "test_a_flood_of_initializes_evicts_idle_sessions_instead_of_locking_clients_out",
    "test_a_hundred_concurrent_megabyte_calls_leave_the_adapter_within_its_limit",
    "test_a_killed_child_fails_calls_promptly_and_health_recovers",
    "test_a_listen_stream_is_acknowledged_then_carries_only_what_it_asked_for",
    "test_a_permitted_caller_is_served_in_both_eras_and_logged_once_without_its_token",
    "test_a_revoked_pod_is_refused_once_the_file_changes_and_a_bad_update_is_survived",
    "test_a_sampling_tool_and_an_elicitation_tool_complete_in_each_era",
    "test_an_answer_over_the_line_limit_fails_its_call_at_once_and_logs_no_content",
    "test_an_idle_sessions_child_is_reaped_and_the_session_then_gets_404",
    "test_an_undeclared_capability_is_refused_with_32021_and_400",
    "test_caller_names_do_not_buy_one_address_more_than_its_share",
    "test_calls_sessions_and_child_restarts_are_counted",
    "test_calls_waiting_for_input_are_bounded_in_count_and_time",
    "test_concurrent_2026_calls_with_a_megabyte_of_capabilities_keep_none_of_it",
    "test_concurrent_callers_in_both_eras_each_get_only_their_own_requests",
    "test_fifo_mode_and_a_command_are_exclusive",
    "test_fifty_sessions_times_twenty_calls_get_exactly_their_own_answers",
    "test_four_legacy_sessions_sampling_at_once_never_see_each_others_prompts",
    "test_held_streams_of_one_caller_do_not_stop_another_callers_initialize",
    "test_in_a_managed_pod_the_spawn_helper_gives_each_session_its_own_server",
    "test_large_calls_beyond_the_byte_budget_get_503_with_retry_after_then_pass",
    "test_listening_on_all_addresses_takes_ipv4_and_ipv6",
    "test_logs_reach_a_2026_caller_only_when_its_request_set_a_level",
    "test_methods_the_2026_revision_removed_answer_404_32601",
    "test_one_callers_initializes_do_not_evict_another_callers_idle_session",
    "test_param_headers_must_agree_with_the_arguments",
    "test_progress_reaches_the_caller_that_asked_for_it",
    "test_readyz_is_red_while_every_session_is_busy_and_new_clients_get_503",
    "test_refused_requests_never_reach_the_child_in_either_era",
    "test_session_b_receives_nothing_of_session_a",
    "test_sessions_answer_404_when_unknown_and_end_with_delete",
    "test_sigterm_stops_the_adapter_and_leaves_no_child",
    "test_stdout_lines_that_are_not_json_are_logged_and_dropped",
    "test_the_2026_era_is_stateless_and_checks_its_headers",
    "test_the_adapter_serves_a_server_in_another_process_and_survives_its_restart",
    "test_the_audit_names_the_verified_caller_tool_and_outcome_never_the_arguments",
    "test_the_front_refuses_before_the_upstream_and_never_passes_a_token_on",
    "test_the_front_streams_an_event_before_the_upstream_has_finished",
    "test_the_front_takes_only_a_loopback_upstream",
    "test_the_inspector_cli_lists_and_calls_tools_through_the_adapter",
    "test_the_only_session_gets_its_own_late_messages",
    "test_the_sdk_client_calls_mcp_server_time_in_both_eras",
    "test_the_sdk_client_lists_and_calls_server_everything_in_both_eras",
    "test_the_sdk_client_through_the_front_speaks_2026_with_mcp_server_time",
    "test_the_sdk_client_through_the_front_streams_from_server_everything_over_http",
    "test_the_sdk_client_with_a_token_calls_server_everything_in_both_eras",
    "test_thirty_initializes_with_a_megabyte_of_capabilities_each_leave_the_adapter_small",
    "test_twelve_concurrent_sampling_calls_of_four_sessions_get_their_own_answers",
    "test_without_an_access_configuration_the_adapter_refuses_to_start",
    "test_wrong_host_is_421_bad_origin_is_403_and_allowed_names_pass",
]


@pytest.fixture(autouse=True)
def compiled_adapter(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every adapter these tests start is the compiled one."""
    needs.require(dataplane.missing())
    monkeypatch.setattr(test_adapter, "PROGRAM", dataplane.adapter_command())
    yield


def test_the_adapters_metrics_answer_only_the_listed_scraper(
    guarded_adapter: tuple[str, bool],
) -> None:
    """Every mode: one child, a child per session, front."""
    test_metrics_access.test_the_adapters_metrics_answer_only_the_listed_scraper(guarded_adapter)
