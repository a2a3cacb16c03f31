//! The running bridge: the configuration, every server's session and last listing, the
//! catalog built from them, the agents' legacy sessions, and the call pipeline of this
//! slice — find the tool, validate its arguments, call its server under the original name,
//! turn a failure into the structured tool error, write the audit line.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio::sync::Notify;

use super::audit::{AuditSink, Record};
use super::catalog::{Catalog, Entry};
use super::config::BridgeConfig;
use super::cursor::CursorCodec;
use super::errors::{ToolError, quoted};
use super::metrics::Metrics;
use super::prompts::PromptCatalog;
use super::scrub::Scrubber;
use super::upstream::{Failure, SseReader, Upstream, header_problem, next_event, secret_values};
use super::validate;
use crate::sessions::Sessions;

/// A refusal hint names at most this many tools the agent may call instead.
const MAX_LISTED_TOOLS: usize = 10;
/// An upstream's error message is cut to this many characters in a hint.
const MAX_UPSTREAM_MESSAGE: usize = 300;
/// A server that is down is listed again after 1 s, doubling, at most 60 s.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A change stream that ended or could not be opened is opened again after this pause.
const CHANGES_REOPEN: Duration = Duration::from_secs(2);
/// Legacy sessions at once, and how long an unused one is kept.
const MAX_SESSIONS: usize = 256;
const SESSION_IDLE: Duration = Duration::from_secs(3600);

/// One server as `/readyz` reports it.
#[derive(Debug, Default, Clone)]
pub struct ServerState {
    pub listed_once: bool,
    pub up: bool,
    pub protocol: Option<String>,
    /// Its last successful listing (kept while it is down).
    pub tools: Option<Vec<Value>>,
    /// Its last prompt listing, when it has prompts.
    pub prompts: Option<Vec<Value>>,
    /// The capabilities it declared (`{}` until it was reached).
    pub capabilities: Value,
    /// Why it cannot be called at all.
    pub problem: Option<String>,
}

pub struct Core {
    pub config: BridgeConfig,
    pub run: String,
    pub upstreams: Vec<Option<Arc<Upstream>>>,
    states: Mutex<Vec<ServerState>>,
    catalog: Mutex<Arc<Catalog>>,
    prompts: Mutex<Arc<PromptCatalog>>,
    /// Signs the cursors of listings walked across servers.
    pub cursors: CursorCodec,
    sessions: Mutex<Sessions>,
    pub audit: AuditSink,
    pub metrics: Metrics,
    /// Masks every header value in use in what the agent, the log and the audit see.
    pub scrubber: Scrubber,
    pub inflight: AtomicUsize,
    /// Every server's tools are listed again this often while it is up.
    relist_every: Duration,
    pub stopping: AtomicBool,
    /// Per server: list it again now (a call could not reach it, or it announced a change).
    relist: Vec<Notify>,
}

impl Core {
    pub fn new(config: BridgeConfig, audit: AuditSink, relist_every: Duration) -> Arc<Self> {
        let client = super::upstream::http_client();
        let mut states = Vec::new();
        let mut upstreams = Vec::new();
        let metrics = Metrics::default();
        for server in &config.servers {
            let key = server.key();
            let problem = header_problem(server);
            metrics.set_misconfigured(&key, problem.as_ref().map(|(reason, _)| *reason));
            let made = match problem {
                Some((_, why)) => Err(why),
                None => Upstream::new(server.clone(), client.clone()),
            };
            match made {
                Ok(upstream) => {
                    upstreams.push(Some(Arc::new(upstream)));
                    states.push(ServerState::default());
                }
                Err(why) => {
                    tracing::error!("Could not use server {key}: {why}");
                    metrics.set_up(&key, false);
                    upstreams.push(None);
                    states.push(ServerState {
                        listed_once: true,
                        problem: Some(why),
                        ..ServerState::default()
                    });
                }
            }
        }
        let scrubber = Scrubber::new(
            config
                .servers
                .iter()
                .flat_map(secret_values)
                .collect::<Vec<_>>()
                .iter()
                .map(String::as_str),
        );
        let config_len_notifies = config.servers.iter().map(|_| Notify::new()).collect();
        Arc::new(Self {
            run: format!("{}/{}", config.run.namespace, config.run.name),
            config,
            upstreams,
            states: Mutex::new(states),
            catalog: Mutex::new(Arc::new(Catalog::default())),
            prompts: Mutex::new(Arc::new(PromptCatalog::default())),
            cursors: CursorCodec::default(),
            sessions: Mutex::new(Sessions::new(MAX_SESSIONS, SESSION_IDLE)),
            audit,
            metrics,
            scrubber,
            inflight: AtomicUsize::new(0),
            relist_every,
            stopping: AtomicBool::new(false),
            relist: config_len_notifies,
        })
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.lock().expect("the catalog lock").clone()
    }

    pub fn prompts(&self) -> Arc<PromptCatalog> {
        self.prompts.lock().expect("the prompt lock").clone()
    }

    /// The bridge's server capabilities: tools always; prompts and resources when a server
    /// that can be called has them (no subscriptions in this slice).
    pub fn capabilities(&self) -> Value {
        let mut capabilities = json!({"tools": {"listChanged": true}});
        let states = self.states();
        let offered = |feature: &str| {
            states
                .iter()
                .any(|s| s.problem.is_none() && s.capabilities.get(feature).is_some())
        };
        if offered("prompts") {
            capabilities["prompts"] = json!({"listChanged": true});
        }
        if offered("resources") {
            capabilities["resources"] = json!({"listChanged": true, "subscribe": false});
        }
        capabilities
    }

    pub fn sessions(&self) -> MutexGuard<'_, Sessions> {
        self.sessions.lock().expect("the session lock")
    }

    pub fn states(&self) -> Vec<ServerState> {
        self.states.lock().expect("the state lock").clone()
    }

    /// Ready once every server's first listing is done, successful or not.
    pub fn ready(&self) -> bool {
        self.states().iter().all(|s| s.listed_once)
    }

    /// The bridge's own InitializeResult: its identity and the capabilities it serves.
    pub fn init_result(&self, version: &str) -> Value {
        json!({
            "protocolVersion": version,
            "capabilities": self.capabilities(),
            "serverInfo": {"name": "mcp-operator-bridge", "version": env!("CARGO_PKG_VERSION")},
        })
    }

    fn update(&self, index: usize, change: impl FnOnce(&mut ServerState)) {
        let mut states = self.states.lock().expect("the state lock");
        change(&mut states[index]);
    }

    /// Build the catalog from the listings; tell the agents' streams when the tools changed.
    fn rebuild(&self) {
        let states = self.states();
        let prompts: Vec<Option<Vec<Value>>> = states.iter().map(|s| s.prompts.clone()).collect();
        *self.prompts.lock().expect("the prompt lock") =
            Arc::new(PromptCatalog::build(&self.config.servers, &prompts));
        let listings: Vec<Option<Vec<Value>>> = states.into_iter().map(|s| s.tools).collect();
        let fresh = Arc::new(Catalog::build(&self.config.servers, &listings, &self.scrubber));
        let changed = {
            let mut catalog = self.catalog.lock().expect("the catalog lock");
            let changed = catalog.tools() != fresh.tools();
            self.metrics.set_catalog_tools(fresh.entries.len());
            *catalog = fresh;
            changed
        };
        if changed {
            let notification = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
            for session in self.sessions().iter() {
                session.push(&notification);
            }
        }
    }

    /// List one server's tools while the bridge runs: at start, again every few minutes,
    /// and with back-off while it is down (its tools stay listed meanwhile).
    pub async fn follow(self: Arc<Self>, index: usize) {
        let Some(upstream) = self.upstreams[index].clone() else {
            return;
        };
        let key = upstream.server.key();
        let deadline = Duration::from_secs(upstream.server.timeout_seconds());
        let mut backoff = Duration::from_secs(1);
        while !self.stopping.load(Ordering::Relaxed) {
            match upstream.list_all("tools/list", "tools", deadline).await {
                Ok(tools) => {
                    let negotiated = upstream.negotiated().await.unwrap_or_default();
                    let capabilities = negotiated.capabilities;
                    let prompts = if capabilities.get("prompts").is_some() {
                        match upstream.list_all("prompts/list", "prompts", deadline).await {
                            Ok(prompts) => Some(prompts),
                            Err(failure) => {
                                let told = self.scrubber.text(&failure.describe());
                                tracing::warn!("Could not list the prompts of server {key}: {told}");
                                self.states()[index].prompts.clone()
                            }
                        }
                    } else {
                        None
                    };
                    let protocol = Some(negotiated.protocol_version).filter(|v| !v.is_empty());
                    tracing::info!(
                        "Listed {} tools of {key} ({})",
                        tools.len(),
                        protocol.as_deref().unwrap_or("?")
                    );
                    self.metrics.observe_listing(&key, true);
                    self.update(index, |state| {
                        state.listed_once = true;
                        state.up = true;
                        state.protocol = protocol;
                        state.tools = Some(tools);
                        state.prompts = prompts;
                        state.capabilities = capabilities;
                    });
                    self.rebuild();
                    backoff = Duration::from_secs(1);
                    tokio::select! {
                        () = tokio::time::sleep(self.relist_every) => {}
                        () = self.relist[index].notified() => {}
                    }
                }
                Err(failure) => {
                    let told = self.scrubber.text(&failure.describe());
                    tracing::warn!("Could not list the tools of server {key}: {told}");
                    upstream.reset().await;
                    self.metrics.observe_listing(&key, false);
                    self.update(index, |state| {
                        state.listed_once = true;
                        state.up = false;
                    });
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// Keep the stream the server announces tool changes on open, and list the server
    /// again whenever it opens (a change announced before it opened reached no one), when a
    /// 2026-07-28 server acknowledges the subscription, and at every `list_changed`.
    pub async fn follow_changes(self: Arc<Self>, index: usize) {
        let Some(upstream) = self.upstreams[index].clone() else {
            return;
        };
        while !self.stopping.load(Ordering::Relaxed) {
            if !self.states()[index].listed_once {
                tokio::time::sleep(CHANGES_REOPEN).await;
                continue;
            }
            let Ok(Some(mut body)) = upstream.open_changes().await else {
                tokio::time::sleep(CHANGES_REOPEN).await;
                continue;
            };
            let modern = upstream.negotiated().await.is_some_and(|n| n.modern);
            if !modern {
                self.relist[index].notify_one();
            }
            let mut reader = SseReader::default();
            while let Some(message) = next_event(&mut body, &mut reader).await {
                let method = message.get("method").and_then(Value::as_str);
                if matches!(
                    method,
                    Some("notifications/tools/list_changed" | "notifications/subscriptions/acknowledged")
                ) {
                    self.relist[index].notify_one();
                }
            }
            tokio::time::sleep(CHANGES_REOPEN).await;
        }
    }

    /// One `tools/call` (params an object, its name a string): always a `CallToolResult`.
    pub async fn call(&self, params: &Map<String, Value>) -> Value {
        let started = Instant::now();
        let arrived = time::OffsetDateTime::now_utc();
        let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
        let arguments = params.get("arguments").filter(|a| !a.is_null());
        let empty = json!({});
        let hashed = arguments.unwrap_or(&empty);
        let catalog = self.catalog();
        let entry = catalog.get(name);
        let server = entry.as_ref().map(|e| &self.config.servers[e.server]);
        let mut attempts = 0;
        let (outcome, result) = match &entry {
            None => {
                let error = self.not_allowlisted(&catalog, name);
                (error.code, error.to_result())
            }
            Some(entry) => {
                let (errors, problem) = validate::check(&entry.schema, arguments);
                if !errors.is_empty() {
                    let error = validate::invalid_arguments(name, &errors, problem.as_deref());
                    (error.code, error.to_result())
                } else {
                    attempts = 1;
                    match self.send(entry, name, arguments).await {
                        Ok(result) if result.get("isError") == Some(&Value::Bool(true)) => {
                            ("upstream_error", self.scrubber.json(result))
                        }
                        Ok(result) => ("ok", result),
                        Err(error) => (error.code, error.to_result()),
                    }
                }
            }
        };
        let seconds = started.elapsed().as_secs_f64();
        let server_key = server.map(super::config::Server::key);
        self.metrics
            .observe_call(server_key.as_deref(), name, outcome, seconds);
        self.audit.write(&Record {
            time: arrived,
            run: &self.run,
            identity: self.config.identity.as_ref(),
            server: server_key.clone(),
            tool: entry.as_ref().map(|_| name.to_owned()),
            sent_name: params.get("name").cloned(),
            original_tool: entry.as_ref().map(|e| e.original.clone()),
            outcome,
            duration_ms: seconds * 1000.0,
            attempts,
            arguments: Some(hashed),
        });
        result
    }

    /// The audit line of a request that was not a readable call.
    pub fn audit_invalid(&self, sent_name: Option<Value>) {
        self.metrics.observe_call(None, "", "invalid_request", 0.0);
        self.audit.write(&Record {
            time: time::OffsetDateTime::now_utc(),
            run: &self.run,
            identity: self.config.identity.as_ref(),
            server: None,
            tool: None,
            sent_name: Some(sent_name.unwrap_or(Value::Null)),
            original_tool: None,
            outcome: "invalid_request",
            duration_ms: 0.0,
            attempts: 0,
            arguments: None,
        });
    }

    fn not_allowlisted(&self, catalog: &Catalog, name: &str) -> ToolError {
        let similar = catalog.similar(name);
        let allowed = if similar.is_empty() {
            catalog.allowed_near(name)
        } else {
            similar.clone()
        };
        let shown: Vec<String> = allowed.iter().take(MAX_LISTED_TOOLS).cloned().collect();
        let listing = if !similar.is_empty() {
            format!(" Similar tools you may call: {}.", shown.join(", "))
        } else if !shown.is_empty() {
            let more = allowed.len() - shown.len();
            let tail = if more > 0 {
                format!(" and {more} more (tools/list shows them all).")
            } else {
                ".".to_owned()
            };
            format!(" Tools you may call: {}{tail}", shown.join(", "))
        } else {
            String::new()
        };
        let head = name.split('_').next().unwrap_or_default();
        let broken: Vec<(String, String)> = self
            .config
            .servers
            .iter()
            .zip(self.states())
            .filter(|(server, state)| server.prefix == head && state.problem.is_some())
            .map(|(server, state)| (server.key(), state.problem.unwrap_or_default()))
            .collect();
        let mut listing = listing;
        for (key, problem) in &broken {
            listing.push_str(&format!(
                " Server {key} cannot be called: {}.",
                self.scrubber.text(problem)
            ));
        }
        let mut error = ToolError::new(
            "not_allowlisted",
            format!(
                "The tool {} is not available to this agent; the call was not sent.{listing}",
                quoted(name, 64)
            ),
        )
        .with("similar", json!(similar))
        .with("allowed", json!(shown));
        if !broken.is_empty() {
            error = error.with(
                "misconfigured",
                json!(broken.into_iter().map(|(k, _)| k).collect::<Vec<_>>()),
            );
        }
        error
    }

    /// The call at its server, under its original name, within the server's deadline; a
    /// failure as the structured tool error, in the Python bridge's words.
    async fn send(
        &self,
        entry: &Entry,
        exposed: &str,
        arguments: Option<&Value>,
    ) -> Result<Value, ToolError> {
        let index = entry.server;
        let server = &self.config.servers[index];
        let key = server.key();
        let scrub = |text: &str| self.scrubber.text(text);
        let Some(upstream) = &self.upstreams[index] else {
            let problem = self.states()[index].problem.clone().unwrap_or_default();
            return Err(misconfigured(&key, &problem));
        };
        let mut params = Map::new();
        params.insert("name".into(), json!(entry.original));
        params.insert(
            "arguments".into(),
            arguments.cloned().unwrap_or_else(|| json!({})),
        );
        let seconds = server.timeout_seconds();
        match upstream.request("tools/call", params, Duration::from_secs(seconds)).await {
            Ok(result) => {
                self.update(index, |state| state.up = true);
                self.metrics.set_up(&key, true);
                Ok(super::aggregate::plain_result(result))
            }
            Err(Failure::Rpc { code, message, .. }) => {
                let message = if message.is_empty() { "no message".to_owned() } else { message };
                let hint = format!(
                    "Server {key} refused {exposed} (JSON-RPC error {code}): {}",
                    cut(&scrub(&message), MAX_UPSTREAM_MESSAGE)
                );
                Err(ToolError::new("upstream_error", hint)
                    .with("server", json!(key))
                    .with("rpcCode", json!(code)))
            }
            Err(Failure::Misconfigured(why)) => Err(misconfigured(&key, &scrub(&why))),
            Err(Failure::Timeout) => Err(ToolError::new(
                "timeout",
                format!(
                    "Server {key} did not answer {exposed} within {seconds} s. The call may still have run: check its effect before repeating it."
                ),
            )
            .with("server", json!(key))
            .with("timeoutSeconds", json!(seconds))),
            Err(failure) => {
                upstream.reset().await;
                self.update(index, |state| state.up = false);
                self.metrics.set_up(&key, false);
                self.relist[index].notify_one();
                let reason = cut(&scrub(&failure.describe()), MAX_UPSTREAM_MESSAGE);
                let mut hint = format!("Server {key} could not be reached (tried once): {reason}.");
                let annotations = entry.tool.get("annotations");
                let safe = ["readOnlyHint", "idempotentHint"]
                    .iter()
                    .any(|hint| annotations.and_then(|a| a.get(*hint)) == Some(&Value::Bool(true)));
                if !safe {
                    hint.push_str(&format!(
                        " {exposed} is not marked read-only or idempotent, so the bridge did not retry it; it may or may not have run."
                    ));
                }
                hint.push_str(" Tools of other servers keep working.");
                Err(ToolError::new("upstream_unavailable", hint)
                    .with("server", json!(key))
                    .with("attempts", json!(1))
                    .with("retryAfterSeconds", json!(0)))
            }
        }
    }
}

/// The error of a call to a server that cannot be called as configured: nothing was sent.
fn misconfigured(key: &str, reason: &str) -> ToolError {
    ToolError::new(
        "upstream_unavailable",
        format!(
            "Server {key} cannot be called: {}. The call was not sent; calling again will not help until its configuration is fixed. Tools of other servers keep working.",
            cut(reason, MAX_UPSTREAM_MESSAGE)
        ),
    )
    .with("server", json!(key))
    .with("attempts", json!(0))
    .with("misconfigured", json!(true))
}

fn cut(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        text.to_owned()
    } else {
        let mut head: String = text.chars().take(limit - 1).collect();
        head.push('…');
        head
    }
}
