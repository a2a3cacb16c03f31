"""The compiled bridge (``mcp-dataplane bridge``) held to ``test_bridge_catalog.py``'s
assertions: prompts and resources of two servers through one bridge, unchanged tests of the
home module run against the binary (the ``compiled_bridge`` fixture swaps the program). Its
subscription and capabilities tests run in ``test_dataplane_bridge_logs.py``.
"""

from __future__ import annotations

import pytest

from tests.protocol import test_bridge_catalog
from tests.protocol.test_bridge_catalog import (
    bridge,
    test_completion_is_routed_by_prompt_name_and_by_template,
    test_one_listing_holds_both_servers_and_a_forged_cursor_is_invalid_params,
    test_prompts_of_both_servers_are_listed_under_their_prefixes_and_got_from_them,
    test_resources_and_templates_are_namespaced_read_from_their_server_and_filtered,
    upstreams,
)

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("compiled_bridge")]

__all__ = [
    "bridge",
    "test_a_servers_new_prompt_is_announced_to_the_agent_and_listed",
    "test_completion_is_routed_by_prompt_name_and_by_template",
    "test_one_listing_holds_both_servers_and_a_forged_cursor_is_invalid_params",
    "test_prompts_of_both_servers_are_listed_under_their_prefixes_and_got_from_them",
    "test_resources_and_templates_are_namespaced_read_from_their_server_and_filtered",
    "upstreams",
]

# Collected last, as in the home module: it adds a prompt to server A, which the listings
# above must not see yet.
test_a_servers_new_prompt_is_announced_to_the_agent_and_listed = (
    test_bridge_catalog.test_a_servers_new_prompt_is_announced_to_the_agent_and_listed
)
