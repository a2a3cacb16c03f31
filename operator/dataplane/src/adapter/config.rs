//! The adapter's configuration: every setting a flag and an environment variable (the flag
//! wins), the child's command after `--`. docs/adapter.md has the table; the names are
//! those of the earlier adapter, so that a Pod's flags keep their meaning.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

/// Who may call the adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuthMode {
    /// ServiceAccount tokens verified offline against the issuer keys of --access-config.
    Kubernetes,
    /// No check: every caller is `anonymous` (a warning at start, `"auth": "none"` in /healthz).
    None,
}

impl AuthMode {
    pub fn name(self) -> &'static str {
        match self {
            AuthMode::Kubernetes => "kubernetes",
            AuthMode::None => "none",
        }
    }
}

/// `mcp-dataplane adapter`: one stdio MCP server served to many HTTP clients of both eras.
#[derive(Debug, Clone, Args)]
pub struct AdapterConfig {
    /// Address to listen on; `::` is every address of both families.
    #[arg(long, env = "MCP_ADAPTER_HOST", default_value = "127.0.0.1")]
    pub host: String,
    /// TCP port.
    #[arg(long, env = "MCP_ADAPTER_PORT", default_value_t = 8080)]
    pub port: u16,
    /// Streamable HTTP path.
    #[arg(long, env = "MCP_ADAPTER_PATH", default_value = "/mcp")]
    pub path: String,
    /// Host values accepted besides localhost (no port = any port; `*` globs; a lone `*` turns the check off).
    #[arg(
        long = "allowed-host",
        env = "MCP_ADAPTER_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<String>,
    /// Origin values accepted besides those on allowed hosts.
    #[arg(
        long = "allowed-origin",
        env = "MCP_ADAPTER_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    pub allowed_origins: Vec<String>,
    /// Larger request bodies get 413.
    #[arg(long, env = "MCP_ADAPTER_MAX_BODY_BYTES", default_value_t = 1 << 20)]
    pub max_body_bytes: usize,
    /// A longer stdout line from the child is skipped unread; the call it answers fails.
    #[arg(long, env = "MCP_ADAPTER_MAX_LINE_BYTES", default_value_t = 16 << 20)]
    pub max_line_bytes: usize,
    /// Legacy sessions at once, shared fairly among callers; 503 when none is free.
    #[arg(long, env = "MCP_ADAPTER_MAX_SESSIONS", default_value_t = 10_000)]
    pub max_sessions: usize,
    /// More calls in flight to the child get 503.
    #[arg(long, env = "MCP_ADAPTER_MAX_INFLIGHT", default_value_t = 1000)]
    pub max_inflight: usize,
    /// Messages buffered per SSE stream; a stream further behind loses them.
    #[arg(long, env = "MCP_ADAPTER_STREAM_QUEUE", default_value_t = 1000)]
    pub stream_queue: usize,
    /// Idle sessions (no request, no GET stream) are dropped; then 404.
    #[arg(long, env = "MCP_ADAPTER_SESSION_IDLE_SECONDS", default_value_t = 1800.0)]
    pub session_idle_seconds: f64,
    /// A call unanswered this long fails (and is cancelled at the child).
    #[arg(long, env = "MCP_ADAPTER_REQUEST_TIMEOUT_SECONDS", default_value_t = 300.0)]
    pub request_timeout_seconds: f64,
    /// A child that does not answer `initialize` in time is restarted.
    #[arg(long, env = "MCP_ADAPTER_HANDSHAKE_TIMEOUT_SECONDS", default_value_t = 30.0)]
    pub handshake_timeout_seconds: f64,
    /// First restart delay, doubling up to 30 s.
    #[arg(long, env = "MCP_ADAPTER_RESTART_BACKOFF_SECONDS", default_value_t = 0.5)]
    pub restart_backoff_seconds: f64,
    /// Crash-loop guard: more restarts than this within the window and the adapter exits 1.
    #[arg(long, env = "MCP_ADAPTER_MAX_RESTARTS", default_value_t = 5)]
    pub max_restarts: usize,
    /// The crash-loop guard's window.
    #[arg(long, env = "MCP_ADAPTER_RESTART_WINDOW_SECONDS", default_value_t = 120.0)]
    pub restart_window_seconds: f64,
    /// SIGTERM → SIGKILL grace for the child's process group.
    #[arg(long, env = "MCP_ADAPTER_SHUTDOWN_GRACE_SECONDS", default_value_t = 5.0)]
    pub shutdown_grace_seconds: f64,
    /// debug, info, warning, error.
    #[arg(long, env = "MCP_ADAPTER_LOG_LEVEL", default_value = "info")]
    pub log_level: String,
    /// Who may call: `kubernetes` or `none`.
    #[arg(long, env = "MCP_ADAPTER_AUTH", value_enum, default_value = "kubernetes")]
    pub auth: AuthMode,
    /// The access configuration (JSON): keys, audience, who may call, revoked Pods.
    #[arg(long, env = "MCP_ADAPTER_ACCESS_CONFIG")]
    pub access_config: Option<PathBuf>,
    /// Who may read `/metrics`: a file of the access configuration's format (the issuer's
    /// keys, the audience `metrics.mcp-operator.dev`, the scrapers' ServiceAccounts in
    /// `allow.operators`), re-read when it changes; a scrape then needs such a token (401
    /// without one, 403 for a ServiceAccount not listed). Unset: `/metrics` answers anyone.
    #[arg(long, env = "MCP_ADAPTER_METRICS_ACCESS")]
    pub metrics_access: Option<PathBuf>,
    /// Request bodies admitted and not yet answered, all clients together; past it 503.
    #[arg(long, env = "MCP_ADAPTER_MAX_INFLIGHT_BYTES", default_value_t = 32 << 20)]
    pub max_inflight_bytes: usize,
    /// A client that has not sent a request's headers this long is disconnected.
    #[arg(long, env = "MCP_ADAPTER_HEADER_TIMEOUT_SECONDS", default_value_t = 10.0)]
    pub header_timeout_seconds: f64,
    /// A client that has not sent a request's body this long after its headers is disconnected.
    #[arg(long, env = "MCP_ADAPTER_BODY_TIMEOUT_SECONDS", default_value_t = 30.0)]
    pub body_timeout_seconds: f64,
    /// One JSON line per `tools/call` served (verified caller, tool, outcome, duration;
    /// never arguments or values): `-` for stdout, else a file appended to.
    #[arg(long, env = "MCP_ADAPTER_AUDIT")]
    pub audit: Option<String>,
    /// Talk to a server in another container through the FIFOs `DIR/stdin` and `DIR/stdout`
    /// instead of starting a command (managed mode's Pods).
    #[arg(long, env = "MCP_ADAPTER_STDIO_FIFO_DIR")]
    pub stdio_fifo_dir: Option<PathBuf>,
    /// Create the two FIFOs in --stdio-fifo-dir and exit (the Pod's init container).
    #[arg(long)]
    pub make_fifos: bool,
    /// Front mode: no stdio child; forward every checked request to this HTTP server of the
    /// same Pod (an `http://` URL on the loopback address), its answer streamed back.
    #[arg(long, env = "MCP_ADAPTER_UPSTREAM_URL")]
    pub upstream_url: Option<String>,
    /// One child per MCP session (legacy: per `Mcp-Session-Id`; 2026-07-28: per caller)
    /// instead of one shared child. With --stdio-fifo-dir each child is a connection to
    /// `DIR/spawn.sock`, where the server container's `mcp-stdio-exec --spawn-socket` starts
    /// one server per connection.
    #[arg(
        long,
        env = "MCP_ADAPTER_CHILD_PER_SESSION",
        value_parser = clap::builder::FalseyValueParser::new()
    )]
    pub child_per_session: bool,
    /// With --child-per-session: most children at once; a new session takes an idle child's
    /// place by the sessions' fair rule, else gets 503.
    #[arg(long, env = "MCP_ADAPTER_MAX_CHILDREN", default_value_t = 32)]
    pub max_children: usize,
    /// With --child-per-session: a child serving no request this long is stopped (its
    /// session then gets 404).
    #[arg(long, env = "MCP_ADAPTER_CHILD_IDLE_SECONDS", default_value_t = 300.0)]
    pub child_idle_seconds: f64,
    /// With --child-per-session: a new child not ready (`initialize` answered) in time is
    /// killed, and the request that needed it gets 503.
    #[arg(long, env = "MCP_ADAPTER_SPAWN_TIMEOUT_SECONDS", default_value_t = 60.0)]
    pub spawn_timeout_seconds: f64,
    /// The stdio server's command and its arguments.
    #[arg(last = true)]
    pub command: Vec<String>,
}

fn seconds(value: f64) -> Duration {
    Duration::from_secs_f64(value.max(0.0))
}

impl AdapterConfig {
    pub fn session_idle(&self) -> Duration {
        seconds(self.session_idle_seconds)
    }
    pub fn request_timeout(&self) -> Duration {
        seconds(self.request_timeout_seconds)
    }
    pub fn handshake_timeout(&self) -> Duration {
        seconds(self.handshake_timeout_seconds)
    }
    pub fn restart_backoff(&self) -> Duration {
        seconds(self.restart_backoff_seconds)
    }
    pub fn restart_window(&self) -> Duration {
        seconds(self.restart_window_seconds)
    }
    pub fn header_timeout(&self) -> Duration {
        seconds(self.header_timeout_seconds)
    }
    pub fn body_timeout(&self) -> Duration {
        seconds(self.body_timeout_seconds)
    }
    pub fn shutdown_grace(&self) -> Duration {
        seconds(self.shutdown_grace_seconds)
    }
    pub fn child_idle(&self) -> Duration {
        seconds(self.child_idle_seconds)
    }
    pub fn spawn_timeout(&self) -> Duration {
        seconds(self.spawn_timeout_seconds)
    }

    /// What is wrong with the settings together, for a start that stops with exit 2.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.make_fifos {
            if self.stdio_fifo_dir.is_none() {
                problems.push("--make-fifos needs --stdio-fifo-dir".into());
            }
            return problems;
        }
        match (&self.upstream_url, &self.stdio_fifo_dir, self.command.is_empty()) {
            (Some(_), _, _) if self.child_per_session => {
                problems.push("--child-per-session starts stdio children, not --upstream-url".into())
            }
            (Some(url), None, true) => problems.extend(super::upstream::url_problem(url)),
            (Some(_), _, _) => {
                problems.push("--upstream-url takes no server command and no --stdio-fifo-dir".into())
            }
            (None, Some(_), false) => {
                problems.push("pass either --stdio-fifo-dir or a server command, not both".into())
            }
            (None, None, true) => problems
                .push("no server: pass its command after --, --stdio-fifo-dir or --upstream-url".into()),
            _ => {}
        }
        if !self.path.starts_with('/') {
            problems.push(format!("--path must start with '/', not {:?}", self.path));
        }
        if self.auth == AuthMode::Kubernetes && self.access_config.is_none() {
            problems.push("--auth kubernetes needs --access-config (or --auth none for no check)".into());
        }
        for (name, value) in [
            ("--max-sessions", self.max_sessions),
            ("--max-inflight", self.max_inflight),
            ("--stream-queue", self.stream_queue),
            ("--max-body-bytes", self.max_body_bytes),
            ("--max-line-bytes", self.max_line_bytes),
            ("--max-children", self.max_children),
        ] {
            if value == 0 {
                problems.push(format!("{name} must be at least 1"));
            }
        }
        for (name, value) in [
            ("--child-idle-seconds", self.child_idle_seconds),
            ("--spawn-timeout-seconds", self.spawn_timeout_seconds),
        ] {
            if value <= 0.0 {
                problems.push(format!("{name} must be positive"));
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        config: AdapterConfig,
    }

    fn parse(args: &[&str]) -> AdapterConfig {
        let argv = ["adapter"].iter().chain(args).chain(&["--", "true"]);
        Cli::try_parse_from(argv).unwrap().config
    }

    #[test]
    fn metrics_access_is_a_file_and_unset_leaves_metrics_open() {
        let guarded = parse(&["--auth=none", "--metrics-access=/etc/mcp/metrics.json"]);
        assert_eq!(
            guarded.metrics_access.as_deref(),
            Some(std::path::Path::new("/etc/mcp/metrics.json"))
        );
        assert!(guarded.problems().is_empty(), "{:?}", guarded.problems());
        if std::env::var_os("MCP_ADAPTER_METRICS_ACCESS").is_none() {
            assert_eq!(parse(&["--auth=none"]).metrics_access, None);
        }
    }

    #[test]
    fn a_child_per_session_takes_a_command_or_the_fifo_dir_never_an_upstream() {
        let pooled = parse(&["--auth=none", "--child-per-session", "--max-children=3"]);
        assert!(pooled.child_per_session && pooled.max_children == 3);
        assert!(pooled.problems().is_empty(), "{:?}", pooled.problems());
        let mut fronted = pooled.clone();
        (fronted.command, fronted.upstream_url) = (Vec::new(), Some("http://127.0.0.1:1/mcp".into()));
        assert!(
            fronted
                .problems()
                .iter()
                .any(|p| p.contains("--child-per-session"))
        );
        let mut zero = pooled;
        zero.max_children = 0;
        assert!(zero.problems().iter().any(|p| p.contains("--max-children")));
    }
}
