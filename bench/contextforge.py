"""ContextForge (PyPI ``mcp-contextforge-gateway`` 1.1.0) as the bridge bench's peer.

A user who does not pick the bridge would put this gateway in front of the same upstream:
one gateway registered for the upstream, and a *virtual server* holding its ``echo`` tool,
which clients reach at ``/servers/<id>/mcp`` with a bearer token. Run as its README's quick
start does (one process, SQLite, in-memory cache, no Redis), with its own secrets generated
per run, its SSRF guard told that the upstream on loopback is allowed, logging at WARNING,
and its rate limiter off: by default it lets one client make 100 MCP requests a minute (then
answers 429), which would measure the limiter rather than the forwarding. Installed into
the cache by ``hack/install-contextforge.sh`` (it needs Python >= 3.12, which that script
builds); :func:`installed` says whether it is there.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support import peers  # noqa: E402
from tests.support.waiting import eventually  # noqa: E402

CACHE = Path(os.environ.get("MCP_OPERATOR_CACHE", Path.home() / ".cache" / "mcp-operator"))
VENV = CACHE / "contextforge-venv"
VERSION = "1.1.0"


@dataclass
class VirtualServer:
    """The gateway's MCP endpoint for the upstream's tool, and how to call it."""

    url: str
    tool: str
    headers: dict[str, str]
    pid: int


def installed() -> bool:
    return (VENV / "bin" / "mcpgateway").exists()


def _environment(database: Path) -> dict[str, str]:
    def strong() -> str:
        return secrets.token_urlsafe(32)

    return {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{database}",
        "CACHE_TYPE": "memory",
        "LOG_LEVEL": "WARNING",
        "MCPGATEWAY_UI_ENABLED": "false",
        "MCPGATEWAY_ADMIN_API_ENABLED": "true",
        "JWT_SECRET_KEY": strong(),
        "AUTH_ENCRYPTION_SECRET": strong(),
        "PLATFORM_ADMIN_EMAIL": "admin@example.com",
        "PLATFORM_ADMIN_PASSWORD": f"Aa1-{strong()}",
        "DEFAULT_USER_PASSWORD": f"Bb2-{strong()}",
        "SSRF_ALLOW_LOCALHOST": "true",
        "SSRF_ALLOW_PRIVATE_NETWORKS": "true",
        "RATE_LIMITING_ENABLED": "false",
        "RATE_LIMIT_LOCKOUT_ENABLED": "false",
    }


def _token(env: dict[str, str]) -> str:
    argv = [str(VENV / "bin" / "python"), "-m", "mcpgateway.utils.create_jwt_token",
            "-u", "admin@example.com", "--admin", "-e", "240"]  # fmt: skip
    output = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
    return output.strip().splitlines()[-1]


@contextlib.contextmanager
def virtual_server(upstream_url: str, tool: str) -> Iterator[VirtualServer]:
    """ContextForge running, with a virtual server over ``upstream_url`` holding ``tool``."""
    port = peers.free_port()
    with tempfile.TemporaryDirectory(prefix="contextforge-") as tmp:
        env = _environment(Path(tmp) / "mcp.db")
        argv = [str(VENV / "bin" / "mcpgateway"), "--host", "127.0.0.1", "--port", str(port)]
        with peers.run_server(argv, port, env=env, name="contextforge", timeout=120) as process:
            base = f"http://127.0.0.1:{port}"
            eventually(
                "ContextForge healthy",
                lambda: httpx.get(f"{base}/health").status_code == 200,
                timeout=60,
                ignoring=(httpx.HTTPError,),
            )
            headers = {"authorization": f"Bearer {_token(env)}"}
            with httpx.Client(base_url=base, headers=headers, timeout=60) as admin:
                gateway = {"name": "upstream", "url": upstream_url, "transport": "STREAMABLEHTTP"}
                admin.post("/gateways", json=gateway).raise_for_status()
                tools = admin.get("/tools").json()
                listed = tools.get("items", tools) if isinstance(tools, dict) else tools
                found = next(t for t in listed if t.get("originalName") == tool)
                server = {"server": {"name": "bench", "associated_tools": [found["id"]]}}
                created = admin.post("/servers", json=server)
                created.raise_for_status()
            yield VirtualServer(
                url=f"{base}/servers/{created.json()['id']}/mcp",
                tool=found["name"],
                headers=headers,
                pid=process.pid,
            )
