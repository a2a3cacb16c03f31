//! The running adapter: the child (supervised: started, handshaken, restarted with back-off,
//! a crash loop ends the adapter), the router behind one lock, health and readiness, and
//! shutdown. Owns the child's lifecycle and the lines written to it; leaves HTTP to `front`.
//! With `--child-per-session` each child has a core of its own, run once (`run_once`: a
//! child that ends is not restarted, its session ends with it) and stopped by `pool_front`.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc, oneshot};

use super::child::{self, Line, LineReader};
use super::config::AdapterConfig;
use super::metrics::Metrics;
use super::oversized;
use super::router::{CallSink, Router};
use crate::jsonrpc::INTERNAL_ERROR;
use crate::sessions::Sessions;

pub const CHILD_EXITED: &str = "The MCP server process exited; the call was not answered";
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// What the adapter declares to its child: the union of what its clients may answer. Each
/// server→client request then reaches only a session whose client declared it.
fn child_initialize_params() -> Value {
    json!({
        "protocolVersion": rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE.as_str(),
        "capabilities": {"roots": {"listChanged": true}, "sampling": {}, "elicitation": {}},
        "clientInfo": {"name": "mcp-operator-adapter", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// The child as the rest of the adapter sees it.
#[derive(Default)]
struct ChildState {
    writer: Option<mpsc::UnboundedSender<Vec<u8>>>,
    pid: Option<u32>,
    /// The child's InitializeResult, once it answered: ready.
    init_result: Option<Arc<Value>>,
    restarts: u64,
    /// The resources this child was asked to report updates of, for listen streams.
    subscribed: HashSet<String>,
}

/// The adapter's shared state.
pub struct Core {
    pub config: AdapterConfig,
    router: Mutex<Router>,
    child: Mutex<ChildState>,
    /// Shared by every child's core with `--child-per-session`.
    pub metrics: Arc<Metrics>,
    shutdown: Notify,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic aborts the process (profile.release), so a poisoned lock is never seen there.
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Core {
    pub fn new(config: AdapterConfig, metrics: Arc<Metrics>) -> Arc<Self> {
        let sessions = Sessions::new(config.max_sessions, config.session_idle());
        let mut router = Router::new(sessions, config.max_inflight);
        // A child of its own serves one caller alone: what it says belongs to that caller.
        router.sole_caller = config.child_per_session;
        Arc::new(Self {
            metrics,
            config,
            router: Mutex::new(router),
            child: Mutex::new(ChildState::default()),
            shutdown: Notify::new(),
        })
    }

    /// The router, locked; callers write the lines it returns with `write` after unlocking.
    pub fn router(&self) -> MutexGuard<'_, Router> {
        lock(&self.router)
    }

    /// Write lines to the child (dropped when it is gone: its calls fail with it).
    pub fn write<I: IntoIterator<Item = Vec<u8>>>(&self, lines: I) {
        let child = lock(&self.child);
        if let Some(writer) = &child.writer {
            for line in lines {
                let _ = writer.send(line);
            }
        }
    }

    pub fn init_result(&self) -> Option<Arc<Value>> {
        let child = lock(&self.child);
        child.writer.as_ref().and(child.init_result.clone())
    }

    pub fn ready(&self) -> bool {
        self.init_result().is_some() && self.router().sessions.has_room()
    }

    /// Ask the child for `resources/updated` on `uri` (once per child), for listen streams.
    pub fn subscribe_child(&self, uri: &str) {
        if !lock(&self.child).subscribed.insert(uri.to_owned()) {
            return;
        }
        let (answer, _) = oneshot::channel();
        let sink = CallSink::new(answer, None);
        let line = self
            .router()
            .internal_request("resources/subscribe", json!({"uri": uri}), sink);
        self.write([line]);
    }

    /// A 2026-07-28 caller's answer (from `inputResponses`) to what the child asked it.
    pub fn answer_asked(&self, child_request_id: &Value, result: Value) {
        let line = self.router().answer_asked(child_request_id, result);
        if let Some(line) = line {
            self.write([line]);
        }
    }

    /// Cancel a call at the child (a disconnect, a timeout).
    pub fn cancel(&self, child_id: u64, reason: &str) {
        let line = self.router().cancel(child_id, reason);
        self.write(line);
    }

    /// End a legacy session: its calls are cancelled at the child.
    pub fn end_session(&self, session_id: &str, reason: &str) {
        let lines = self.router().end_session(session_id, reason);
        self.write(lines);
    }

    /// `/healthz`'s and `/readyz`'s body: the child, sessions and calls, the session limits;
    /// whether the child runs.
    pub fn health(&self) -> (bool, Value) {
        let (pid, restarts, running, ready) = {
            let child = lock(&self.child);
            (
                child.pid,
                child.restarts,
                child.writer.is_some(),
                child.init_result.is_some(),
            )
        };
        let router = self.router();
        let body = json!({
            "child": {"running": running, "ready": running && ready, "pid": pid, "restarts": restarts},
            "auth": self.config.auth.name(),
            "sessions": router.sessions.len(),
            "sessionVersions": router.sessions.versions(),
            "inflight": router.inflight(),
            "unattributed": {"log": router.unattributed_log, "request": router.unattributed_request},
            "limits": {"maxSessions": router.sessions.limit(), "sessionsEvicted": router.sessions.evicted},
        });
        (running, body)
    }

    /// Whether the child serves anything now: a call in flight (a parked round included), a
    /// session in a request or holding its GET stream, a listen stream.
    pub fn busy(&self) -> bool {
        let mut router = self.router();
        router.listeners.retain(|l| l.offer("", &Value::Null));
        router.inflight() > 0 || !router.listeners.is_empty() || router.sessions.iter().any(|s| !s.idle())
    }

    /// Serve one child until it ends or `request_shutdown`, without restarting it.
    pub async fn run_once(self: Arc<Self>, connection: child::Connection) {
        self.serve_child(connection).await;
    }

    pub fn request_shutdown(&self) {
        self.shutdown.notify_one();
    }

    /// Run the child until shutdown: start, handshake, serve, restart with back-off. Returns
    /// Err when the crash-loop guard trips (the adapter then exits 1 and the kubelet takes over).
    pub async fn supervise(self: Arc<Self>) -> Result<(), String> {
        let mut backoff = self.config.restart_backoff();
        let mut exits: VecDeque<Instant> = VecDeque::new();
        loop {
            let started = Instant::now();
            let connected = match &self.config.stdio_fifo_dir {
                Some(directory) => tokio::select! {
                    connected = child::connect_fifos(directory) => connected,
                    _ = self.shutdown.notified() => return Ok(()),
                },
                None => child::spawn(&self.config.command),
            };
            let outcome = match connected {
                Ok(connection) => self.clone().serve_child(connection).await,
                Err(error) => {
                    tracing::error!(
                        "Failed to start the MCP server {:?}: {error}",
                        self.config.command
                    );
                    ChildOutcome::Exited(None)
                }
            };
            if let ChildOutcome::Shutdown = outcome {
                return Ok(());
            }
            if self.config.stdio_fifo_dir.is_some() {
                // The kubelet restarts the server container, with its own back-off; we wait
                // for the next one to open the FIFOs.
                lock(&self.child).restarts += 1;
                self.metrics.child_restarts.inc();
                continue;
            }
            let now = Instant::now();
            exits.push_back(now);
            while exits
                .front()
                .is_some_and(|t| now.duration_since(*t) > self.config.restart_window())
            {
                exits.pop_front();
            }
            if exits.len() > self.config.max_restarts {
                return Err(format!(
                    "the MCP server exited {} times within {:.0}s",
                    exits.len(),
                    self.config.restart_window_seconds
                ));
            }
            if now.duration_since(started) > MAX_BACKOFF {
                backoff = self.config.restart_backoff(); // it ran well for a while
            }
            tracing::info!("Restarting the MCP server in {:.1}s", backoff.as_secs_f64());
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = self.shutdown.notified() => return Ok(()),
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
            lock(&self.child).restarts += 1;
            self.metrics.child_restarts.inc();
        }
    }

    async fn serve_child(self: Arc<Self>, connection: child::Connection) -> ChildOutcome {
        let child::Connection {
            mut process,
            stdin,
            stdout,
            name,
        } = connection;
        let (writer, lines) = mpsc::unbounded_channel();
        {
            let mut state = lock(&self.child);
            state.writer = Some(writer);
            state.pid = process.as_ref().map(|(_, pid)| *pid);
            state.init_result = None;
        }
        tracing::info!("Connected to the MCP server ({name}): {:?}", self.config.command);
        let writing = tokio::spawn(child::write_lines(stdin, lines));
        let mut reading = tokio::spawn(self.clone().read_child(stdout));
        let handshake = tokio::spawn(self.clone().handshake(name.clone()));
        let outcome = tokio::select! {
            status = wait_process(&mut process) => ChildOutcome::Exited(status),
            _ = &mut reading => ChildOutcome::Exited(None), // its stdout ended: it is gone
            _ = self.shutdown.notified() => ChildOutcome::Shutdown,
        };
        {
            let mut state = lock(&self.child);
            state.writer = None;
            state.init_result = None;
        }
        handshake.abort();
        let reason = match outcome {
            ChildOutcome::Shutdown => "The adapter is shutting down",
            ChildOutcome::Exited(_) => CHILD_EXITED,
        };
        lock(&self.child).subscribed.clear();
        let (failed, reset) = self.router().fail_all(INTERNAL_ERROR, reason);
        if let ChildOutcome::Exited(code) = outcome {
            tracing::warn!(
                "MCP server ({name}) exited (code {}): failed {failed} calls in flight, reset {reset} sessions",
                code.map_or_else(|| "none".to_owned(), |c| c.to_string())
            );
        }
        if let Some((child, pid)) = process.as_mut() {
            child::stop_group(child, *pid, self.config.shutdown_grace()).await;
        }
        reading.abort();
        writing.abort(); // closes our end of its stdin: a FIFO server sees end-of-file
        outcome
    }

    async fn read_child(self: Arc<Self>, stdout: Box<dyn tokio::io::AsyncRead + Send + Unpin>) {
        let mut reader = LineReader::new(stdout, self.config.max_line_bytes);
        while let Ok(Some(line)) = reader.next().await {
            match line {
                Line::Text(bytes) => match serde_json::from_slice::<Value>(&bytes) {
                    Ok(message) if message.is_object() => {
                        let replies = self.router().route_from_child(message);
                        self.write(replies);
                    }
                    Ok(_) => {
                        tracing::warn!("Dropped a stdout line of the child that is not a JSON-RPC message")
                    }
                    Err(_) => {
                        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
                        tracing::warn!("Dropped a stdout line that is not JSON from the child: {text:?}");
                    }
                },
                Line::TooLong { head, tail, size } => {
                    let limit = self.config.max_line_bytes;
                    let id = oversized::response_id(&head, &tail);
                    tracing::warn!(
                        "Dropped a stdout line of {size} bytes from the child (over --max-line-bytes {limit}): {}",
                        if id.is_some() {
                            "the call it answers fails"
                        } else {
                            "no answer's id in it"
                        }
                    );
                    if let Some(id) = id {
                        let replies = self
                            .router()
                            .route_from_child(oversized::too_large_answer(&id, size, limit));
                        self.write(replies);
                    }
                }
            }
        }
    }

    async fn handshake(self: Arc<Self>, name: String) {
        let (answer, answered) = oneshot::channel();
        let line = self.router().internal_request(
            "initialize",
            child_initialize_params(),
            CallSink::new(answer, None),
        );
        self.write([line]);
        let reply = match tokio::time::timeout(self.config.handshake_timeout(), answered).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => return, // the child went first
            Err(_) => {
                tracing::error!(
                    "MCP server ({name}) did not answer initialize within {:.0}s; restarting it",
                    self.config.handshake_timeout_seconds
                );
                self.drop_child();
                return;
            }
        };
        let Some(result) = reply.get("result").filter(|r| r.is_object()) else {
            let error = reply.get("error").map(ToString::to_string).unwrap_or_default();
            tracing::error!("MCP server ({name}) refused initialize: {error}");
            self.drop_child();
            return;
        };
        if let Err(error) = serde_json::from_value::<rmcp::model::InitializeResult>(result.clone()) {
            tracing::warn!("MCP server's InitializeResult does not validate: {error}");
        }
        self.write([b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n".to_vec()]);
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("?").to_owned();
        let info = result.get("serverInfo");
        let (name, version) = (
            text(info.and_then(|i| i.get("name"))),
            text(info.and_then(|i| i.get("version"))),
        );
        let protocol = text(result.get("protocolVersion"));
        tracing::info!("MCP server ({name}) is ready: {name} {version}, protocol {protocol}");
        if result.get("capabilities").and_then(|c| c.get("tools")).is_some() {
            // Learn the tools' x-mcp-header schemas before the first 2026-07-28 call needs them.
            let (answer, _) = oneshot::channel();
            let line = self
                .router()
                .internal_request("tools/list", json!({}), CallSink::new(answer, None));
            self.write([line]);
        }
        lock(&self.child).init_result = Some(Arc::new(result.clone()));
    }

    /// Give up on a child that failed its handshake: our process is killed (the supervisor
    /// restarts it); a FIFO server is not ours, so it stays unready until it exits.
    fn drop_child(&self) {
        if let Some(pid) = lock(&self.child).pid {
            // SAFETY: signals the child's own process group.
            unsafe {
                libc::kill(-(pid as i32), libc::SIGKILL);
            }
        }
    }

    /// Drop idle sessions once a second, until shutdown.
    pub async fn expire_sessions(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let expired: Vec<String> = self
                .router()
                .sessions
                .expire(Instant::now())
                .into_iter()
                .map(|s| s.id)
                .collect();
            if !expired.is_empty() {
                tracing::debug!("Dropped {} idle sessions", expired.len());
            }
        }
    }
}

/// The exit code of our process, or never for a child that is not ours.
async fn wait_process(process: &mut Option<(tokio::process::Child, u32)>) -> Option<i32> {
    match process {
        Some((child, _)) => child.wait().await.ok().and_then(|s| s.code()),
        None => std::future::pending().await,
    }
}

enum ChildOutcome {
    Exited(Option<i32>),
    Shutdown,
}
