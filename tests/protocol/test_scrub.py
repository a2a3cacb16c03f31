"""Header values a server echoes back never reach status, Events or the CLI's output.

The hostile server in ``echo`` mode puts the ``Authorization`` value it receives
into tool descriptions, titles and ``serverInfo``: plain, upper-case, base64,
percent- and JSON-encoded, and cut off at the end of a long description. The
oracle here decodes every form independently of the code under test.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import re
from typing import Any
from urllib.parse import unquote_plus

import pytest

from mcp_operator.commands import probe as probe_command
from mcp_operator.controller.mcpserver import report
from mcp_operator.mcp import naming
from mcp_operator.mcp.discovery import discover
from mcp_operator.mcp.target import ProbeTarget
from mcp_operator.net.egress import EgressPolicy
from tests.support import peers
from tests.support.hostile_server import echoed_tools

SECRET = 'Bearer s3cr3t/Tok+en"42~x'
NEEDLE = "s3cr"
"""The first characters of the token: present in every echoed form, once decoded."""
B64_RUN = re.compile(r"[A-Za-z0-9+/_=-]{8,}")


def leaks(text: str) -> list[str]:
    """The ways ``text`` still shows the secret: plain in any case, percent-decoded,
    JSON-unescaped, or inside a base64 run at any alignment."""
    found = []
    lowered = text.lower()
    if NEEDLE in lowered:
        found.append("plain")
    if NEEDLE in unquote_plus(text).lower():
        found.append("percent-encoded")
    if NEEDLE in text.replace('\\"', '"').replace("\\/", "/").lower():
        found.append("json-escaped")
    for run in B64_RUN.findall(text):
        for start in range(4):
            chunk = run[start:]
            chunk = chunk[: len(chunk) - len(chunk) % 4]
            for decode in (base64.b64decode, base64.urlsafe_b64decode):
                try:
                    decoded = decode(chunk)
                except (binascii.Error, ValueError):
                    continue
                if NEEDLE.encode() in decoded.lower():
                    found.append(f"base64 {run!r}")
    return found


def status_text(found: Any) -> str:
    selection = report.status_tools(naming.plan(found.tools, prefix="echo"))
    fields = report.status_fields(found, selection)
    return json.dumps(fields, ensure_ascii=False) + "\n".join(report.warnings(selection))


@pytest.mark.parametrize("tool", echoed_tools(SECRET), ids=lambda tool: tool["name"])
def test_the_oracle_sees_every_form_the_server_echoes(tool: dict[str, Any]) -> None:
    """The test can fail: each echoed form, unscrubbed, is found."""
    shown = tool.get("title") or tool["description"]
    assert leaks(naming.cut(shown, report.MAX_DESCRIPTION_CHARS)) != []


async def test_a_probe_writes_no_form_of_an_echoed_header_value() -> None:
    with peers.hostile_server("echo") as url:
        target = ProbeTarget(
            url, headers={"Authorization": SECRET}, egress=EgressPolicy(allow_loopback=True)
        )
        found = await discover(target, report.STATUS_KEEP)
    text = status_text(found)
    assert len(found.tools) == 7
    assert "***" in text
    assert leaks(text) == []


@pytest.mark.parametrize("output", ["json", "yaml", "table"])
def test_the_cli_prints_no_form_of_an_echoed_header_value(
    output: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    probe_command.add_arguments(parser)
    with peers.hostile_server("echo") as url:
        args = [url, "--header", f"Authorization: {SECRET}", "-o", output]
        code = probe_command.run(parser.parse_args([*args, "--loopback-destinations=allowed"]))
    out, err = capsys.readouterr()
    assert code == 0
    assert leaks(out) == [] and leaks(err) == []
