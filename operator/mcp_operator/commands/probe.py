"""``mcp-operator probe URL``: what the operator would write into an MCPServer's status.

Runs the operator's own probe (handshake in either era, every ``tools/list``
page, then allow, deny and prefix) against one server and prints the status
fields (``-o json`` / ``-o yaml``, exactly as the operator writes them) or a
table. Warnings go to stderr. Exit code 0 on success, 1 when the probe fails
(``error: <Reason>: <message>`` on stderr), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from typing import Any
from urllib.parse import urlsplit

PREFIX_HELP = (
    "tool name prefix (default: derived from the URL's host: its first DNS label, "
    "e.g. 'time' for http://time.tools.svc.cluster.local:8080/mcp, which for a managed "
    "server is the MCPServer's name; an IP address gives 'm' + the address with '-', "
    "e.g. m127-0-0-1). Same rule as the operator's default from metadata.name"
)


def _positive(text: str) -> float:
    value = float(text)
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError("must be more than 0 and at most 3600 seconds")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", help="the server's MCP endpoint, http:// or https://")
    parser.add_argument(
        "--transport",
        choices=["streamable-http", "sse"],
        default="streamable-http",
        help="streamable-http (default; either MCP era) or the legacy HTTP+SSE transport",
    )
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="a header sent on every request (repeatable); values are never printed",
    )
    parser.add_argument(
        "--allow", action="append", default=[], metavar="GLOB", help="like toolsAllow (repeatable)"
    )
    parser.add_argument(
        "--deny", action="append", default=[], metavar="GLOB", help="like toolsDeny (repeatable)"
    )
    parser.add_argument("--prefix", help=PREFIX_HELP)
    parser.add_argument(
        "--timeout",
        type=_positive,
        default=10.0,
        metavar="SECONDS",
        help="deadline for the whole probe (default 10, like probe.timeoutSeconds)",
    )
    parser.add_argument(
        "-o",
        "--output",
        choices=["table", "json", "yaml"],
        default="table",
        help="table (default), or the status fields as json or yaml",
    )
    parser.add_argument(
        "--insecure-skip-tls-verify",
        action="store_true",
        help="do not verify the server's TLS certificate",
    )
    parser.add_argument(
        "--private-destinations",
        choices=["refused", "allowed"],
        default="refused",
        help="connect to private addresses (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7: "
        "cluster Services, nodes), like the operator's setting of the same name "
        "(default %(default)s; docs/security.md)",
    )
    parser.add_argument(
        "--loopback-destinations",
        choices=["refused", "allowed"],
        default="refused",
        help="connect to loopback addresses (127/8, ::1), like the operator's setting of the "
        "same name (default %(default)s)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show the MCP session's log messages down to INFO",
    )


def prefix_for_url(url: str) -> str:
    """The CLI's default prefix: from the host's first DNS label, or the whole IP address."""
    from mcp_operator.mcp.naming import default_prefix

    host = urlsplit(url).hostname or ""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        host = host.split(".", 1)[0]
    return default_prefix(host)


def _parse_headers(values: list[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for value in values:
        name, colon, content = value.partition(":")
        name = name.strip()
        if not colon or not name or any(c.isspace() for c in name):
            raise ValueError(f"--header must look like 'Name: value' (got a header named {name!r})")
        headers[name] = content.strip()
    return headers


def run(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from mcp_operator.controller.mcpserver.report import (
        STATUS_KEEP,
        status_fields,
        status_tools,
        warnings,
    )
    from mcp_operator.mcp.discovery import discover
    from mcp_operator.mcp.errors import ProbeError
    from mcp_operator.mcp.naming import is_valid_prefix, plan
    from mcp_operator.mcp.target import ProbeTarget
    from mcp_operator.net.egress import EgressPolicy

    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )

    try:
        headers = _parse_headers(args.header)
    except ValueError as error:
        print(f"error: InvalidArgument: {error}", file=sys.stderr)
        return 2
    prefix = args.prefix if args.prefix is not None else prefix_for_url(args.url)
    if not is_valid_prefix(prefix):
        print(
            f"error: InvalidArgument: --prefix {prefix!r} must be lowercase letters, digits, "
            "'_' and '-', start with a letter and be at most 32 characters",
            file=sys.stderr,
        )
        return 2

    target = ProbeTarget(
        url=args.url,
        transport=args.transport,
        headers=headers,
        timeout_seconds=args.timeout,
        verify_tls=not args.insecure_skip_tls_verify,
        egress=EgressPolicy(
            allow_private=args.private_destinations == "allowed",
            allow_loopback=args.loopback_destinations == "allowed",
        ),
    )
    try:
        discovery = asyncio.run(discover(target, STATUS_KEEP))
    except ProbeError as error:
        print(f"error: {error.reason}: {error.message}", file=sys.stderr)
        return 1
    selection = status_tools(plan(discovery.tools, prefix=prefix, allow=args.allow, deny=args.deny))
    fields = status_fields(discovery, selection)

    if args.output == "json":
        import json

        print(json.dumps(fields, indent=2, ensure_ascii=False))
    elif args.output == "yaml":
        import yaml

        print(yaml.safe_dump(fields, sort_keys=False, allow_unicode=True), end="")
    else:
        print(_table(fields, prefix))
    for warning in warnings(selection):
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _table(fields: dict[str, Any], prefix: str) -> str:
    import shutil

    info = fields["serverInfo"]
    who = " ".join(part for part in (info.get("name"), info.get("version")) if part) or "(unnamed)"
    lines = [
        f"Server:  {who} (protocol {info['protocolVersion']})",
        f"Tools:   {fields['toolCount']} exposed of {fields['discoveredToolCount']} discovered "
        f"(prefix {prefix})",
        "",
    ]
    rows = [("NAME", "ORIGINAL NAME", "DESCRIPTION")]
    for tool in fields["tools"]:
        description = " ".join(tool.get("description", "").split())
        rows.append((tool["name"], tool["originalName"], description))
    name_width = max(len(row[0]) for row in rows)
    original_width = max(len(row[1]) for row in rows)
    columns = shutil.get_terminal_size((120, 24)).columns
    room = max(columns - name_width - original_width - 4, 20)
    for name, original, description in rows:
        if len(description) > room:
            description = description[: room - 1] + "…"
        lines.append(f"{name:<{name_width}}  {original:<{original_width}}  {description}".rstrip())
    if len(fields["tools"]) < fields["toolCount"]:
        lines.append(f"... and {fields['toolCount'] - len(fields['tools'])} more (status bound)")
    return "\n".join(lines)
