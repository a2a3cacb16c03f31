"""A misbehaving MCP server, to prove that the probe fails clearly and on time.

Run it as ``python tests/support/hostile_server.py --port N --mode MODE`` or
start it from Python with :func:`tests.support.peers.hostile_server`. It speaks
the legacy era (2025-11-25) of Streamable HTTP in plain JSON, on a plain asyncio
HTTP/1.1 server (one request per connection), so that it can break the
protocol in ways a real framework would not let it:

==============  =============================================================
mode            behaviour
==============  =============================================================
ok              a valid server with three tools; ``tools/call`` of ``echo``
                answers with its ``message`` argument
hang            accepts connections, reads the request, never answers
garbage         answers every request with bytes that are not JSON
many-tools      ``--tools`` tools (default 10,000), ``--page-size`` per page;
                with ``--size``, each description is that many bytes; with
                ``--properties``, each ``inputSchema`` has that many properties
cursor-loop     every ``tools/list`` page returns the same ``nextCursor``
empty-cursor    valid: page 1 returns ``nextCursor: ""``, page 2 ends the list
invalid-names   tool names that are invalid, too long or equal after sanitising
huge            a tool whose description is ``--size`` bytes (default 4 MiB),
                sent without Content-Length unless ``--content-length``
slow            answers every request after ``--delay`` seconds (default 3)
status          answers every POST with HTTP ``--status`` (default 500)
echo            a valid server that echoes the ``--echo-header`` header's value
                (default ``Authorization``) into tool descriptions, titles and
                ``serverInfo``: plain, upper-case, base64, percent- and
                JSON-encoded, and cut off at the end of a long description; and
                into its answers to ``tools/call``: ``plain`` fails with a
                JSON-RPC error quoting it, ``b64`` returns an ``isError`` result
                with it base64-encoded, any other tool says it upper-cased
echo-refusing   ``echo``, but ``tools/list`` fails with a JSON-RPC error quoting the
                header's value (its listing never succeeds)
changing        a valid server with one tool, ``tool_v<N>``, and a GET stream:
                ``POST /change`` bumps N and sends
                ``notifications/tools/list_changed`` on every open stream;
                ``POST /streams`` says how many are open (``{"open": N}``)
==============  =============================================================

``--require-header 'Name: value'`` makes every mode answer 401 to requests
without that exact header (how tests prove that headers reach the server).
``--session`` gives every ``initialize`` an ``Mcp-Session-Id`` (so clients end it
with ``DELETE``), ``--stall-delete`` never answers a ``DELETE``, and
``--together N`` holds every ``tools/list`` answer until N of them are waiting
(N probes fail or succeed at the same moment).
``server/discover`` gets JSON-RPC "method not found", as from a legacy server.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import sys
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MODES = (
    "ok",
    "hang",
    "garbage",
    "many-tools",
    "cursor-loop",
    "empty-cursor",
    "invalid-names",
    "huge",
    "slow",
    "status",
    "changing",
    "echo",
    "echo-refusing",
)
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
MAX_REQUEST_BYTES = 1024 * 1024

INVALID_NAMES = [
    "bad name!",
    "x" * 200,
    "",
    "tab\tname",
    "ünïcode",
    "a.b",
    "a_b",
    "dup",
    "dup",
    "ok_tool",
]
"""Invalid: the first five. ``a.b``/``a_b`` collide once prefixed; ``dup`` is listed twice."""

EMPTY_CURSOR_PAGES = {None: (["first_a", "first_b"], ""), "": (["second_a", "second_b"], None)}


@dataclass(frozen=True)
class Options:
    mode: str
    port: int
    host: str = "127.0.0.1"
    tools: int = 10_000
    page_size: int = 100
    size: int | None = None
    properties: int = 0
    delay: float = 3.0
    status: int = 500
    content_length: bool = False
    require_header: tuple[str, str] | None = None
    echo_header: str = "Authorization"
    session: bool = False
    stall_delete: bool = False
    together: int = 0


def _tool(name: str, description: str = "A tool of the hostile test server") -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": {}},
    }


def _page(names: Sequence[str], next_cursor: str | None) -> dict[str, Any]:
    result: dict[str, Any] = {"tools": [_tool(name) for name in names]}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result


def fat_schema(properties: int) -> dict[str, Any]:
    """An ``inputSchema`` with ``properties`` described string properties (~110 bytes each)."""
    return {
        "type": "object",
        "properties": {
            f"p{i:03d}": {"type": "string", "description": f"Property {i}", "maxLength": 64}
            for i in range(properties)
        },
        "required": ["p000"] if properties else [],
    }


class _Changing:
    """The state of the ``changing`` mode: the tool list's generation and the open streams."""

    generation = 0
    streams: set[asyncio.StreamWriter] = set()

    @classmethod
    async def bump(cls) -> None:
        cls.generation += 1
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        for stream in list(cls.streams):
            with contextlib.suppress(ConnectionError):
                stream.write(f"event: message\ndata: {note}\n\n".encode())
                await stream.drain()


_changing = _Changing


async def _serve_stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """The session's GET stream: stays open and carries list-change notifications.

    It counts as open (``POST /streams``) until the client hangs up, which the
    end of its input tells at once, so that tests can wait for a listener.
    """
    writer.write(
        b"HTTP/1.1 200 Hostile\r\nContent-Type: text/event-stream\r\n"
        b"Cache-Control: no-cache\r\nConnection: close\r\n\r\n"
    )
    await writer.drain()
    _changing.streams.add(writer)
    try:
        while not writer.is_closing():
            try:
                if not await asyncio.wait_for(reader.read(1024), timeout=1):
                    return  # the client hung up
            except TimeoutError:
                writer.write(b": keep-alive\n\n")
                await writer.drain()
    finally:
        _changing.streams.discard(writer)


class _Error(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def echoed_tools(value: str) -> list[dict[str, Any]]:
    """Tools whose texts carry ``value`` in the forms a careless server would echo it."""
    encoded = base64.b64encode(f"Authorization: {value}".encode()).decode()
    return [
        _tool("plain", f"Called with {value}"),
        _tool("upper", f"CALLED WITH {value.upper()}"),
        _tool("b64", f"Basic-style blob {encoded}"),
        _tool("url", f"https://example.com/?token={urllib.parse.quote(value, safe='')}"),
        _tool("json", json.dumps({"auth": value})),
        _tool("cut", "x" * 1010 + value),
        {**_tool("titled", "t"), "title": f"Title {value}", "annotations": {"title": value}},
    ]


def echoed_call(name: Any, value: str) -> dict[str, Any]:
    """A careless server's answer to a call: its error quotes the credential it was sent."""
    if name == "plain":
        raise _Error(-32001, f"Unauthorized: the token {value} is not valid for this call")
    if name == "b64":
        encoded = base64.b64encode(f"Authorization: {value}".encode()).decode()
        return {"content": [{"type": "text", "text": f"rejected {encoded}"}], "isError": True}
    return {"content": [{"type": "text", "text": f"REJECTED {value.upper()}"}], "isError": True}


def tools_list(options: Options, cursor: str | None) -> dict[str, Any]:
    """The ``tools/list`` result of a mode, for the page named by ``cursor``."""
    mode = options.mode
    if mode == "many-tools":
        start = 0 if cursor is None else int(cursor)
        end = min(start + options.page_size, options.tools)
        names = [f"tool_{i:05d}" for i in range(start, end)]
        page = _page(names, str(end) if end < options.tools else None)
        for tool in page["tools"]:
            if options.size is not None:
                tool["description"] = "d" * options.size
            if options.properties:
                tool["inputSchema"] = fat_schema(options.properties)
        return page
    if mode == "cursor-loop":
        return _page(["loop_first" if cursor is None else "loop_again"], "again")
    if mode == "empty-cursor":
        if cursor not in EMPTY_CURSOR_PAGES:
            raise _Error(-32602, "Invalid cursor")
        names, next_cursor = EMPTY_CURSOR_PAGES[cursor]
        return _page(names, next_cursor)
    if mode == "invalid-names":
        return _page(INVALID_NAMES, None)
    if mode == "changing":
        return _page([f"tool_v{_changing.generation}"], None)
    tools = [
        {
            **_tool("echo", "Echoes its input"),
            "annotations": {"title": "Echo", "readOnlyHint": True, "openWorldHint": False},
        },
        _tool("add", "Adds two numbers"),
        _tool("search.docs", "Searches the documents"),
    ]
    return {"tools": tools}


def handle_rpc(
    options: Options, message: dict[str, Any], headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """The JSON-RPC response to one request (modes that answer with valid JSON)."""
    method = message.get("method")
    params = message.get("params") or {}
    echoed = (headers or {}).get(options.echo_header.lower(), "")
    try:
        if method == "initialize":
            asked = params.get("protocolVersion")
            info = {"name": f"hostile-{options.mode}", "version": "1.0.0"}
            if options.mode == "echo":
                info = {"name": f"echo {echoed}", "version": echoed}
            result: dict[str, Any] = {
                "protocolVersion": asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0],
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": info,
            }
        elif method == "ping":
            result = {}
        elif method == "tools/list" and options.mode == "echo-refusing":
            raise _Error(-32001, f"Unauthorized: the token {echoed} may not list tools")
        elif method == "tools/list" and options.mode == "echo":
            result = {"tools": echoed_tools(echoed)}
        elif method == "tools/call" and options.mode == "echo":
            result = echoed_call(params.get("name"), echoed)
        elif method == "tools/call" and options.mode == "ok" and params.get("name") == "echo":
            text = str((params.get("arguments") or {}).get("message", ""))
            result = {"content": [{"type": "text", "text": text}], "isError": False}
        elif method == "tools/list":
            result = tools_list(options, params.get("cursor"))
        else:
            raise _Error(-32601, "Method not found")
    except _Error as error:
        return {
            "jsonrpc": "2.0",
            "id": message.get("id"),
            "error": {"code": error.code, "message": error.message},
        }
    return {"jsonrpc": "2.0", "id": message.get("id"), "result": result}


async def _respond(
    writer: asyncio.StreamWriter,
    status: int,
    body: bytes = b"",
    content_type: str = "application/json",
    extra: Sequence[str] = (),
) -> None:
    head = [f"HTTP/1.1 {status} Hostile", "Connection: close", f"Content-Length: {len(body)}"]
    head += extra
    if body:
        head.append(f"Content-Type: {content_type}")
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
    await writer.drain()


async def _respond_huge(
    writer: asyncio.StreamWriter, message: dict[str, Any], size: int, with_length: bool
) -> None:
    """A ``tools/list`` result with a ``size``-byte description, streamed."""
    tool = _tool("huge", "@@")
    envelope = json.dumps({"jsonrpc": "2.0", "id": message.get("id"), "result": {"tools": [tool]}})
    before, after = envelope.split("@@")
    length = f"Content-Length: {len(before) + size + len(after)}\r\n" if with_length else ""
    writer.write(
        b"HTTP/1.1 200 Hostile\r\nConnection: close\r\nContent-Type: application/json\r\n"
        + length.encode()
        + b"\r\n"
    )
    writer.write(before.encode())
    chunk = b"x" * 65536
    sent = 0
    while sent < size:
        piece = chunk[: min(len(chunk), size - sent)]
        writer.write(piece)
        sent += len(piece)
        await writer.drain()
    writer.write(after.encode())
    await writer.drain()


async def _read_request(
    reader: asyncio.StreamReader,
) -> tuple[str, str, dict[str, str], bytes] | None:
    request_line = await reader.readline()
    if not request_line:
        return None
    method, _, rest = request_line.decode("latin-1").partition(" ")
    path = rest.split(" ", 1)[0]
    headers: dict[str, str] = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    body = await reader.readexactly(min(length, MAX_REQUEST_BYTES)) if length else b""
    return method, path, headers, body


class _Together:
    """The ``--together`` barrier: answers wait until enough requests are waiting."""

    def __init__(self) -> None:
        self.waiting = 0
        self.released = asyncio.Event()

    async def wait(self, count: int) -> None:
        self.waiting += 1
        if self.waiting >= count:
            self.released.set()
        await self.released.wait()


_together = _Together()


async def handle_connection(
    options: Options, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        request = await _read_request(reader)
        if request is None:
            return
        method, path, headers, body = request
        if options.mode == "changing":
            if method == "GET":
                await _serve_stream(reader, writer)
                return
            if method == "DELETE":
                await _respond(writer, 200)
                return
            if path == "/change":
                await _changing.bump()
                await _respond(writer, 200, b"{}")
                return
            if path == "/streams":
                await _respond(writer, 200, json.dumps({"open": len(_changing.streams)}).encode())
                return
        if options.mode == "hang" or (method == "DELETE" and options.stall_delete):
            await asyncio.Event().wait()
        if options.require_header is not None:
            name, value = options.require_header
            if headers.get(name.lower()) != value:
                await _respond(writer, 401, b'{"error": "missing credentials"}')
                return
        if method != "POST":
            await _respond(writer, 405)
            return
        if options.mode == "status":
            await _respond(writer, options.status, b"no", "text/plain")
            return
        try:
            message = json.loads(body)
        except ValueError:
            await _respond(writer, 400, b'{"error": "not JSON"}')
            return
        if not isinstance(message, dict) or "id" not in message:
            await _respond(writer, 202)  # a notification or a response
            return
        if options.mode == "slow":
            await asyncio.sleep(options.delay)
        if options.mode == "garbage":
            await _respond(writer, 200, b"\x00\xff this is {not JSON")
            return
        if options.together and message.get("method") == "tools/list":
            await _together.wait(options.together)
        if options.mode == "huge" and message.get("method") == "tools/list":
            size = options.size if options.size is not None else 4 * 1024 * 1024
            await _respond_huge(writer, message, size, options.content_length)
            return
        answer = json.dumps(handle_rpc(options, message, headers)).encode()
        with_session = options.mode == "changing" or (
            options.session and message.get("method") == "initialize"
        )
        session = ["Mcp-Session-Id: hostile-session"] if with_session else []
        await _respond(writer, 200, answer, extra=session)
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def serve(options: Options, ready: asyncio.Event | None = None) -> None:
    """Serve until cancelled."""

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await handle_connection(options, reader, writer)

    server = await asyncio.start_server(on_connection, options.host, options.port)
    async with server:
        if ready is not None:
            ready.set()
        await server.serve_forever()


def parse_args(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--mode", choices=MODES, required=True)
    parser.add_argument("--tools", type=int, default=10_000, help="many-tools: how many")
    parser.add_argument("--page-size", type=int, default=100, help="many-tools: tools per page")
    parser.add_argument("--size", type=int, help="huge (default 4 MiB), many-tools: bytes")
    parser.add_argument(
        "--properties", type=int, default=0, help="many-tools: properties per inputSchema"
    )
    parser.add_argument("--delay", type=float, default=3.0, help="slow: seconds per answer")
    parser.add_argument("--status", type=int, default=500, help="status: the HTTP status")
    parser.add_argument(
        "--content-length", action="store_true", help="huge: announce the body's length"
    )
    parser.add_argument("--require-header", metavar="'NAME: VALUE'")
    parser.add_argument("--echo-header", default="Authorization", help="echo: which header")
    parser.add_argument("--session", action="store_true", help="initialize gives a session")
    parser.add_argument("--stall-delete", action="store_true", help="never answer DELETE")
    parser.add_argument("--together", type=int, default=0, help="tools/list waits for N")
    args = parser.parse_args(argv)
    required = None
    if args.require_header:
        name, _, value = args.require_header.partition(":")
        required = (name.strip(), value.strip())
    return Options(
        mode=args.mode,
        port=args.port,
        host=args.host,
        tools=args.tools,
        page_size=args.page_size,
        size=args.size,
        properties=args.properties,
        delay=args.delay,
        status=args.status,
        content_length=args.content_length,
        require_header=required,
        echo_header=args.echo_header,
        session=args.session,
        stall_delete=args.stall_delete,
        together=args.together,
    )


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(options))
    return 0


if __name__ == "__main__":
    sys.exit(main())
