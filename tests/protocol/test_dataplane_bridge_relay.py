"""The compiled bridge (``mcp-dataplane bridge``) held to the Python bridge's relay tests.

Server→client requests (sampling, elicitation, roots), progress and cancellation through the
bridge in both eras: each test below is the same function as in ``test_bridge_relay.py``,
started against ``tests.support.dataplane``'s binary instead (the autouse fixture swaps the
program ``tests.support.bridge_run.run_bridge`` starts, as ``test_dataplane_bridge.py``
does). A test of the home module that is not listed here is not served by the compiled
bridge yet.
"""

from __future__ import annotations

import pytest

from tests.protocol import test_bridge_relay as home
from tests.support import needs

pytestmark = [
    pytest.mark.timeout(180),
    needs.mark(needs.node_missing()),
    pytest.mark.usefixtures("compiled_bridge"),
]

# The fixtures and the tests of the home module that run here again (pytest collects them),
# bound in the home module's order: pytest runs a module's tests in the order their names
# were bound, and these share one bridge whose audit trail the first one reads.
upstreams = home.upstreams
managed_url = home.managed_url
bridge = home.bridge
asking_prompt_bridge = home.asking_prompt_bridge
test_sampling_elicitation_and_roots_of_every_upstream_reach_the_agent_and_back = (
    home.test_sampling_elicitation_and_roots_of_every_upstream_reach_the_agent_and_back
)
test_concurrent_agents_of_both_eras_each_get_only_their_own_questions = (
    home.test_concurrent_agents_of_both_eras_each_get_only_their_own_questions
)
test_a_capability_a_legacy_agent_did_not_declare_is_refused_upstream_and_never_sent = (
    home.test_a_capability_a_legacy_agent_did_not_declare_is_refused_upstream_and_never_sent
)
test_a_capability_a_2026_agent_did_not_declare_never_becomes_a_round = (
    home.test_a_capability_a_2026_agent_did_not_declare_never_becomes_a_round
)
test_progress_reaches_each_agent_with_its_own_token_and_upstreams_see_the_bridges = (
    home.test_progress_reaches_each_agent_with_its_own_token_and_upstreams_see_the_bridges
)
test_an_sdk_agent_gets_progress_from_upstreams_of_both_eras = (
    home.test_an_sdk_agent_gets_progress_from_upstreams_of_both_eras
)
test_a_cancelled_call_stops_its_upstream_and_is_audited_cancelled = (
    home.test_a_cancelled_call_stops_its_upstream_and_is_audited_cancelled
)
test_a_flood_of_requests_is_bounded_and_stalls_no_one = (
    home.test_a_flood_of_requests_is_bounded_and_stalls_no_one
)
test_a_request_about_a_call_that_ended_reaches_no_agent = (
    home.test_a_request_about_a_call_that_ended_reaches_no_agent
)
test_another_session_can_neither_answer_nor_cancel_a_sessions_call = (
    home.test_another_session_can_neither_answer_nor_cancel_a_sessions_call
)
test_a_2026_retry_with_a_state_it_was_not_given_is_refused = (
    home.test_a_2026_retry_with_a_state_it_was_not_given_is_refused
)
test_a_legacy_agent_without_sse_on_its_post_is_asked_on_its_get_stream = (
    home.test_a_legacy_agent_without_sse_on_its_post_is_asked_on_its_get_stream
)
test_a_prompt_whose_server_asks_the_agent_is_relayed_in_both_eras = (
    home.test_a_prompt_whose_server_asks_the_agent_is_relayed_in_both_eras
)
