"""The probe against real MCP servers over real HTTP, and against a hostile one.

Expected tool names are read from each real server with a plain SDK client in
the test itself, so the expectation does not come from the code under test.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import mcp
import pytest
from mcp.client.sse import sse_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from mcp_operator.commands import probe as probe_command
from mcp_operator.controller.mcpserver import report
from mcp_operator.mcp import naming
from mcp_operator.mcp.discovery import (
    MAX_DISCOVERED_TOOLS,
    DiscoveredTool,
    Paginator,
    discover,
)
from mcp_operator.mcp.errors import ProbeError
from mcp_operator.mcp.session_wire import CLOSE_SECONDS
from mcp_operator.mcp.target import ProbeTarget
from mcp_operator.net.egress import EgressPolicy
from tests.support import peers

SECRET = "Bearer s3cr3t-token-value-42"
ON_LOOPBACK = EgressPolicy(allow_loopback=True)
"""The test servers listen on loopback, which the default egress policy refuses."""


def local(url: str, **options: Any) -> ProbeTarget:
    """A target on a loopback test server: loopback allowed, everything else as by default."""
    return ProbeTarget(url, egress=ON_LOOPBACK, **options)


MiB = 1024 * 1024


async def names_seen_by_a_plain_client(server: Any, mode: str = "auto") -> tuple[list[str], str]:
    """Tool names (every page) and protocol version, as the SDK's own client sees them."""
    async with mcp.Client(server, mode=mode) as client:
        names: list[str] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            names.extend(tool.name for tool in page.tools)
            cursor = page.next_cursor
            if cursor is None:
                return names, client.protocol_version


def select_tools(tools: list[DiscoveredTool], **selection: Any) -> report.StatusTools:
    """The naming plan bounded for status, as the reconciler builds it."""
    return report.status_tools(naming.plan(tools, **selection))


async def probe_and_select(url: str, **selection: Any) -> tuple[Any, report.StatusTools]:
    found = await discover(local(url))
    return found, select_tools(found.tools, **{"prefix": "ev", **selection})


# server-everything (legacy era, Streamable HTTP and HTTP+SSE)


async def test_server_everything_tools_are_exposed_after_allow_deny_and_prefix(
    everything_url: str,
) -> None:
    names, version = await names_seen_by_a_plain_client(everything_url)
    assert {"echo", "get-env", "get-sum"} <= set(names)  # the server we think we run
    expected = sorted(
        f"ev_{n}" for n in names if (n.startswith("get-") or n == "echo") and n != "get-env"
    )

    found, selection = await probe_and_select(
        everything_url, allow=["get-*", "echo"], deny=["get-env"]
    )

    assert [t.name for t in selection.tools] == expected
    assert selection.discovered == len(names)
    assert selection.selected == len(expected)
    assert found.protocol_version == version
    assert found.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS  # legacy era
    assert found.server_name == "mcp-servers/everything"
    fields = report.status_fields(found, selection)
    assert fields["toolCount"] == len(expected)
    assert fields["discoveredToolCount"] == len(names)
    assert fields["serverInfo"]["protocolVersion"] == version
    assert report.warnings(selection) == []


async def test_server_everything_without_filters_exposes_every_tool(everything_url: str) -> None:
    names, _ = await names_seen_by_a_plain_client(everything_url)
    _, selection = await probe_and_select(everything_url)
    assert [t.original_name for t in selection.tools] == sorted(names)
    echo = next(t for t in selection.tools if t.original_name == "echo")
    assert echo.description
    assert set(echo.annotations) <= {"title", *report.BOOLEAN_HINTS}


async def test_the_probe_keeps_each_tool_whole_with_its_input_schema(everything_url: str) -> None:
    async with mcp.Client(everything_url) as client:
        listed = (await client.list_tools()).tools  # server-everything lists on one page
    found = await discover(local(everything_url))
    kept = {t.name: t for t in found.tools}
    assert sorted(kept) == sorted(t.name for t in listed)
    for tool in listed:
        annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) or None
        assert kept[tool.name].input_schema == tool.input_schema
        assert kept[tool.name].input_schema.get("type") == "object"
        assert kept[tool.name].annotations == (annotations if tool.annotations else None)
        assert kept[tool.name].description == tool.description
        assert kept[tool.name].title == tool.title


async def test_server_everything_over_legacy_sse(everything_sse_url: str) -> None:
    names, version = await names_seen_by_a_plain_client(sse_client(everything_sse_url))
    found = await discover(local(everything_sse_url, transport="sse"))
    assert sorted(t.name for t in found.tools) == sorted(names)
    assert found.protocol_version == version


async def test_a_reprobe_sees_the_server_again(everything_url: str) -> None:
    first = await discover(local(everything_url))
    second = await discover(local(everything_url))
    assert first == second


# mcp-server-time (serves both eras; the probe negotiates the 2026 one)


async def test_mcp_server_time_is_probed_in_the_2026_era(time_url: str) -> None:
    names, version = await names_seen_by_a_plain_client(time_url)
    legacy_names, legacy_version = await names_seen_by_a_plain_client(time_url, mode="legacy")
    assert version == "2026-07-28"
    assert legacy_version in HANDSHAKE_PROTOCOL_VERSIONS  # it serves both eras

    found = await discover(local(time_url))

    assert found.protocol_version == "2026-07-28"
    assert sorted(t.name for t in found.tools) == sorted(names) == sorted(legacy_names)
    assert found.server_name == "mcp-time"
    assert found.list_changed is False


# hostile servers: every failure has its reason, on time

HOSTILE_FAILURES = [
    pytest.param("hang", [], "Timeout", id="hang"),
    pytest.param("slow", ["--delay", "5"], "Timeout", id="slow"),
    pytest.param("garbage", [], "ProtocolError", id="garbage"),
    pytest.param("many-tools", [], "TooManyTools", id="many-tools"),
    pytest.param("many-tools", ["--page-size", "10"], "TooManyPages", id="many-pages"),
    pytest.param("cursor-loop", [], "PaginationLoop", id="cursor-loop"),
    pytest.param("huge", ["--size", str(50 * MiB)], "ResponseTooLarge", id="huge-unannounced"),
    pytest.param(
        "huge",
        ["--size", str(50 * MiB), "--content-length"],
        "ResponseTooLarge",
        id="huge-announced",
    ),
    pytest.param("status", ["--status", "401"], "AuthRequired", id="http-401"),
    pytest.param("status", ["--status", "403"], "HTTPError", id="http-403"),
    pytest.param("status", ["--status", "404"], "HTTPError", id="http-404"),
    pytest.param("status", ["--status", "500"], "HTTPError", id="http-500"),
    pytest.param("status", ["--status", "503"], "HTTPError", id="http-503"),
]


@pytest.mark.parametrize(("mode", "args", "reason"), HOSTILE_FAILURES)
async def test_a_hostile_server_fails_the_probe_with_a_clear_reason_within_the_timeout(
    mode: str, args: list[str], reason: str
) -> None:
    timeout = 2.0
    with peers.hostile_server(mode, *args) as url:
        started = time.monotonic()
        with pytest.raises(ProbeError) as caught:
            await discover(local(url, timeout_seconds=timeout))
        elapsed = time.monotonic() - started
    assert caught.value.reason == reason, caught.value.message
    assert elapsed < timeout + 2
    message = caught.value.message
    assert str(caught.value) == message
    assert "\n" not in message
    assert url in message or "tools" in message or "cursor" in message or "pages" in message
    if mode == "status":
        assert f"HTTP {args[-1]}" in message


async def test_the_timeout_message_says_where_the_probe_was_stuck() -> None:
    with peers.hostile_server("hang") as url, pytest.raises(ProbeError) as caught:
        await discover(local(url, timeout_seconds=1))
    assert caught.value.message == (
        f"{url} did not complete the probe within 1s (stuck in the handshake)"
    )


async def test_an_empty_string_cursor_is_followed_to_the_next_page() -> None:
    with peers.hostile_server("empty-cursor") as url:
        found = await discover(local(url, timeout_seconds=5))
    assert [t.name for t in found.tools] == ["first_a", "first_b", "second_a", "second_b"]


async def test_invalid_and_colliding_names_become_warnings_not_failures() -> None:
    with peers.hostile_server("invalid-names") as url:
        found = await discover(local(url, timeout_seconds=5))
    selection = select_tools(found.tools, prefix="srv")
    exposed = {t.original_name: t.name for t in selection.tools}
    # a_b collides with a.b, which keeps srv_a_b: a_b is refused, never renamed (issue 17)
    assert sorted(exposed) == ["a.b", "dup", "ok_tool"]
    assert exposed["a.b"] == "srv_a_b"
    too_long = "x" * 129  # the probe keeps one character past the limit of 128, not all 200
    assert selection.invalid == sorted(["bad name!", too_long, "", "tab\tname", "ünïcode"])
    warnings = report.warnings(selection)
    assert len(warnings) == 3
    assert warnings[2].startswith("5 tools are not exposed")


async def test_a_megabyte_description_is_cut_for_status() -> None:
    with peers.hostile_server("huge", "--size", str(3 * MiB // 2)) as url:
        found = await discover(local(url, timeout_seconds=10))
    selection = select_tools(found.tools, prefix="p")
    (tool,) = report.status_fields(found, selection)["tools"]
    assert len(tool["description"]) == report.MAX_DESCRIPTION_CHARS
    assert tool["description"].endswith("…")


async def test_a_long_list_over_many_pages_is_read_whole_and_bounded_in_status() -> None:
    with peers.hostile_server("many-tools", "--tools", "1200", "--page-size", "100") as url:
        found = await discover(local(url, timeout_seconds=10))
    selection = select_tools(found.tools, prefix="p")
    fields = report.status_fields(found, selection)
    assert len(found.tools) == 1200
    assert len({t.name for t in found.tools}) == 1200
    assert fields["toolCount"] == fields["discoveredToolCount"] == 1200
    assert len(fields["tools"]) == report.MAX_STATUS_TOOLS
    assert report.warnings(selection)[-1].startswith("status.tools lists the first 256 of 1200")


async def test_a_slow_server_within_the_timeout_is_probed() -> None:
    with peers.hostile_server("slow", "--delay", "0.3") as url:
        found = await discover(local(url, timeout_seconds=5))
    assert len(found.tools) == 3


async def test_the_whole_probe_reads_at_most_32_mib() -> None:
    args = ["--page-size", "1", "--size", str(3 * MiB // 2)]
    with peers.hostile_server("many-tools", *args) as url, pytest.raises(ProbeError) as caught:
        await discover(local(url, timeout_seconds=10))
    assert caught.value.message.startswith(f"{url} sent more than 32 MiB in one probe")


# memory: a page is counted and cut on its raw JSON, before the SDK makes objects of it


PROBE_PEAK = Path(__file__).resolve().parents[1] / "support" / "probe_peak.py"


def _probe_in_a_fresh_process(url: str, *count: int) -> dict[str, Any]:
    """One status probe (or ``count`` at once) in its own process: what it found, and how much
    its RSS grew."""
    argv = [sys.executable, str(PROBE_PEAK), url, *map(str, count)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


async def test_a_page_of_rich_schemas_costs_a_few_times_its_size_not_sixty() -> None:
    # 250 tools of 90-property schemas: a 1.7 MB page, which the SDK would hold as ~70 MB.
    args = ["--tools", "250", "--page-size", "250", "--properties", "90"]
    with peers.hostile_server("many-tools", *args) as url:
        probed = _probe_in_a_fresh_process(url)
    assert probed.get("tools") == 250, probed
    assert probed["grown"] < 32 * MiB, f"RSS grew by {probed['grown'] / MiB:.0f} MiB"


async def test_a_page_of_tiny_tools_past_the_tool_bound_fails_before_the_sdk_parses_it() -> None:
    # 15,000 tools in one 1.8 MB page: counted on the raw JSON, refused at once.
    args = ["--tools", "15000", "--page-size", "15000"]
    with peers.hostile_server("many-tools", *args) as url:
        probed = _probe_in_a_fresh_process(url)
    assert probed.get("reason") == "TooManyTools", probed
    assert probed["message"] == "the server lists more than 5000 tools (15000 so far)"
    assert probed["grown"] < 32 * MiB, f"RSS grew by {probed['grown'] / MiB:.0f} MiB"


async def test_a_12_mb_page_is_refused_before_it_is_parsed() -> None:
    # The attack as found: 4,900 tools of 30-property schemas in one page of about 12 MB.
    args = ["--tools", "4900", "--page-size", "4900", "--properties", "30"]
    with peers.hostile_server("many-tools", *args) as url:
        probed = _probe_in_a_fresh_process(url)
    assert probed.get("reason") == "ResponseTooLarge", probed
    assert "larger than 2 MiB during tools/list (page 1)" in probed["message"]
    assert probed["grown"] < 32 * MiB, f"RSS grew by {probed['grown'] / MiB:.0f} MiB"


async def test_64_probes_failing_at_once_with_a_stalled_delete_stay_under_200_mib() -> None:
    # The attack as found: every probe's page fails TooManyTools at the same moment and the
    # server never answers the session's DELETE. Each probe let go of its parsed page only
    # after the DELETE's deadline: 64 pages alive at once (113 MiB to 775 MiB in the operator).
    args = ["--tools", "15000", "--page-size", "15000", "--session", "--stall-delete"]
    with peers.hostile_server("many-tools", *args, "--together", "64") as url:
        probed = _probe_in_a_fresh_process(url, 64)
    assert probed["reasons"] == {"TooManyTools": 64}, probed
    assert probed["peak"] < 200 * MiB, f"peak RSS {probed['peak'] / MiB:.0f} MiB"


async def test_a_stalled_delete_is_bounded_by_its_own_short_deadline() -> None:
    args = ["--tools", "10", "--page-size", "10", "--session", "--stall-delete"]
    with peers.hostile_server("many-tools", *args) as url:
        started = time.monotonic()
        found = await discover(local(url, timeout_seconds=30))
        took = time.monotonic() - started
    assert len(found.tools) == 10  # the tools are listed: the DELETE is no failure
    assert CLOSE_SECONDS <= took < CLOSE_SECONDS + 3, f"{took:.1f} s"


async def test_https_to_a_plain_http_server_is_a_tls_error(everything_url: str) -> None:
    url = everything_url.replace("http://", "https://")
    with pytest.raises(ProbeError) as caught:
        await discover(local(url, timeout_seconds=5))
    assert caught.value.reason == "TLSError"
    assert caught.value.message.startswith(f"could not connect to {url}: TLS handshake failed")


async def test_connection_refused_is_unreachable() -> None:
    url = f"http://127.0.0.1:{peers.free_port()}/mcp"
    started = time.monotonic()
    with pytest.raises(ProbeError) as caught:
        await discover(local(url, timeout_seconds=5))
    assert time.monotonic() - started < 2
    assert caught.value.reason == "Unreachable"
    assert caught.value.message == f"could not connect to {url}: connection refused"


async def test_a_url_that_is_not_http_is_an_invalid_target() -> None:
    with pytest.raises(ProbeError) as caught:
        await discover(ProbeTarget("ftp://example.com/mcp"))
    assert caught.value.reason == "InvalidTarget"


# headers


async def test_headers_reach_the_server_and_their_values_never_show() -> None:
    with peers.hostile_server("ok", "--require-header", f"Authorization: {SECRET}") as url:
        with_header = local(url, headers={"Authorization": SECRET}, timeout_seconds=5)
        found = await discover(with_header)
        assert [t.name for t in found.tools] == ["echo", "add", "search.docs"]

        wrong = local(url, headers={"Authorization": SECRET + "x"}, timeout_seconds=5)
        with pytest.raises(ProbeError) as caught:
            await discover(wrong)
    assert caught.value.reason == "AuthRequired"  # a 401: the server wants credentials
    assert "HTTP 401" in caught.value.message
    for text in (str(caught.value), repr(caught.value), repr(with_header), repr(wrong)):
        assert "s3cr3t" not in text
    assert "Authorization" in repr(with_header)


def test_userinfo_and_query_never_show_in_the_target_repr() -> None:
    target = ProbeTarget("https://user:pw@example.com/mcp?token=abc", headers={"X-Key": "v"})
    text = repr(target)
    assert "pw" not in text
    assert "token" not in text
    assert "example.com/mcp" in text


# pagination rules, without a server


def test_an_absent_cursor_ends_the_listing_and_an_empty_one_does_not() -> None:
    walk = Paginator()
    assert walk.advance("", 2) == ""
    assert walk.advance("next", 2) == "next"
    assert walk.advance(None, 2) is None
    assert (walk.pages, walk.tools) == (3, 6)


def test_a_cursor_seen_before_is_a_pagination_loop() -> None:
    walk = Paginator()
    walk.advance("", 1)
    with pytest.raises(ProbeError) as caught:
        walk.advance("", 1)
    assert caught.value.reason == "PaginationLoop"


def test_the_page_and_tool_bounds_fail_the_walk() -> None:
    walk = Paginator(max_pages=3)
    walk.advance("1", 0)
    walk.advance("2", 0)
    with pytest.raises(ProbeError) as pages:
        walk.advance("3", 0)
    assert pages.value.reason == "TooManyPages"
    assert Paginator(max_pages=3).advance(None, MAX_DISCOVERED_TOOLS) is None
    with pytest.raises(ProbeError) as tools:
        Paginator().advance(None, MAX_DISCOVERED_TOOLS + 1)
    assert tools.value.reason == "TooManyTools"


# the command line


def run_cli(*argv: str) -> int:
    """The command with loopback allowed (where the test servers are), unless argv says."""
    parser = argparse.ArgumentParser()
    probe_command.add_arguments(parser)
    if not any(arg.startswith("--loopback-destinations") for arg in argv):
        argv = (*argv, "--loopback-destinations=allowed")
    return probe_command.run(parser.parse_args(list(argv)))


def test_cli_prints_exactly_the_status_fields_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    with peers.hostile_server("ok") as url:
        code = run_cli(url, "-o", "json", "--prefix", "srv", "--deny", "add", "--allow", "nope")
    out, err = capsys.readouterr()
    assert code == 0
    assert json.loads(out) == {
        "tools": [],
        "toolCount": 0,
        "discoveredToolCount": 3,
        "serverInfo": {"name": "hostile-ok", "protocolVersion": "2025-11-25", "version": "1.0.0"},
    }
    assert err == "warning: toolsAllow pattern matches no tool of the server: 'nope'.\n"


def test_cli_table_lists_exposed_and_original_names(capsys: pytest.CaptureFixture[str]) -> None:
    with peers.hostile_server("ok") as url:
        code = run_cli(url, "--prefix", "srv")
    out, _ = capsys.readouterr()
    assert code == 0
    assert "srv_search_docs" in out
    assert "search.docs" in out
    assert "3 exposed of 3 discovered" in out


def test_cli_refuses_loopback_unless_allowed_and_never_connects(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with peers.hostile_server("ok") as url:
        code = run_cli(url, "--loopback-destinations=refused")
        _, err = capsys.readouterr()
        assert code == 1
        host = url.split("/")[2].split(":")[0]
        assert err == (
            f"error: DestinationRefused: {url} was not contacted: {host} is a loopback "
            "address (the operator's egress policy; see docs/security.md)\n"
        )
        assert run_cli(url, "--loopback-destinations=allowed", "-o", "json") == 0


def test_cli_default_prefix_comes_from_the_host() -> None:
    assert probe_command.prefix_for_url("http://time.tools.svc.cluster.local:8080/mcp") == "time"
    assert probe_command.prefix_for_url("http://127.0.0.1:9/mcp") == "m127-0-0-1"
    assert probe_command.prefix_for_url("https://[::1]/mcp") == "m--1"


def test_cli_reports_a_failed_probe_on_stderr_with_exit_code_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"http://127.0.0.1:{peers.free_port()}/mcp"
    code = run_cli(url, "--header", f"Authorization: {SECRET}")
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    assert err == f"error: Unreachable: could not connect to {url}: connection refused\n"
