"""The adapter's configuration: one typed object built from flags and environment.

Owns every tunable of ``mcp-operator adapter``. Each field has a flag and an
environment variable (``MCP_ADAPTER_<NAME>``); a flag wins over the environment,
the environment over the default. ``docs/adapter.md`` documents the same table.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

ENV_PREFIX = "MCP_ADAPTER_"


@dataclass(frozen=True, slots=True)
class AdapterConfig:
    """Everything the adapter needs to run one stdio MCP server behind HTTP."""

    command: tuple[str, ...]
    """The stdio server's command line (everything after ``--``)."""

    host: str = "127.0.0.1"
    """Address to listen on. In a Pod use ``::``: every address, IPv6 and IPv4 alike
    (IPv4 only on a kernel without IPv6), so that the Service reaches it in any cluster."""

    port: int = 8080
    """TCP port to listen on."""

    path: str = "/mcp"
    """The Streamable HTTP endpoint path."""

    allowed_hosts: tuple[str, ...] = ()
    """Extra ``Host`` header values to accept besides localhost (DNS rebinding protection).

    A name without a port matches any port; ``*`` in a name is a glob
    (``*.svc.cluster.local``); a lone ``*`` disables the check. Wrong Host → 421.
    """

    allowed_origins: tuple[str, ...] = ()
    """Extra ``Origin`` values to accept (``scheme://host[:port]``, globs allowed).

    Browsers' Origin on localhost and on the allowed hosts is accepted too. Bad Origin → 403.
    """

    sse: bool = False
    """Also serve the legacy HTTP+SSE transport (2024-11-05) on the two paths below."""

    sse_path: str = "/sse"
    """The legacy SSE transport's event-stream path (with ``--sse``)."""

    messages_path: str = "/messages"
    """The legacy SSE transport's POST path (with ``--sse``)."""

    max_body_bytes: int = 1024 * 1024
    """Largest accepted request body; larger ones get 413.

    1 MiB, not the SDK's 4 MiB: JSON made of many small objects grows about 20x when
    parsed, so one 4 MiB body could take 80 MiB of the sidecar's 256Mi while it is
    decoded. 1 MiB still carries a tool argument of several hundred KiB of text.
    """

    max_line_bytes: int = 16 * 1024 * 1024
    """Largest accepted line on the child's stdout; a longer answer fails its call at once."""

    max_sessions: int = 10_000
    """Most concurrent legacy sessions (about 1 KiB each), shared fairly among callers; beyond
    that a caller's new session takes the place of its own least recently used idle one, or
    of one of a caller over its share (``serve.sessions``), else gets 503."""

    max_inflight: int = 1000
    """Most calls in flight to the child at once; more get 503 (bounded queue)."""

    stream_queue: int = 1000
    """Most undelivered messages per SSE stream; a stream further behind is closed."""

    session_idle_seconds: float = 1800.0
    """A session with no request in flight and no GET stream for this long is dropped (404)."""

    request_timeout_seconds: float = 300.0
    """Longest a call may wait for the child's answer before it fails with a JSON-RPC error."""

    handshake_timeout_seconds: float = 30.0
    """Longest the child may take to answer ``initialize``; then it is restarted."""

    restart_backoff_seconds: float = 0.5
    """First delay before restarting a dead child; doubles on each restart up to 30 seconds."""

    max_restarts: int = 5
    """Crash-loop guard: more restarts than this within the window and the adapter exits 1."""

    restart_window_seconds: float = 120.0
    """The window over which ``max_restarts`` is counted."""

    shutdown_grace_seconds: float = 5.0
    """On SIGTERM: how long the child's process group gets between SIGTERM and SIGKILL."""

    stdio_fifo_dir: str | None = None
    """Talk to a server in another container through ``DIR/stdin`` and ``DIR/stdout`` (FIFOs)
    instead of spawning ``command``; managed mode's Pods use this (docs/managed-mode.md)."""

    log_level: str = "info"
    """Log level of the adapter (debug, info, warning, error)."""

    max_inflight_bytes: int = 32 * 1024 * 1024
    """Most bytes of request bodies admitted and not yet answered, across all clients.

    A body is counted (by its ``Content-Length``, else as ``max_body_bytes``) before it is
    read, until its request is answered; a request that does not fit gets 503 with
    ``Retry-After``. With the body limit this bounds what clients can make the adapter hold.
    """

    header_timeout_seconds: float = 10.0
    """Longest a client may take to send a request's headers (from connecting, or from the
    first byte of a later request on the connection); then the connection is closed
    (slowloris). Idle time between requests is bounded apart: 30 seconds."""

    body_timeout_seconds: float = 30.0
    """Longest a client may take to send a request's body after its headers; then the
    connection is closed."""

    auth: str = "kubernetes"
    """Who may call: ``kubernetes`` (ServiceAccount tokens verified offline against the keys of
    ``access_config``), ``oidc`` (also JWTs of the configuration's OIDC issuer, with RFC 9728
    metadata served) or ``none`` (every request admitted; logged as a warning at start and
    shown in ``/healthz`` and ``mcp_adapter_auth_mode``). docs/adapter.md#authentication."""

    access_config: str | None = None
    """The access configuration (JSON, re-read when it changes): issuer keys, audience, who
    may call, revoked Pods. Required unless ``auth`` is ``none``."""

    metrics_access: str | None = None
    """Who may read ``/metrics``: a file of the access configuration's format naming the
    issuer keys and the scrapers' ServiceAccounts (``serve.auth.scrapers``); a scrape then
    needs a token of the audience ``metrics.mcp-operator.dev`` (401/403 otherwise). Unset:
    ``/metrics`` answers every client (the operator always sets it)."""

    audit: str | None = None
    """Write one JSON line per ``tools/call`` served (caller, tool, outcome, duration; never
    arguments or values) to stdout (``-``) or append it to this file (``adapter.audit``)."""

    upstream_url: str | None = None
    """Front mode: no stdio child; every request that passes the checks is forwarded to the
    HTTP-native MCP server at this loopback URL in the same Pod (``adapter.upstream``)."""

    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment for the child (tests); the adapter's own environment is inherited."""

    replay_events: int = 1000
    """Most events kept per SSE stream for a client that reconnects with ``Last-Event-ID``
    (``serve.events``); the oldest go first."""

    replay_bytes: int = 1024 * 1024
    """Most bytes of events kept per SSE stream for replay."""

    replay_total_bytes: int = 32 * 1024 * 1024
    """Most bytes of events kept for replay over all streams; past it the least recently
    written stream is forgotten."""

    replay_seconds: float = 300.0
    """A stream's events are kept this long after its last one (then ``Last-Event-ID``
    gets 404)."""

    child_per_session: bool = False
    """Run one child per MCP session (legacy: per ``Mcp-Session-Id``; 2026-07-28: per caller)
    instead of one child shared by every client (``adapter/front_pool.py``). With
    ``stdio_fifo_dir``, each child is a connection to ``DIR/spawn.sock``, where the server
    container's ``mcp-stdio-exec --spawn-socket`` starts one server per connection."""

    max_children: int = 32
    """With ``--child-per-session``: most children at once; a new session beyond that takes
    an idle child's place by the fair rule of ``serve.sessions``, else gets 503."""

    child_idle_seconds: float = 300.0
    """With ``--child-per-session``: a child serving no request for this long is stopped
    (its legacy session ends: 404, the client initializes again)."""

    spawn_timeout_seconds: float = 60.0
    """With ``--child-per-session``: longest a new child may take to start and answer
    ``initialize`` (``npx``/``uvx`` cold starts are slow); then it is killed and the
    request that needed it gets 503."""


# (field, flag, type, help) — one row per tunable; docs/adapter.md mirrors this list.
_FLAGS: tuple[tuple[str, str, type, str], ...] = (
    ("host", "--host", str, "address to listen on (default 127.0.0.1; :: = all, dual-stack)"),
    ("port", "--port", int, "TCP port (default 8080)"),
    ("path", "--path", str, "Streamable HTTP path (default /mcp)"),
    ("sse_path", "--sse-path", str, "legacy SSE stream path (default /sse)"),
    ("messages_path", "--messages-path", str, "legacy SSE POST path (default /messages)"),
    ("max_body_bytes", "--max-body-bytes", int, "largest request body, else 413"),
    ("max_line_bytes", "--max-line-bytes", int, "largest stdout line from the child"),
    ("max_sessions", "--max-sessions", int, "most concurrent sessions, else 503"),
    ("max_inflight", "--max-inflight", int, "most calls in flight to the child, else 503"),
    ("stream_queue", "--stream-queue", int, "most buffered messages per SSE stream"),
    ("session_idle_seconds", "--session-idle-seconds", float, "idle session lifetime"),
    ("request_timeout_seconds", "--request-timeout-seconds", float, "per-call timeout"),
    ("handshake_timeout_seconds", "--handshake-timeout-seconds", float, "child handshake timeout"),
    ("restart_backoff_seconds", "--restart-backoff-seconds", float, "first restart delay"),
    ("max_restarts", "--max-restarts", int, "crash-loop guard: restarts per window"),
    ("restart_window_seconds", "--restart-window-seconds", float, "crash-loop guard window"),
    ("shutdown_grace_seconds", "--shutdown-grace-seconds", float, "SIGTERM→SIGKILL grace"),
    ("stdio_fifo_dir", "--stdio-fifo-dir", str, "use the FIFOs in DIR, not a child command"),
    ("log_level", "--log-level", str, "debug, info, warning or error"),
    ("max_inflight_bytes", "--max-inflight-bytes", int, "most body bytes in flight, else 503"),
    ("header_timeout_seconds", "--header-timeout-seconds", float, "request header read timeout"),
    ("body_timeout_seconds", "--body-timeout-seconds", float, "request body read timeout"),
    ("replay_events", "--replay-events", int, "events kept per SSE stream for Last-Event-ID"),
    ("replay_bytes", "--replay-bytes", int, "bytes kept per SSE stream for Last-Event-ID"),
    ("replay_total_bytes", "--replay-total-bytes", int, "bytes kept over all SSE streams"),
    ("replay_seconds", "--replay-seconds", float, "how long a stream's events are kept"),
    ("max_children", "--max-children", int, "--child-per-session: most children, else 503"),
    ("child_idle_seconds", "--child-idle-seconds", float, "--child-per-session: idle child TTL"),
    ("spawn_timeout_seconds", "--spawn-timeout-seconds", float, "--child-per-session: start limit"),
    ("auth", "--auth", str, "kubernetes (default), oidc or none: who may call"),
    ("access_config", "--access-config", str, "the access configuration file (JSON)"),
    ("metrics_access", "--metrics-access", str, "who may scrape /metrics (JSON); unset: all"),
    ("audit", "--audit", str, "audit line per tools/call: - (stdout) or a file"),
    ("upstream_url", "--upstream-url", str, "front mode: forward to this loopback HTTP server"),
)

# (field, flag, metavar, help) — the repeatable flags: every use adds one entry; without the
# flag, ``MCP_ADAPTER_<FIELD>`` holds the entries comma-separated.
_LIST_FLAGS: tuple[tuple[str, str, str, str], ...] = (
    ("allowed_hosts", "--allowed-host", "NAME", "accept this Host too, * globs"),
    ("allowed_origins", "--allowed-origin", "ORIGIN", "accept this Origin too"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the adapter's flags; defaults are ``None`` so that env and defaults can apply."""
    for name, flag, kind, help_text in _FLAGS:
        env_name = ENV_PREFIX + name.upper()
        parser.add_argument(
            flag, dest=name, type=kind, default=None, help=f"{help_text} [{env_name}]"
        )
    for name, flag, metavar, help_text in _LIST_FLAGS:
        env_name = ENV_PREFIX + name.upper()
        parser.add_argument(
            flag,
            dest=name,
            action="append",
            default=None,
            metavar=metavar,
            help=f"{help_text} (repeatable) [{env_name}, comma-separated]",
        )
    parser.add_argument(
        "--sse",
        dest="sse",
        action="store_true",
        default=None,
        help="also serve the legacy HTTP+SSE transport [MCP_ADAPTER_SSE=1]",
    )
    parser.add_argument(
        "--child-per-session",
        dest="child_per_session",
        action="store_true",
        default=None,
        help="one child per MCP session (2026-07-28: per caller) from a bounded pool "
        "[MCP_ADAPTER_CHILD_PER_SESSION=1]",
    )
    parser.add_argument(
        "--make-fifos",
        action="store_true",
        help="create the FIFOs in --stdio-fifo-dir and exit (the Pod's init container)",
    )
    parser.add_argument(
        "child_command",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND [ARG ...]",
        help="the stdio MCP server to run",
    )


def _env_list(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> AdapterConfig:
    """Build the config: flag, else ``MCP_ADAPTER_<NAME>``, else the default. Raises ValueError."""
    environ = os.environ if environ is None else environ
    values: dict[str, object] = {}
    for name, _flag, kind, _help in _FLAGS:
        value = getattr(args, name, None)
        if value is None and (raw := environ.get(ENV_PREFIX + name.upper())):
            try:
                value = kind(raw)
            except ValueError as error:
                raise ValueError(f"{ENV_PREFIX}{name.upper()}: {error}") from None
        if value is not None:
            values[name] = value
    for name, _flag, _metavar, _help in _LIST_FLAGS:
        entries = getattr(args, name, None) or _env_list(environ.get(ENV_PREFIX + name.upper(), ""))
        values[name] = tuple(entries)
    sse = args.sse if args.sse is not None else environ.get(ENV_PREFIX + "SSE", "") in ("1", "true")
    per_session = getattr(args, "child_per_session", None)
    if per_session is None:
        per_session = environ.get(ENV_PREFIX + "CHILD_PER_SESSION", "") in ("1", "true")
    command: Sequence[str] = list(args.child_command or ())
    if command and command[0] == "--":
        command = command[1:]
    if values.get("stdio_fifo_dir") and command:
        raise ValueError("pass either --stdio-fifo-dir or a server command, not both")
    if values.get("upstream_url") and (command or values.get("stdio_fifo_dir")):
        raise ValueError("--upstream-url fronts an HTTP server: no command or --stdio-fifo-dir")
    if not command and not values.get("stdio_fifo_dir") and not values.get("upstream_url"):
        raise ValueError("no server command: pass it after --, e.g. -- npx -y SERVER")
    config = AdapterConfig(
        command=tuple(command),
        sse=bool(sse),
        child_per_session=bool(per_session),
        **values,  # type: ignore[arg-type]
    )
    validate(config)
    return config


def validate(config: AdapterConfig) -> None:
    """Reject values that cannot work, with a message that names the flag."""
    for name in ("path", "sse_path", "messages_path"):
        if not getattr(config, name).startswith("/"):
            raise ValueError(f"--{name.replace('_', '-')} must start with /")
    if not 0 < config.port < 65536:
        raise ValueError("--port must be between 1 and 65535")
    for name in (
        "max_body_bytes",
        "max_line_bytes",
        "max_sessions",
        "max_inflight",
        "stream_queue",
        "max_inflight_bytes",
        "header_timeout_seconds",
        "body_timeout_seconds",
        "replay_events",
        "replay_bytes",
        "replay_total_bytes",
        "replay_seconds",
        "max_children",
        "child_idle_seconds",
        "spawn_timeout_seconds",
    ):
        if getattr(config, name) <= 0:
            raise ValueError(f"--{name.replace('_', '-')} must be positive")
    if config.max_inflight_bytes < config.max_body_bytes:
        raise ValueError("--max-inflight-bytes must be at least --max-body-bytes")
    if config.child_per_session and config.sse:
        raise ValueError("--child-per-session serves Streamable HTTP only, not --sse")
    if config.upstream_url is not None:
        from mcp_operator.adapter.upstream import check_upstream_url

        if (why := check_upstream_url(config.upstream_url)) is not None:
            raise ValueError(why)
    if config.auth not in ("kubernetes", "oidc", "none"):
        raise ValueError("--auth must be kubernetes, oidc or none")
    if config.log_level.lower() not in ("debug", "info", "warning", "error"):
        raise ValueError("--log-level must be debug, info, warning or error")
