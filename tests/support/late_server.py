"""A stdio MCP server whose messages about a finished call arrive during another call.

Run as ``python tests/support/late_server.py``. Its two tools:

- ``late`` answers at once; what it has to say afterwards comes later;
- ``wait``: the late messages come now, the way most servers send them, without a
  progress token: a log message and a ``sampling/createMessage`` request, both with a
  secret in them. ``wait`` then answers with what the sampling request got: the client's
  text, or ``refused`` when the request came back as an error.

Through the adapter, ``wait`` of another session must get ``refused`` and no log (the
late messages belong to nobody it can tell), and ``wait`` of the only session there is
gets both.
"""

from __future__ import annotations

import json
import sys
from typing import Any

SECRET_LOG = "SECRET log of the late call"
SECRET_PROMPT = "SECRET prompt of the late call"


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request_id: Any, result: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def main() -> None:
    waiting: list[Any] = []
    asked = 0
    for raw in sys.stdin:
        message = json.loads(raw)
        method = message.get("method")
        request_id = message.get("id")
        if method == "initialize":
            answer(
                request_id,
                {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}, "logging": {}},
                    "serverInfo": {"name": "late", "version": "0"},
                },
            )
        elif method == "tools/list":
            tools = [{"name": n, "inputSchema": {"type": "object"}} for n in ("late", "wait")]
            answer(request_id, {"tools": tools})
        elif method == "tools/call" and message["params"]["name"] == "late":
            answer(request_id, text("done"))
        elif method == "tools/call":
            log = {"level": "info", "logger": "late", "data": SECRET_LOG}
            send({"jsonrpc": "2.0", "method": "notifications/message", "params": log})
            asked += 1
            prompt = {"role": "user", "content": {"type": "text", "text": SECRET_PROMPT}}
            params = {"messages": [prompt], "maxTokens": 5}
            send({"jsonrpc": "2.0", "id": f"ask-{asked}", "method": "sampling/createMessage",
                  "params": params})  # fmt: skip
            waiting.append(request_id)
        elif method is None and waiting and str(request_id).startswith("ask-"):
            got = message.get("result", {}).get("content", {}).get("text", "refused")
            answer(waiting.pop(0), text(got if "error" not in message else "refused"))
        elif method is not None and request_id is not None:
            answer(request_id, {})


if __name__ == "__main__":
    main()
